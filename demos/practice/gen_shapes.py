"""Generated Shape lab questions: a random legal chain of shape ops on a small tensor; torch grades the answer.

The chain is built one op at a time and kept only where the lab (torch on meta tensors) runs it, so every question
has an answer; the explanation is the lab's own step list, and the question's link opens the lab on the chain.
"""

import math
import random

from demos.parsing import format_shape
from demos.practice.family import Family
from demos.quiz import Question
from demos.tensors.shapes import evaluate, lab_query

NAME = "shape_chain"
STEPS = (2, 4)


def _op(rng: random.Random, shape: tuple, expr: str) -> str:
    """One random op applied to expr (whose shape is `shape`); it may be illegal, the caller checks with the lab."""
    n = len(shape)
    kind = rng.choice(["permute", "transpose", "flatten", "unsqueeze", "reduce", "view", "index", "linear",
                       "squeeze", "matmul"])
    if kind == "permute" and n >= 2:
        order = list(range(n))
        while order == sorted(order):
            rng.shuffle(order)
        return f"{expr}.permute({', '.join(map(str, order))})"
    if kind == "transpose" and n >= 2:
        i, j = rng.sample(range(n), 2)
        return f"{expr}.transpose({i}, {j})"
    if kind == "flatten" and n >= 2:
        return f"{expr}.flatten({rng.randrange(n - 1)})" if rng.random() < 0.7 else f"{expr}.flatten()"
    if kind == "unsqueeze":
        return f"{expr}.unsqueeze({rng.randint(-n - 1, n)})"
    if kind == "reduce" and n >= 1:
        op = rng.choice(["sum", "mean", "amax", "argmax"])
        keep = ", keepdim=True" if rng.random() < 0.4 else ""
        return f"{expr}.{op}({rng.randrange(-n, n)}{keep})"
    if kind == "view" and n >= 1:
        numel = math.prod(shape)
        k = rng.choice([d for d in range(2, 13) if numel % d == 0] or [1])
        return f"{expr}.{rng.choice(['view', 'reshape'])}({k}, -1)" if rng.random() < 0.5 else \
            f"{expr}.reshape(-1, {k})"
    if kind == "index" and n >= 1:
        return f"{expr}[{rng.choice([':, None', '..., ::2', '0', 'None', '1:', '..., None'])}]"
    if kind == "linear" and n >= 1:
        return f"nn.Linear({shape[-1]}, {rng.randint(2, 9)})({expr})"
    if kind == "squeeze" and 1 in shape:
        return f"{expr}.squeeze()" if rng.random() < 0.5 else f"{expr}.squeeze({shape.index(1)})"
    if kind == "matmul" and n >= 1:
        return f"{expr} @ torch.ones({shape[-1]}, {rng.randint(2, 7)})"
    return f"{expr}.unsqueeze(0)"


def chain(rng: random.Random) -> tuple[str, str]:
    """(tensors, expression) of a legal chain: 2 to 4 ops on a tensor of rank 2 to 4 with sizes 1 to 6."""
    shape = tuple(rng.choice((1, 2, 3, 4, 5, 6)) for _ in range(rng.randint(2, 4)))
    tensors = f"x: {', '.join(map(str, shape))}"
    expr, current, wanted = "x", shape, rng.randint(*STEPS)
    for _ in range(wanted * 6):
        if expr.count("(") + expr.count("[") >= wanted:
            break
        candidate = _op(rng, current, expr)
        r = evaluate(tensors, candidate)
        if r.error is None and 0 < len(r.shape) <= 5:
            expr, current = candidate, r.shape
    return tensors, expr


def _explain(tensors: str, expr: str) -> str:
    r = evaluate(tensors, expr)
    steps = "; ".join(f"`{s.text}` gives {format_shape(s.outputs[0])}" + (f" ({s.arithmetic})" if s.arithmetic
                                                                             else "") for s in r.steps)
    return f"As the Shape lab runs it, step by step: {steps}. So the shape is {format_shape(r.shape)}."


def question(rng: random.Random) -> Question:
    tensors, expr = chain(rng)
    shape = tensors.split(":")[1].strip()
    code = ("import torch\nfrom torch import nn\n\n"
            f"x = torch.zeros({shape})\nprint(({expr}).shape)\n")
    return Question.from_code("", f"x has shape ({shape}). What is the shape of {expr}?", code,
                              _explain(tensors, expr), kind="shape")


def section(seed: int) -> tuple[tuple[str, str], ...]:
    """The lab link for this seed's chain: the Tensors page opens the Shape lab on it."""
    return tuple(lab_query(*chain(random.Random(f"{NAME}@{seed}"))).items())


FAMILIES = (
    Family(NAME, "Shape after a chain of ops", "tensors", "Shape lab", question, None,
           (("tensors_tab", "Shape lab"),), section_for=section),
)
