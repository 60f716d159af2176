"""Loop mistakes executed beside the correct loop, each with the symptom it leaves in the numbers."""

import warnings
from dataclasses import dataclass

import plotly.graph_objects as go
import torch
from torch import nn

from demos.shown import Script, entry, script, source
from demos.style import COLORS, SERIES, base_layout
from demos.threads import single_threaded
from demos.training.common import IMPORTS, SpiralNet, check_int, check_range, spiral

VARIANTS = {
    "correct": "Correct loop",
    "no_zero_grad": "No zero_grad",
    "zero_grad_before_step": "zero_grad between backward and step",
    "step_before_backward": "step before backward",
    "scheduler_first": "scheduler.step() before optimizer.step()",
    "no_train_after_eval": "Never back to train() after eval()",
    "softmax_into_ce": "Softmax outputs fed to CrossEntropyLoss",
    "accumulate_tensor": "Logging loss tensors instead of .item()",
}
MISTAKES = tuple(k for k in VARIANTS if k != "correct")
N_TRAIN, BATCH, EVAL_EVERY, STEP_SIZE, GAMMA = 256, 64, 10, 40, 0.5
DROPOUT = 0.1
MIN_STEPS, MAX_STEPS = 20, 300
MIN_LR, MAX_LR = 0.01, 1.0


@dataclass(frozen=True)
class LoopRun:
    """Per-step records of one loop: what it logged, and what its optimizer actually saw."""

    variant: str
    losses: tuple[float, ...]
    lrs: tuple[float, ...]  # learning rate in force at each optimizer.step()
    grad_norms: tuple[float, ...]  # norm of .grad as optimizer.step() saw it (0 when .grad is None)
    training: tuple[bool, ...]  # model.training at each forward
    graph_nodes: tuple[int, ...]  # autograd nodes reachable from the logged total (0 when it is a float)
    param_change: float  # max |θ_end - θ_start|
    val_loss: float  # cross-entropy of the final model on held-out points
    warnings: tuple[str, ...]
    code: Script


@dataclass(frozen=True)
class MistakesResult:
    steps: int
    lr: float
    seed: int
    runs: dict  # variant -> LoopRun
    control: LoopRun  # the correct loop with dropout switched off at the first eval: the trap minus eval-mode BatchNorm


# The loop's torch core: the demo runs these and the page shows their source (demos/shown.py). Each mistake is one
# train step (or validation) function beside the correct one; the loop around them is shared.


def train_step(model, optimizer, scheduler, loss_fn, x, y):
    """One correct step: clear .grad, forward, backward, update, schedule."""
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def step_without_zero_grad(model, optimizer, scheduler, loss_fn, x, y):
    # optimizer.zero_grad()  <- missing: .grad keeps summing every step
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def step_zero_grad_before_step(model, optimizer, scheduler, loss_fn, x, y):
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.zero_grad()  # <- wipes the gradient just computed
    optimizer.step()  # sees .grad None: nothing moves
    scheduler.step()
    return loss.item()


def step_before_backward(model, optimizer, scheduler, loss_fn, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    optimizer.step()  # <- .grad is still None here: nothing moves
    loss.backward()
    scheduler.step()
    return loss.item()


def step_scheduler_first(model, optimizer, scheduler, loss_fn, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    scheduler.step()  # <- before optimizer.step(): warns, the schedule shifts one step early
    optimizer.step()
    return loss.item()


def step_softmax_into_ce(model, optimizer, scheduler, loss_fn, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x).softmax(dim=1), y)  # <- CrossEntropyLoss applies log_softmax itself
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def step_logging_the_tensor(model, optimizer, scheduler, loss_fn, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss  # <- a tensor: the running total keeps every step's graph reachable


def validate(model, x_val):
    """A look at held-out data in eval mode, then back to training."""
    model.eval()
    with torch.no_grad():
        model(x_val)
    model.train()


def validate_forgetting_train(model, x_val):
    model.eval()
    with torch.no_grad():
        model(x_val)
    # model.train()  <- missing: dropout off, batch-norm statistics frozen from now on


def train(step_fn, validate_fn, steps, lr, seed, dropout, watch=None):
    """Train the spiral classifier with step_fn, validating every EVAL_EVERY steps; the model and its validation
    loss. `watch` is the page's recorder (hooks on the model, loss and optimizer); the script runs without one."""
    torch.manual_seed(seed)
    x, y = spiral(N_TRAIN, seed)
    x_val, y_val = spiral(N_TRAIN, seed + 1)
    model = SpiralNet(16, dropout=dropout, batchnorm=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=STEP_SIZE, gamma=GAMMA)
    loss_fn = nn.CrossEntropyLoss()
    if watch:
        watch.start(model, optimizer, loss_fn)
    batches = torch.Generator().manual_seed(seed)  # its own generator: dropout's draws never change the batches
    running = 0.0
    for step in range(steps):
        idx = torch.randint(0, N_TRAIN, (BATCH,), generator=batches)
        running = running + step_fn(model, optimizer, scheduler, loss_fn, x[idx], y[idx])
        if watch:
            watch.logged(running)
        if (step + 1) % EVAL_EVERY == 0:
            validate_fn(model, x_val)
    model.eval()
    with torch.no_grad():
        return model, loss_fn(model(x_val), y_val).item()


def validate_then_dropout_off(model, x_val):
    """The control for validate_forgetting_train: back to train() (batch norm keeps learning its statistics), but
    dropout off from now on, as it is in eval mode. Dropout with p = 0 draws no random numbers, so the batches are
    the trap's."""
    model.eval()
    with torch.no_grad():
        model(x_val)
    model.train()
    model.drop.p = 0.0


CONTROL = "dropout_off_after_eval"
LOOPS = {  # variant -> (train step, validation): each mistake changes exactly one of the two
    "correct": (train_step, validate),
    "no_zero_grad": (step_without_zero_grad, validate),
    "zero_grad_before_step": (step_zero_grad_before_step, validate),
    "step_before_backward": (step_before_backward, validate),
    "scheduler_first": (step_scheduler_first, validate),
    "no_train_after_eval": (train_step, validate_forgetting_train),
    "softmax_into_ce": (step_softmax_into_ce, validate),
    "accumulate_tensor": (step_logging_the_tensor, validate),
    CONTROL: (train_step, validate_then_dropout_off),  # not a mistake: the trap with batch norm still training
}
LOOP_CONSTANTS = {"N_TRAIN": N_TRAIN, "BATCH": BATCH, "EVAL_EVERY": EVAL_EVERY, "STEP_SIZE": STEP_SIZE,
                  "GAMMA": GAMMA}


def loop_script(variant: str, steps: int, lr: float, seed: int, dropout: float) -> Script:
    """The runnable script for one variant: the spiral task, its steps, the loop, and a line that prints the
    validation loss the page reports."""
    step_fn, validate_fn = LOOPS[variant]
    return script(spiral, SpiralNet, step_fn, validate_fn, train, imports=IMPORTS,
                  settings={**LOOP_CONSTANTS, "steps": steps, "lr": lr, "seed": seed, "dropout": dropout},
                  run=f"model, val_loss = train({step_fn.__name__}, {validate_fn.__name__}, steps, lr, seed, dropout)\n"
                      "print(\"validation loss\", val_loss)")


def differing_source(variant: str) -> tuple[str, str]:
    """The correct loop's function and the variant's in its place (the step, or the validation), for side by side."""
    pairs = zip(LOOPS["correct"], LOOPS[variant], strict=True)
    good, bad = next(((g, b) for g, b in pairs if g is not b), (train_step, train_step))
    return source(good), source(bad)


class _NodeCounter:
    """Autograd nodes reachable from a growing graph; each node is visited once, since old nodes stay reachable."""

    def __init__(self):
        self.seen = set()

    def count(self, fn) -> int:
        stack = [fn]
        while stack:
            node = stack.pop()
            if node is None or node in self.seen:
                continue
            self.seen.add(node)
            stack.extend(n for n, _ in node.next_functions)
        return len(self.seen)


def _grad_norm(model) -> float:
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    return torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads])).item() if grads else 0.0


class _Recorder:
    """What each training step saw, read by hooks: the loss, model.training at each forward, the lr and .grad norm
    at each optimizer.step(), and the autograd nodes held by the logged total. Validation runs under no_grad and is
    not recorded."""

    def __init__(self):
        self.losses, self.lrs, self.norms, self.training, self.nodes = [], [], [], [], []
        self.counter = _NodeCounter()

    def start(self, model, optimizer, loss_fn):
        self.model, self.begin = model, [p.detach().clone() for p in model.parameters()]
        model.register_forward_pre_hook(self.forward)
        loss_fn.register_forward_hook(self.loss)
        optimizer.register_step_pre_hook(self.step)

    def forward(self, model, args):
        if torch.is_grad_enabled():
            self.training.append(model.training)

    def loss(self, loss_fn, args, out):
        if torch.is_grad_enabled():
            self.losses.append(out.item())

    def step(self, optimizer, args, kwargs):
        self.lrs.append(optimizer.param_groups[0]["lr"])
        self.norms.append(_grad_norm(self.model))

    def logged(self, running):
        self.nodes.append(self.counter.count(running.grad_fn) if torch.is_tensor(running) else 0)

    def change(self) -> float:
        """max |θ_end - θ_start|"""
        return max((p.detach() - s).abs().max().item() for p, s in zip(self.model.parameters(), self.begin,
                                                                        strict=True))


@entry("no_train_after_eval", 20, 0.5, 3)  # the page shows the code of each run that mistakes() made
@single_threaded
def run_loop(variant: str, steps: int = 150, lr: float = 0.5, seed: int = 0, dropout: float = DROPOUT) -> LoopRun:
    """Train the spiral classifier `steps` steps with the given loop variant; record what each step saw."""
    if variant not in LOOPS:
        raise ValueError(f"unknown variant {variant!r}")
    check_int(steps, "Steps", MIN_STEPS, MAX_STEPS)
    check_range(lr, "Learning rate", MIN_LR, MAX_LR)
    check_int(seed, "Seed", 0, 10_000)
    step_fn, validate_fn = LOOPS[variant]
    watch = _Recorder()
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        _, val = train(step_fn, validate_fn, steps, lr, seed, dropout, watch)
    caught = [str(r.message) for r in records if "lr_scheduler.step()" in str(r.message)]
    return LoopRun(variant, tuple(watch.losses), tuple(watch.lrs), tuple(watch.norms), tuple(watch.training),
                   tuple(watch.nodes), watch.change(), val, tuple(dict.fromkeys(caught)),
                   loop_script(variant, steps, lr, seed, dropout))


@single_threaded
def mistakes(steps: int = 150, lr: float = 0.5, seed: int = 0) -> MistakesResult:
    """The correct loop and every mistake, same seed, same data, same model."""
    return MistakesResult(steps, lr, seed, {v: run_loop(v, steps, lr, seed) for v in VARIANTS},
                          run_loop(CONTROL, steps, lr, seed))


def why_eval_scores_better(result: MistakesResult) -> str:
    """When staying in eval mode beats the correct loop, the gap split in two by the control run: correct → control
    is dropout switched off, control → trap is batch norm in eval mode as well; '' when the trap does not win."""
    correct, trap, control = result.runs["correct"], result.runs["no_train_after_eval"], result.control
    if trap.val_loss >= correct.val_loss:
        return ""
    off = trap.training.index(False)
    said = (f"Why it scores better here (validation loss {trap.val_loss:.3f} against {correct.val_loss:.3f}, a gap "
            f"of {correct.val_loss - trap.val_loss:.3f}): from step {off} on it trains with dropout off and batch-norm "
            f"statistics frozen. A control run changes only the first: the correct loop with dropout switched off at "
            f"step {off}, batch norm still training. It reaches {control.val_loss:.3f}. "
            + _gap_split(correct.val_loss, control.val_loss, trap.val_loss))
    return said + (" Better or worse, this is not the training you configured, and nothing warned you: the lesson "
                   "is that eval() silently changes the forward pass.")


def _gap_split(correct: float, control: float, trap: float) -> str:
    """How much of correct − trap the control's one change (dropout off) moves, and how much eval-mode batch norm."""
    gap, dropout, batchnorm = correct - trap, correct - control, control - trap
    if dropout >= 0 and batchnorm >= 0:
        return (f"Dropout off accounts for {dropout:.2g} of the gap ({dropout / gap:.0%}), batch norm in eval mode "
                f"for the other {batchnorm:.2g} ({batchnorm / gap:.0%}).")
    if dropout < 0:
        return (f"Dropout off alone is worse, by {-dropout:.2g}: batch norm in eval mode makes up the whole gap and "
                f"that too ({batchnorm:.2g}).")
    return (f"Dropout off alone gains {dropout:.2g}, more than the whole gap; batch norm in eval mode gives "
            f"{-batchnorm:.2g} of it back.")


def symptom(run: LoopRun, correct: LoopRun) -> str:
    """One measured sentence: what this variant did differently from the correct loop."""
    v = run.variant
    if v == "correct":
        return f"Loss {run.losses[0]:.3f} → {run.losses[-1]:.3f}; validation loss {run.val_loss:.3f}."
    if v == "no_zero_grad":
        return (f"The gradient the optimizer saw grew to norm {max(run.grad_norms):.3g} "
                f"(correct loop: at most {max(correct.grad_norms):.3g}); validation loss {run.val_loss:.3f}.")
    if v in ("zero_grad_before_step", "step_before_backward"):
        return (f"optimizer.step() always saw .grad = None: parameters moved by max |Δθ| = {run.param_change:g}; "
                f"validation loss stays {run.val_loss:.3f}.")
    if v == "scheduler_first":
        first_drop = next((i for i, lr in enumerate(run.lrs) if lr < run.lrs[0]), None)
        msg = run.warnings[0].split(" In PyTorch")[0] if run.warnings else "(no warning)"
        return f"PyTorch warned: “{msg}” The learning rate dropped at step {first_drop}, one step early."
    if v == "no_train_after_eval":
        off = run.training.index(False) if False in run.training else None
        return (f"model.training is False from step {off} on: dropout is off and batch-norm running statistics "
                f"stop updating; validation loss {run.val_loss:.3f} vs {correct.val_loss:.3f}.")
    if v == "softmax_into_ce":
        return (f"The loss can never go below log(1 + e⁻¹) = 0.313 on probabilities: lowest seen "
                f"{min(run.losses):.3f}; gradients shrink; validation loss {run.val_loss:.3f}.")
    return (f"Same losses as the correct loop, but the logged total is a tensor holding {run.graph_nodes[-1]} autograd "
            f"nodes after {len(run.losses)} steps (it grows every step).")


def loss_figure(result: MistakesResult, variants) -> go.Figure:
    """Training loss per step for each chosen mistake (log scale), and the correct loop drawn last, dashed, on top:
    a mistake whose losses equal the correct loop's shows through the dashes instead of hiding it."""
    fig = go.Figure()
    mistakes_shown = [v for v in variants if v != "correct"]
    for i, v in enumerate(mistakes_shown, 1):
        fig.add_scatter(y=result.runs[v].losses, mode="lines", name=VARIANTS[v], legendrank=1000 + i,
                        line=dict(width=2.5, color=SERIES[1 + (i - 1) % (len(SERIES) - 1)]))
    fig.add_scatter(y=result.runs["correct"].losses, mode="lines", name=VARIANTS["correct"], legendrank=1,
                    line=dict(width=3, dash="dash", color=COLORS["parameter"]))
    fig.update_xaxes(title="step")
    fig.update_yaxes(title="training loss (as the loop logged it)", type="log", exponentformat="power")
    return base_layout(fig, height=380)


def symptom_figure(result: MistakesResult, variant: str) -> go.Figure:
    """The quantity in which this mistake shows itself, correct loop beside it."""
    correct, run = result.runs["correct"], result.runs[variant]
    label, get = {
        "no_zero_grad": ("norm of .grad at optimizer.step()", lambda r: r.grad_norms),
        "zero_grad_before_step": ("norm of .grad at optimizer.step()", lambda r: r.grad_norms),
        "step_before_backward": ("norm of .grad at optimizer.step()", lambda r: r.grad_norms),
        "scheduler_first": ("learning rate used by optimizer.step()", lambda r: r.lrs),
        "no_train_after_eval": ("model.training (1 = train mode)", lambda r: [int(t) for t in r.training]),
        "softmax_into_ce": ("training loss", lambda r: r.losses),
        "accumulate_tensor": ("autograd nodes held by the logged total", lambda r: r.graph_nodes),
    }[variant]
    fig = go.Figure()  # the correct loop drawn last and dashed: equal values stay visible under it
    fig.add_scatter(y=get(run), mode="lines", name=VARIANTS[variant], line=dict(color=COLORS["error"], width=3),
                    legendrank=2)
    fig.add_scatter(y=get(correct), mode="lines", name="correct", legendrank=1,
                    line=dict(color=COLORS["parameter"], width=3, dash="dash"))
    if variant == "softmax_into_ce":
        fig.add_hline(y=0.3133, line_dash="dot", annotation_text="floor log(1+e⁻¹)")
    fig.update_xaxes(title="step")
    fig.update_yaxes(title=label)
    return base_layout(fig, height=300)
