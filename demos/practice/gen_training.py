"""Generated questions on the training loop: learning-rate schedules and loss values, traps included."""

import math
import random

from demos.practice.family import Family, num
from demos.quiz import Question


def _schedule(rng: random.Random, lr: float, t: int) -> tuple[str, str, float]:
    """(scheduler code, the rule as text, lr after t steps by that rule)."""
    gamma = rng.choice((0.1, 0.5, 0.9))
    kind = rng.choice(["step", "multistep", "exponential", "cosine", "linear"])
    if kind == "step":
        size = rng.randint(2, 4)
        return (f"StepLR(opt, step_size={size}, gamma={gamma})",
                f"lr × {gamma}^⌊t / {size}⌋ = {lr} × {gamma}^{t // size}", lr * gamma ** (t // size))
    if kind == "multistep":
        first = rng.randint(1, 5)
        marks = [first, first + rng.randint(1, 4)]
        passed = sum(m <= t for m in marks)
        return (f"MultiStepLR(opt, milestones={marks}, gamma={gamma})",
                f"lr × {gamma} per milestone passed ({passed} of {marks}) = {lr} × {gamma}^{passed}",
                lr * gamma**passed)
    if kind == "exponential":
        return f"ExponentialLR(opt, gamma={gamma})", f"lr × {gamma}^t = {lr} × {gamma}^{t}", lr * gamma**t
    if kind == "cosine":
        period = rng.randint(t, t + 6)
        return (f"CosineAnnealingLR(opt, T_max={period})",
                f"lr × (1 + cos(π·t / {period})) / 2 at t = {t}", lr * (1 + math.cos(math.pi * t / period)) / 2)
    start, total = rng.choice((0.1, 0.25, 0.5)), rng.randint(2, 8)
    factor = start + (1 - start) * min(t, total) / total
    return (f"LinearLR(opt, start_factor={start}, total_iters={total})",
            f"lr × ({start} + (1 − {start}) × min(t, {total}) / {total}) = {lr} × {num(factor)}", lr * factor)


def scheduler_question(rng: random.Random) -> Question:
    lr, t = rng.choice((0.1, 1.0, 0.01)), rng.randint(1, 10)
    made, rule, value = _schedule(rng, lr, t)
    code = ("import torch\n\nopt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr="
            f"{lr})\nsched = torch.optim.lr_scheduler.{made}\nfor _ in range({t}):\n    opt.step()\n"
            "    sched.step()\nprint(sched.get_last_lr()[0])\n")
    return Question.from_code(
        "", f"{made} with lr={lr}: what is the learning rate after {t} scheduler steps?", code,
        f"{rule} = {num(value)}. Each sched.step() moves t on by one, after opt.step().", kind="number",
    )


def _floats(values) -> str:
    return "[" + ", ".join(f"{float(v)}" for v in values) + "]"


def mse_question(rng: random.Random) -> Question:
    b = rng.randint(2, 4)
    pred, target = [rng.randint(-3, 3) for _ in range(b)], [rng.randint(-3, 3) for _ in range(b)]
    while len(set(target)) == 1:  # with one distinct target value the trap changes nothing
        target = [rng.randint(-3, 3) for _ in range(b)]
    trap = rng.random() < 0.6
    pred_code = "[" + ", ".join(f"[{float(p)}]" for p in pred) + "]"
    line = "nn.MSELoss()(pred, target)" if trap else "nn.MSELoss()(pred.squeeze(1), target)"
    code = (f"import torch\nfrom torch import nn\n\npred = torch.tensor({pred_code})  # shape ({b}, 1)\n"
            f"target = torch.tensor({_floats(target)})  # shape ({b},)\nprint({line})\n")
    paired = sum((p - t) ** 2 for p, t in zip(pred, target, strict=True)) / b
    crossed = sum((p - t) ** 2 for p in pred for t in target) / b**2
    if trap:
        explain = (f"({b}, 1) against ({b},) broadcasts to ({b}, {b}): every prediction meets every target, and "
                   f"the mean of those {b * b} squared errors is {num(crossed)} (torch warns, but runs). With "
                   f"matching shapes the loss would be {num(paired)}.")
    else:
        explain = (f"squeeze(1) makes pred ({b},), so each prediction meets its own target: the mean squared error "
                   f"is {num(paired)}. Without it, ({b}, 1) against ({b},) would broadcast to ({b}, {b}) and give "
                   f"{num(crossed)}.")
    return Question.from_code(
        "", f"pred has shape ({b}, 1) and target has shape ({b},). What does the loss below print?", code, explain,
        kind="number",
    )


def cross_entropy_question(rng: random.Random) -> Question:
    logits = [rng.randint(-2, 3) for _ in range(rng.randint(3, 5))]
    target, smoothing = rng.randrange(len(logits)), rng.choice((0.0, 0.0, 0.1, 0.2))
    lse = math.log(sum(math.exp(z) for z in logits))
    nll = lse - logits[target]
    loss = (1 - smoothing) * nll + smoothing * sum(lse - z for z in logits) / len(logits)
    made = "nn.CrossEntropyLoss()" if not smoothing else f"nn.CrossEntropyLoss(label_smoothing={smoothing})"
    code = (f"import torch\nfrom torch import nn\n\nlogits = torch.tensor([{_floats(logits)}])\n"
            f"print({made}(logits, torch.tensor([{target}])))\n")
    smooth = ("" if not smoothing else
              f" With label_smoothing={smoothing}, the target is mixed with the uniform distribution: "
              f"(1 − {smoothing}) × {num(nll)} + {smoothing} × mean(logsumexp − z) over all classes.")
    return Question.from_code(
        "", f"Logits {_floats(logits)}, target class {target}"
            + (f", label_smoothing={smoothing}" if smoothing else "") + ": what is the cross-entropy loss?",
        code, f"CrossEntropyLoss takes raw logits: loss = logsumexp(z) − z[target] = {num(lse)} − {logits[target]} "
              f"= {num(nll)}.{smooth} Result: {num(loss)}.", kind="number",
    )


FAMILIES = (
    Family("scheduler", "Learning rate of a scheduler at step t", "training-loop", "LR schedules",
           scheduler_question, "LR schedulers", (("tl_tab", "Schedulers"),)),
    Family("mse_trap", "MSE with (B, 1) against (B,)", "training-loop", "Losses", mse_question, "Loss functions",
           (("tl_tab", "Losses"),)),
    Family("cross_entropy", "Cross-entropy of a set of logits", "training-loop", "Losses", cross_entropy_question,
           "Loss functions", (("tl_tab", "Losses"),)),
)
