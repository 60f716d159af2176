"""Generated questions on tensors: broadcasting, strides and contiguity, type promotion, einsum, low precision."""

import math
import random

import torch

from demos.practice.family import Family, answer_text, call, choices, shape_text
from demos.quiz import Question

# ---- broadcasting -----------------------------------------------------------------------------------------------


def broadcast(a: tuple, b: tuple) -> tuple | None:
    """The broadcast shape by the rule (align from the right, sizes equal or 1), or None when torch raises."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    if any(x != y and 1 not in (x, y) for x, y in zip(a, b, strict=True)):
        return None
    return tuple(max(x, y) for x, y in zip(a, b, strict=True))


def _broadcast_pair(rng: random.Random) -> tuple[tuple, tuple]:
    out = [rng.randint(2, 5) for _ in range(rng.randint(2, 4))]
    ra = rng.randint(1, len(out))
    rb = len(out) if ra < len(out) else rng.randint(1, len(out))
    a = [d if rng.random() < 0.6 else 1 for d in out[-ra:]]
    b = [d if rng.random() < 0.6 else 1 for d in out[-rb:]]
    if rng.random() < 0.3:  # a clash: one aligned dim where neither size is 1
        j = rng.randrange(min(ra, rb))
        a[-j - 1] = out[-j - 1]
        b[-j - 1] = out[-j - 1] + rng.choice((1, 2))
    return tuple(a), tuple(b)


def _shape_or_error(shape: tuple | None) -> str:
    return "RuntimeError" if shape is None else shape_text(shape)


def _broadcast_explain(a: tuple, b: tuple) -> str:
    n = max(len(a), len(b))
    pa, pb = ("_",) * (n - len(a)) + a, ("_",) * (n - len(b)) + b
    aligned = f"Align from the right: ({', '.join(map(str, pa))}) against ({', '.join(map(str, pb))})."
    result = broadcast(a, b)
    if result is None:
        pairs = zip(pa, pb, strict=True)
        clashes = [f"{x} vs {y}" for x, y in pairs if "_" not in (x, y) and x != y and 1 not in (x, y)]
        return f"{aligned} {', '.join(clashes)}: neither size is 1, so torch raises RuntimeError."
    return f"{aligned} Each 1 (or missing dim) stretches to the other size, giving {shape_text(result)}."


def broadcast_question(rng: random.Random) -> Question:
    a, b = _broadcast_pair(rng)
    code = f"import torch\n\na = {call('torch.ones', *a)}\nb = {call('torch.ones', *b)}\nprint((a + b).shape)\n"
    answer = answer_text(code, (RuntimeError,))
    n = max(len(a), len(b))
    left = broadcast(a + (1,) * (n - len(a)), b + (1,) * (n - len(b)))  # wrong: aligned from the left
    loose = tuple(max(x, y) for x, y in zip((1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b, strict=True))
    wrong = [_shape_or_error(left), shape_text(loose), "RuntimeError", shape_text(a if len(a) >= len(b) else b),
             shape_text((1, *loose)), shape_text(loose[::-1])]
    return Question.from_code(
        "", f"a has shape {shape_text(a)} and b has shape {shape_text(b)}. What is (a + b).shape, or does it raise?",
        code, _broadcast_explain(a, b), raises=(RuntimeError,), choices=choices(answer, wrong, rng),
    )


# ---- strides, views and contiguity -------------------------------------------------------------------------------


def _view_chain(rng: random.Random) -> tuple[tuple, list[str], list[tuple[tuple, tuple]]]:
    """A base shape, view ops as code, and (shape, stride) after each op by the rules torch documents."""
    base = tuple(rng.randint(2, 5) for _ in range(rng.randint(2, 3)))
    shape, stride = base, tuple(math.prod(base[i + 1 :]) for i in range(len(base)))
    ops, states = [], []
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["transpose", "permute", "unsqueeze", "step", "expand"])
        if kind == "expand" and 1 not in shape:
            kind = "unsqueeze"
        if kind == "step" and shape[0] < 2:
            kind = "transpose"
        if kind in ("transpose", "permute"):
            order = list(range(len(shape)))
            if kind == "transpose":
                i, j = sorted(rng.sample(order, 2))
                order[i], order[j] = j, i
                ops.append(f"y = y.transpose({i}, {j})")
            else:
                while order == sorted(order):
                    rng.shuffle(order)
                ops.append(f"y = y.permute({', '.join(map(str, order))})")
            shape, stride = tuple(shape[k] for k in order), tuple(stride[k] for k in order)
        elif kind == "unsqueeze":
            d = rng.randint(0, len(shape))
            new = shape[d] * stride[d] if d < len(shape) else 1
            shape, stride = shape[:d] + (1,) + shape[d:], stride[:d] + (new,) + stride[d:]
            ops.append(f"y = y.unsqueeze({d})")
        elif kind == "step":
            shape, stride = ((shape[0] + 1) // 2, *shape[1:]), (stride[0] * 2, *stride[1:])
            ops.append("y = y[::2]")
        else:
            d = shape.index(1)
            size = rng.randint(2, 4)
            ops.append(f"y = y.expand({', '.join(str(size) if k == d else '-1' for k in range(len(shape)))})")
            shape, stride = shape[:d] + (size,) + shape[d + 1 :], stride[:d] + (0,) + stride[d + 1 :]
        states.append((shape, stride))
    return base, ops, states


def _chain_code(base: tuple, ops: list[str], last: str) -> str:
    return "import torch\n\ny = " + call("torch.zeros", *base) + "\n" + "\n".join(ops) + f"\nprint({last})\n"


def _chain_story(base: tuple, ops: list[str], states: list) -> str:
    start = tuple(math.prod(base[i + 1 :]) for i in range(len(base)))
    steps = "; ".join(f"`{op.removeprefix('y = ')}` gives shape {shape_text(s)}, strides {shape_text(st)}"
                      for op, (s, st) in zip(ops, states, strict=True))
    return f"A contiguous {shape_text(base)} tensor has strides {shape_text(start)}. Then {steps}."


def strides_question(rng: random.Random) -> Question:
    base, ops, states = _view_chain(rng)
    explain = (_chain_story(base, ops, states) + " A transpose or permute reorders the strides, unsqueeze inserts "
               "one, a step multiplies one, and expand sets the stretched dim's stride to 0: no data moves.")
    return Question.from_code(
        "", f"y starts as torch.zeros{shape_text(base)}, then goes through the views below. What is y.stride()?",
        _chain_code(base, ops, "y.stride()"), explain, kind="shape", placeholder="strides such as (4, 1)",
    )


def contiguous(shape: tuple, stride: tuple) -> bool:
    """torch's rule: walking from the last dim, each dim of size > 1 has stride = product of the sizes after it."""
    expected = 1
    for size, step in zip(reversed(shape), reversed(stride), strict=True):
        if size != 1:
            if step != expected:
                return False
            expected *= size
    return True


def contiguous_question(rng: random.Random) -> Question:
    base, ops, states = _view_chain(rng)
    shape, stride = states[-1]
    rule = contiguous(shape, stride)
    verdict = ("match a fresh row-major layout (dims of size 1 are ignored), so it is contiguous: True" if rule else
               "do not match a fresh row-major layout of that shape, so is_contiguous() is False; "
               ".view(-1) would raise and .reshape(-1) would copy")
    explain = f"{_chain_story(base, ops, states)} Those strides {verdict}."
    code = _chain_code(base, ops, "y.is_contiguous()")
    return Question.from_code(
        "", f"y starts as torch.zeros{shape_text(base)}, then goes through the views below. Is y contiguous?",
        code, explain, choices=choices(answer_text(code), ["True", "False"], rng, least=1),
    )


# ---- type promotion ------------------------------------------------------------------------------------------------

INTS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
SCALARS = {"int": (2, 1), "float": (2.5, 2), "bool": (True, 0)}  # Python scalar -> (value, category)


def category(dtype: torch.dtype) -> int:
    """bool < integer < floating: a lower-dimensional operand only promotes across categories."""
    return 0 if dtype is torch.bool else 2 if dtype.is_floating_point else 1


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def promotion_rule(d1: torch.dtype, other: str, d2: torch.dtype | None) -> tuple[torch.dtype, str]:
    """result_type of a dimensioned d1 tensor and `other` ('tensor', '0-dim' or a Python scalar kind), with why."""
    if other == "tensor":
        return torch.promote_types(d1, d2), "Two dimensioned tensors promote to a dtype that holds both"
    cat = category(d2) if other == "0-dim" else SCALARS[other][1]
    if cat <= category(d1):
        return d1, (f"The {'0-dim tensor' if other == '0-dim' else 'Python ' + other} is not of a higher category "
                    "than the dimensioned tensor, so the dimensioned tensor's dtype wins")
    if other == "0-dim":
        return d2, "A 0-dim tensor of a higher category than the dimensioned tensor lends its own dtype"
    default = torch.int64 if other == "int" else torch.get_default_dtype()
    return default, f"A Python {other} of a higher category gives that category's default dtype"


def promotion_question(rng: random.Random) -> Question:
    d1 = rng.choice((torch.bool, *INTS, *FLOATS))
    other = rng.choice(["tensor", "0-dim", "int", "float", "bool"])
    d2 = rng.choice((torch.bool, *INTS, *FLOATS)) if other in ("tensor", "0-dim") else None
    if other == "tensor":
        b_code, b_text = f"torch.ones(3, dtype=torch.{_name(d2)})", f"a {_name(d2)} tensor of shape (3,)"
    elif other == "0-dim":
        b_code, b_text = f"torch.tensor(1, dtype=torch.{_name(d2)})", f"a 0-dim {_name(d2)} tensor"
    else:
        b_code, b_text = repr(SCALARS[other][0]), f"the Python {other} {SCALARS[other][0]!r}"
    code = f"import torch\n\na = torch.ones(3, dtype=torch.{_name(d1)})\nb = {b_code}\nprint(torch.result_type(a, b))\n"
    rule, why = promotion_rule(d1, other, d2)
    python_float = torch.float64 if other == "float" else None  # wrong: "a Python float is a double"
    as_tensor = torch.promote_types(d1, d2 if d2 is not None else torch.get_default_dtype())  # wrong: no categories
    wrong = [str(d) for d in (d1, as_tensor, python_float, d2, torch.float64, torch.int64, torch.float32) if d]
    return Question.from_code(
        "", f"a is a {_name(d1)} tensor of shape (3,), b is {b_text}. What is torch.result_type(a, b)?",
        code, f"{why}: {rule}.", choices=choices(answer_text(code), wrong, rng),
    )


# ---- einsum ------------------------------------------------------------------------------------------------------

EQUATIONS = ("ij,jk->ik", "bij,bjk->bik", "i,j->ij", "ii->i", "ij->ji", "bhqd,bhkd->bhqk", "ij->j", "bi,ij->bj",
             "ijk->ki", "i,i->")


def einsum_question(rng: random.Random) -> Question:
    equation = rng.choice(EQUATIONS)
    inputs, output = equation.split("->")
    size = {letter: rng.randint(2, 6) for letter in sorted(set(inputs) - {","})}
    operands = [tuple(size[c] for c in term) for term in inputs.split(",")]
    names = "abcd"[: len(operands)]
    lines = [f"{n} = {call('torch.ones', *shape)}" for n, shape in zip(names, operands, strict=True)]
    code = ("import torch\n\n" + "\n".join(lines) +
            f"\nprint(torch.einsum({equation!r}, {', '.join(names)}).shape)\n")
    rule = tuple(size[c] for c in output)
    summed = sorted(set(inputs) - set(output) - {","})
    explain = (f"Sizes: {', '.join(f'{c}={n}' for c, n in size.items())}. The output keeps its letters in order "
               f"({output or 'none: a scalar'})" + (f" and sums over {', '.join(summed)}" if summed else "") +
               f", so the shape is {shape_text(rule)}.")
    given = ", ".join(f"{n} of shape {shape_text(s)}" for n, s in zip(names, operands, strict=True))
    return Question.from_code("", f"With {given}: what is torch.einsum('{equation}', ...).shape?", code, explain,
                              kind="shape")


# ---- low precision -------------------------------------------------------------------------------------------------

LOW = {
    "float16": "float16 keeps 10 fraction bits (spacing 2**-10 near 1), its largest finite value is 65504 and "
               "anything from 65520 up rounds to inf; its smallest positive value is 2**-24 (about 6e-8), and "
               "anything below half of that rounds to 0",
    "bfloat16": "bfloat16 keeps float32's range but only 7 fraction bits (spacing 2**-7 near 1): large and tiny "
                "values survive, rounded to about 3 significant digits",
}


def low_precision_question(rng: random.Random) -> Question:
    dtype = rng.choice(list(LOW))
    kind = rng.choice(["large", "tiny", "near one"])
    if kind == "large":
        value = str(rng.choice((60000, 65504, 65519, 65520, 70000, 100000)))
    elif kind == "tiny":
        value = rng.choice(("1e-8", "3e-8", "1e-7", "5e-6"))
    else:
        value = f"1 + 2**-{rng.randint(6, 12)}"
    code = f"import torch\n\nx = torch.tensor({value}, dtype=torch.{dtype})\nprint(x.item())\n"
    return Question.from_code(
        "", f"What does {value} become when stored as {dtype}?", code,
        f"{LOW[dtype]}. Rounded to the nearest {dtype} value, {value} is {answer_text(code)}.",
        kind="number", exact=kind != "tiny",
    )


FAMILIES = (
    Family("broadcast", "Broadcast result or error", "tensors", "Broadcasting", broadcast_question,
           "Broadcasting rules", (("tensors_tab", "Broadcasting"),)),
    Family("strides", "Strides after a view chain", "tensors", "Strides & views", strides_question,
           "Strides, views and contiguity", (("tensors_tab", "Memory layout"),)),
    Family("contiguous", "Contiguous after a view chain?", "tensors", "Strides & views", contiguous_question,
           "view vs reshape", (("tensors_tab", "Memory layout"),)),
    Family("result_type", "result_type of a tensor, a 0-dim tensor or a scalar", "tensors", "Type promotion",
           promotion_question, "Type promotion", (("tensors_tab", "dtypes"),)),
    Family("einsum", "einsum output shape", "tensors", "einsum", einsum_question, "einsum",
           (("tensors_tab", "einsum"),)),
    Family("low_precision", "A value stored in float16 or bfloat16", "training-loop", "Mixed precision",
           low_precision_question, "Mixed precision", (("tl_tab", "Mixed precision"),)),
)
