"""Generated questions on gradients: the grad of a small expression, accumulation across backward calls, clipping."""

import math
import random

from demos.practice.family import Family, num, plural
from demos.quiz import Question

POINTS = (-2, -1, -0.5, 0, 0.5, 1, 1.5, 2)


def _expression(rng: random.Random) -> tuple[str, str, float, float]:
    """(code for y, the derivative as a formula, x, dy/dx at x by the rule)."""
    a = rng.choice((-3, -2, -1, 2, 3))
    b = rng.randint(-3, 3)
    x = rng.choice(POINTS)
    kind = rng.choice(["poly", "sin", "exp", "square", "sigmoid", "relu"])
    if kind == "poly":
        k = rng.choice((2, 3))
        return f"{a} * x**{k} + {b} * x", f"{a}·{k}·x^{k - 1} + {b}", x, a * k * x ** (k - 1) + b
    if kind == "sin":
        return f"{a} * torch.sin(x)", f"{a}·cos(x)", x, a * math.cos(x)
    if kind == "exp":
        return f"torch.exp({a} * x)", f"{a}·exp({a}·x)", x, a * math.exp(a * x)
    if kind == "square":
        return f"({a} * x + {b}) ** 2", f"2·{a}·({a}·x + {b})", x, 2 * a * (a * x + b)
    if kind == "sigmoid":
        s = 1 / (1 + math.exp(-x))
        return "torch.sigmoid(x)", "sigmoid(x)·(1 − sigmoid(x))", x, s * (1 - s)
    return (f"torch.relu({a} * x)", f"{a} where {a}·x > 0, else 0 (torch uses 0 at exactly 0)", x,
            a if a * x > 0 else 0.0)


def grad_question(rng: random.Random) -> Question:
    expr, formula, x, rule = _expression(rng)
    code = (f"import torch\n\nx = torch.tensor({float(x)}, requires_grad=True)\ny = {expr}\ny.backward()\n"
            "print(x.grad)\n")
    return Question.from_code(
        "", f"y = {expr} at x = {float(x)}. What is x.grad after y.backward()?", code,
        f"dy/dx = {formula}; at x = {float(x)} that is {num(rule)}. backward() writes it into x.grad.",
        kind="number",
    )


def accumulation_question(rng: random.Random) -> Question:
    """Steps are numbered from 1 in the snippet as in the prompt: 'zeroed after step 2' is after the 2nd backward."""
    c, w, steps = rng.randint(2, 4), rng.choice((-2, -1, 0.5, 1, 2, 3)), rng.randint(2, 5)
    zero_at = rng.choice([None, *range(1, steps)])
    reset = "" if zero_at is None else f"\n    if step == {zero_at}:\n        w.grad.zero_()"
    numbered = ", ".join(str(i) for i in range(1, steps + 1))
    code = (f"import torch\n\nw = torch.tensor({float(w)}, requires_grad=True)\nfor step in ({numbered}):\n"
            f"    loss = {c} * w**2\n    loss.backward(){reset}\nprint(w.grad)\n")
    each = 2 * c * w
    counted = steps if zero_at is None else steps - zero_at
    how = ("Nothing zeroes it, so" if zero_at is None else
           f"The zero_() after step {zero_at}'s backward clears it, and only {plural(counted, 'later backward call')} "
           f"{'counts' if counted == 1 else 'count'}, so")
    prompt = (f"loss = {c}·w² at w = {float(w)}, and backward() runs {steps} times (steps 1 to {steps})"
              + ("" if zero_at is None else f", with w.grad zeroed after step {zero_at}") + ". What is w.grad?")
    return Question.from_code(
        "", prompt, code,
        f"Each backward adds dloss/dw = 2·{c}·w = {num(each)} into w.grad. {how} w.grad = {counted} × {num(each)} "
        f"= {num(counted * each)}.", kind="number",
    )


def clipping_question(rng: random.Random) -> Question:
    ga = [rng.randint(-6, 6) for _ in range(2)]
    gb = [rng.choice((-12, -4, 2, 4, 8))]
    max_norm = rng.choice((1, 2, 5, 10, 20))
    total = math.sqrt(sum(g * g for g in ga + gb))
    coef = min(1.0, max_norm / (total + 1e-6))
    ask_norm = rng.random() < 0.5
    last = "print(norm)" if ask_norm else "print(a.grad[0])"
    code = ("import torch\n\na = torch.zeros(2, requires_grad=True)\nb = torch.zeros(1, requires_grad=True)\n"
            f"a.grad = torch.tensor({[float(g) for g in ga]})\nb.grad = torch.tensor({[float(g) for g in gb]})\n"
            f"norm = torch.nn.utils.clip_grad_norm_([a, b], max_norm={max_norm})\n{last}\n")
    asked = "the returned norm" if ask_norm else "a.grad[0] afterwards"
    scaled = ("it is at most max_norm, so nothing is scaled" if coef == 1 else
              f"every gradient is scaled by {max_norm} / {num(total)} = {num(coef)}")
    rule = total if ask_norm else ga[0] * coef
    squares = " + ".join(f"({g})²" if g < 0 else f"{g}²" for g in ga + gb)
    return Question.from_code(
        "", f"a.grad = {[float(g) for g in ga]}, b.grad = {[float(g) for g in gb]}, then "
            f"clip_grad_norm_([a, b], max_norm={max_norm}). What is {asked}?",
        code, f"The total norm over all parameters is √({squares}) = {num(total)}; "
              f"{scaled}. clip_grad_norm_ returns the norm before clipping. Here the answer is {num(rule)}.",
        kind="number",
    )


FAMILIES = (
    Family("grad", "The gradient of a small expression", "autograd", "Gradients", grad_question,
           "Dynamic graph and grad_fn"),
    Family("accumulate", "Gradients accumulating over backward calls", "autograd", "Gradient accumulation",
           accumulation_question, "Gradient accumulation"),
    Family("clip", "clip_grad_norm_: the norm and the clipped gradient", "gradient-flow", "Gradient clipping",
           clipping_question, "Gradient clipping"),
)
