"""einsum: parse and validate an equation against shapes, name each index's role, find the standard op it equals."""

import functools
import itertools
import math
import re
from dataclasses import dataclass

import pandas as pd
import torch

from demos.errors import InputError, quoted
from demos.parsing import MAX_TEXT, format_shape, parse_shape, plural, text_field
from demos.shown import Script, entry, script
from demos.style import COLORS, darkened, text_on
from demos.tensors.common import catchable, torch_error

MAX_OPERANDS = 3
MAX_INDICES = 8
MAX_DIM = 512
MAX_OPERAND_NUMEL = 1 << 20
MAX_ITERATIONS = 5_000_000  # the full loop nest: every index's size multiplied
MAX_PY_LOOP = 5_000  # the loop nest also runs in plain Python up to this many iterations
NAMES = ("A", "B", "C")
ROLE_COLORS = {"batch": COLORS["optimizer_state"], "free": COLORS["parameter"], "contracted": COLORS["gradient"]}

PRESETS = {
    "matmul": ("ij,jk->ik", "(2, 3); (3, 4)"),
    "batched matmul": ("bij,bjk->bik", "(2, 2, 3); (2, 3, 4)"),
    "attention scores": ("bhqd,bhkd->bhqk", "(1, 2, 3, 4); (1, 2, 5, 4)"),
    "outer product": ("i,j->ij", "(3,); (4,)"),
    "trace": ("ii->", "(4, 4)"),
    "diagonal": ("ii->i", "(4, 4)"),
    "bilinear form": ("i,ij,j->", "(3,); (3, 4); (4,)"),
    "transpose": ("ij->ji", "(2, 3)"),
    "sum over rows": ("ij->j", "(3, 4)"),
}

# The standard ops an einsum pattern equals; each takes the einsum's operands.


def by_matmul(a, b):
    return a @ b


def by_linear(a, b):
    return a @ b.T


def by_bmm(a, b):
    return torch.bmm(a, b)


def by_bmm_transposed(a, b):
    return torch.bmm(a, b.transpose(1, 2))


def by_attention_scores(a, b):
    return a @ b.transpose(-2, -1)


def by_outer(a, b):
    return torch.outer(a, b)


def by_dot(a, b):
    return torch.dot(a, b)


def by_mv(a, b):
    return torch.mv(a, b)


def by_trace(a):
    return torch.trace(a)


def by_diagonal(a):
    return torch.diagonal(a)


def by_transpose(a):
    return a.T


def by_bilinear(a, b, c):
    return a @ b @ c


def by_product(a, b):
    return a * b


def by_product_sum(a, b):
    return (a * b).sum()


def by_sum_permute(a, dropped, order):
    """One operand without repeated indices: sum away the dims the output drops, then put the rest in the
    output's order."""
    if dropped:
        a = a.sum(dim=dropped)
    return a.permute(order)


# Canonical equation (indices renamed a, b, c... in order of appearance) -> (name, code, function).
EQUIVALENTS = {
    "ab,bc->ac": ("matmul", "A @ B", by_matmul),
    "ab,cb->ac": ("matmul with B transposed (nn.Linear)", "A @ B.T", by_linear),
    "abc,acd->abd": ("bmm", "torch.bmm(A, B)", by_bmm),
    "abc,adc->abd": ("bmm with B transposed", "torch.bmm(A, B.transpose(1, 2))", by_bmm_transposed),
    "abcd,abde->abce": ("batched matmul", "A @ B", by_matmul),
    "abcd,abed->abce": ("matmul with a transpose (attention scores)", "A @ B.transpose(-2, -1)", by_attention_scores),
    "a,b->ab": ("outer", "torch.outer(A, B)", by_outer),
    "a,a->": ("dot", "torch.dot(A, B)", by_dot),
    "ab,b->a": ("matrix-vector (mv)", "torch.mv(A, B)", by_mv),
    "aa->": ("trace", "torch.trace(A)", by_trace),
    "aa->a": ("diagonal", "torch.diagonal(A)", by_diagonal),
    "ab->ba": ("transpose", "A.T", by_transpose),
    "a,ab,b->": ("bilinear form", "A @ B @ C", by_bilinear),
    "ab,ab->ab": ("elementwise product", "A * B", by_product),
    "ab,ab->": ("sum of the elementwise product", "(A * B).sum()", by_product_sum),
}


@dataclass(frozen=True)
class Equation:
    inputs: tuple[str, ...]
    output: str
    explicit: bool  # written with '->'; otherwise the output is the indices seen once, in alphabetical order

    @property
    def text(self) -> str:
        return ",".join(self.inputs) + "->" + self.output


@dataclass(frozen=True)
class IndexInfo:
    name: str
    size: int
    operands: tuple[str, ...]  # which operands carry it
    role: str  # batch / free / contracted


@dataclass(frozen=True)
class EinsumResult:
    equation: str  # normalised, always with '->'
    shapes: tuple[tuple[int, ...], ...]
    indices: tuple[IndexInfo, ...]
    out_shape: tuple[int, ...]
    iterations: int
    multiplies: int
    adds: int  # iterations minus output elements: each element's first term is a copy into it, not an add
    arithmetic: str  # the sentence the page shows about multiplies and adds, from the counts above
    equivalent: str | None  # name of the standard op
    equivalent_code: str | None
    equivalent_ok: bool | None  # torch.allclose(einsum, equivalent) on random inputs
    equivalent_note: str  # why there is none, or torch's error when it did not apply
    python_loop_diff: float | None  # max |einsum - by_loops| when small enough to run (and the output not empty)
    values: tuple[float, ...]  # the einsum result, flattened (first 64)
    loop_code: str
    code: Script


def parse_equation(text: str) -> Equation:
    """'ij,jk->ik' or implicit 'ij,jk': letters only, up to 3 operands and 8 distinct indices."""
    if not isinstance(text, str):
        raise InputError("The equation must be text.")
    if len(text) > 100:
        raise InputError("The equation is too long: at most 100 characters.")
    body = re.sub(r"\s+", "", text)
    if not body:
        raise InputError("Type an equation such as ij,jk->ik.")
    if "..." in body:
        raise InputError("Ellipsis (...) is not supported here; name every dimension with a letter.")
    bad = re.search(r"[^A-Za-z,\->]", body)
    if bad:
        raise InputError(f"The equation may use letters, commas and '->' only; {quoted(bad.group())} is not allowed.")
    if body.count("->") > 1 or body.replace("->", "").count("-") or body.replace("->", "").count(">"):
        raise InputError("The equation needs at most one '->' and no other '-' or '>'.")
    lhs, arrow, rhs = body.partition("->")
    inputs = tuple(lhs.split(","))
    if len(inputs) > MAX_OPERANDS:
        raise InputError(f"The equation has {len(inputs)} operands; the limit is {MAX_OPERANDS}.")
    letters = set(lhs.replace(",", ""))
    if len(letters) > MAX_INDICES:
        raise InputError(f"The equation uses {len(letters)} distinct indices; the limit is {MAX_INDICES}.")
    if arrow:
        for ch in rhs:
            if ch not in letters:
                raise InputError(f"Output index {quoted(ch)} does not appear in any operand.")
        repeated = [ch for ch in set(rhs) if rhs.count(ch) > 1]
        if repeated:
            raise InputError(f"Output index {quoted(repeated[0])} appears more than once in the output.")
        return Equation(inputs, rhs, True)
    counts = lhs.replace(",", "")
    return Equation(inputs, "".join(sorted(ch for ch in letters if counts.count(ch) == 1)), False)


def parse_shapes(text: str) -> tuple[tuple[int, ...], ...]:
    """'(2, 3); (3, 4)' or '(2, 3), (3, 4)' or '2,3; 3,4': one shape per operand."""
    field = "Operand shapes"
    raw = text_field(text, field, limit=MAX_TEXT)
    parts = re.sub(r"([)\]])\s*,?\s*([(\[])", r"\1;\2", raw).split(";")  # '(2,3),(3,4)' and '(2,3) (3,4)' too
    if len(parts) > MAX_OPERANDS:
        raise InputError(f"{field} {quoted(raw)}: {plural(len(parts), 'shape')}; einsum here takes at most "
                         f"{MAX_OPERANDS}.")
    for name, part in zip(NAMES, parts, strict=False):
        if len(parts) > 1 and not part.strip():
            raise InputError(f"{field} {quoted(raw)}: the shape of {name} is empty; write () for a scalar.")
    return tuple(parse_shape(part, 6, MAX_DIM, field=f"Shape of {name}") for name, part in zip(NAMES, parts,
                                                                                               strict=False))


def index_sizes(eq: Equation, shapes) -> dict[str, int]:
    """Each index's size, checked the way torch checks: equal within an operand, equal or 1 across operands."""
    if len(shapes) != len(eq.inputs):
        raise InputError(f"The equation has {plural(len(eq.inputs), 'operand')} but Operand shapes lists "
                         f"{len(shapes)}: give one shape per operand, separated by ';', as in 2,3; 3,4.")
    sizes: dict[str, int] = {}
    for name, term, shape in zip(NAMES, eq.inputs, shapes, strict=False):
        if len(term) != len(shape):
            raise InputError(f"Operand {name} ({quoted(term)}) has {len(term)} indices but its shape "
                             f"{format_shape(shape)} has {len(shape)} dims.")
        own: dict[str, int] = {}
        for ch, d in zip(term, shape, strict=True):
            if ch in own and own[ch] != d:
                raise InputError(f"Index {quoted(ch)} repeats in operand {name} with sizes {own[ch]} and {d}; "
                                 "a repeated index needs equal sizes.")
            own[ch] = d
        for ch, d in own.items():
            if ch in sizes and sizes[ch] != d and 1 not in (sizes[ch], d):
                raise InputError(f"Index {quoted(ch)} has size {sizes[ch]} in one operand and {d} in operand {name}; "
                                 "sizes must match or be 1.")
            sizes[ch] = d if ch not in sizes or sizes[ch] == 1 else sizes[ch]
    return sizes


def _check_cost(shapes, sizes: dict[str, int], out_shape) -> int:
    for name, shape in zip(NAMES, shapes, strict=False):
        if math.prod(shape) > MAX_OPERAND_NUMEL:
            raise InputError(f"Operand {name} has {math.prod(shape)} elements; the limit is {MAX_OPERAND_NUMEL}.")
    if math.prod(out_shape) > MAX_OPERAND_NUMEL:
        raise InputError(f"The output has {math.prod(out_shape)} elements; the limit is {MAX_OPERAND_NUMEL}.")
    iterations = math.prod(sizes.values())
    if iterations > MAX_ITERATIONS:
        raise InputError(f"The loop nest runs {iterations:,} iterations; the limit is {MAX_ITERATIONS:,}.")
    return iterations


def canonical(eq: Equation) -> str:
    """Rename indices a, b, c... in order of first appearance, so 'ij,jk->ik' and 'xy,yz->xz' compare equal."""
    names: dict[str, str] = {}
    for ch in eq.text:
        if ch.isalpha() and ch not in names:
            names[ch] = "abcdefgh"[len(names)]
    return "".join(names.get(ch, ch) for ch in eq.text)


def _roles(eq: Equation, sizes) -> tuple[IndexInfo, ...]:
    infos = []
    for ch in dict.fromkeys("".join(eq.inputs)):
        carriers = tuple(n for n, term in zip(NAMES, eq.inputs, strict=False) if ch in term)
        if ch not in eq.output:
            role = "contracted"
        elif len(eq.inputs) > 1 and len(carriers) == len(eq.inputs):
            role = "batch"
        else:
            role = "free"
        infos.append(IndexInfo(ch, sizes[ch], carriers, role))
    return tuple(infos)


def _single_operand_equivalent(eq: Equation):
    """A sum over dropped dims followed by a permute, for one operand without repeated indices."""
    term = eq.inputs[0]
    if len(set(term)) != len(term):
        return None
    dropped = tuple(i for i, ch in enumerate(term) if ch not in eq.output)
    kept = [ch for ch in term if ch in eq.output]
    order = tuple(kept.index(ch) for ch in eq.output)
    permuted = order != tuple(range(len(order)))
    code = "A" + (f".sum(dim={dropped})" if dropped else "") + (f".permute{order}" if permuted else "")
    moved = "transpose" if len(order) == 2 else "permute"
    name = {(False, False): "identity", (True, False): "sum", (False, True): moved,
            (True, True): "sum then permute"}[(bool(dropped), permuted)]
    return name, code, functools.partial(by_sum_permute, dropped=dropped, order=order)


def _find_equivalent(eq: Equation):
    if canonical(eq) in EQUIVALENTS:
        return EQUIVALENTS[canonical(eq)]
    if len(eq.inputs) == 1:
        return _single_operand_equivalent(eq)
    return None


def operands(shapes):
    """The einsum's inputs: seeded random float64 tensors, one per shape."""
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(shape, dtype=torch.float64, generator=gen) for shape in shapes]


def by_loops(equation, *operands):
    """einsum by its definition, as a loop nest: for each output element (a value of each output index) and each
    value of the indices the output drops, multiply the operands' elements at those index values; the output
    element is the sum of those products. A dim of size 1 where its index is larger broadcasts: it is read at 0."""
    inputs, output = equation.split("->")
    terms = inputs.split(",")
    sizes = {}
    for term, t in zip(terms, operands, strict=True):
        for letter, size in zip(term, t.shape, strict=True):
            if sizes.get(letter, 1) == 1:
                sizes[letter] = size
    dropped = [letter for letter in sizes if letter not in output]
    values = [t.tolist() for t in operands]  # nested lists of Python floats: the loops do all the arithmetic
    out = torch.zeros([sizes[letter] for letter in output], dtype=torch.float64)
    for kept in itertools.product(*(range(sizes[letter]) for letter in output)):
        total = 0.0
        for summed in itertools.product(*(range(sizes[letter]) for letter in dropped)):
            at = dict(zip(output, kept, strict=True)) | dict(zip(dropped, summed, strict=True))
            product = 1.0
            for term, t, nested in zip(terms, operands, values, strict=True):
                element = nested
                for letter, size in zip(term, t.shape, strict=True):
                    element = element[at[letter] if size > 1 else 0]
                product *= element
            total += product
        out[kept] = total
    return out


def _loop_code(eq: Equation, shapes, sizes, out_shape) -> str:
    lines = [f"out = torch.zeros({format_shape(out_shape)}, dtype=torch.float64)"]
    order = list(eq.output) + [ch for ch in sizes if ch not in eq.output]
    for depth, ch in enumerate(order):
        note = "  # contracted: summed" if ch not in eq.output else ""
        if ch in "lIO":  # the equation's own letter, which linters call ambiguous as a name (E741)
            note += "  # noqa: E741"
        lines.append("    " * depth + f"for {ch} in range({sizes[ch]}):{note}")
    factors = []
    for name, term, shape in zip(NAMES, eq.inputs, shapes, strict=False):
        idx = ", ".join(ch if d == sizes[ch] else "0" for ch, d in zip(term, shape, strict=True))
        factors.append(f"{name}[{idx}]" if term else name)
    target = f"out[{', '.join(eq.output)}]" if eq.output else "out"
    lines.append("    " * len(order) + f"{target} += {' * '.join(factors)}")
    return "\n".join(lines) + "\n"


def _call(fn, names: list[str]) -> str:
    """How the snippet calls an equivalent: by_matmul(A, B), or by_sum_permute(A, dropped=(1,), order=(0,))."""
    if isinstance(fn, functools.partial):
        return f"{fn.func.__name__}({', '.join([*names, *(f'{k}={v!r}' for k, v in fn.keywords.items())])})"
    return f"{fn.__name__}({', '.join(names)})"


def _script(eq: Equation, shapes, found, failure: BaseException | None, loop_code: str, loops: bool) -> Script:
    """operands and the functions that ran; the run line is the visitor's einsum, then each check the page shows."""
    names = list(NAMES[: len(shapes)])
    lines = [f"{', '.join(names)} = operands(shapes)" if len(names) > 1 else "A = operands(shapes)[0]",
             f"out = torch.einsum(equation, {', '.join(names)})", "print(tuple(out.shape))"]
    shown = [operands]
    if found:
        fn = found[2]
        shown.append(fn.func if isinstance(fn, functools.partial) else fn)
        check = f"print(torch.allclose(out, {_call(fn, names)}))"
        lines.append(f"# the standard op: {found[0]}")
        if failure is None:
            lines.append(check)
        else:
            shown.append(torch_error)
            lines += ["try:", f"    {check}", f"except {catchable(failure)} as err:", "    print(torch_error(err))"]
    if loops:
        # the page computes this difference with by_loops (it never runs text built from a visitor's equation); the
        # snippet runs the loop nest as the page shows it, and the snippet test requires the same number
        lines += ["by_einsum = out", "# the loop nest shown above, run as it reads: its largest difference from "
                  "torch.einsum", loop_code.rstrip("\n"), "print((out - by_einsum).abs().max().item())"]
    return script(*shown, imports="import torch", settings={"equation": eq.text, "shapes": shapes},
                  run="\n".join(lines))


@entry("bhqd,bhkd->bhqk", "(1, 2, 3, 4); (1, 2, 5, 4)", entries=64)
def einsum(equation_text: str, shapes_text: str) -> EinsumResult:
    """Validate, classify indices, run torch.einsum on seeded random inputs and check the standard op it equals."""
    eq = parse_equation(equation_text)
    shapes = parse_shapes(shapes_text)
    sizes = index_sizes(eq, shapes)
    out_shape = tuple(sizes[ch] for ch in eq.output)
    iterations = _check_cost(shapes, sizes, out_shape)
    inputs = operands(shapes)
    out = torch.einsum(eq.text, *inputs)
    found = _find_equivalent(eq)
    name = code = ok = failure = None
    note = "No single standard op matches this pattern; einsum is the clearest way to write it."
    if found:
        name, code, fn = found
        try:
            ok = bool(torch.allclose(out, fn(*inputs)))
            note = "Checked with torch.allclose on the seeded random inputs."
        except (RuntimeError, IndexError) as err:
            failure = err
            message = torch_error(err).split(": ", 1)[1]  # torch's first line, after the exception's type
            ok, note = None, f"The {name} form does not apply to these sizes: {message}"
    loop_diff = None
    loop_code = _loop_code(eq, shapes, sizes, out_shape)
    loops = iterations <= MAX_PY_LOOP and out.numel() > 0  # an empty output has no element to compare
    if loops:
        loop_diff = (by_loops(eq.text, *inputs) - out).abs().max().item()
    multiplies, adds = operation_counts(len(eq.inputs), iterations, out.numel())
    return EinsumResult(
        eq.text, shapes, _roles(eq, sizes), tuple(out.shape), iterations, multiplies, adds,
        arithmetic_sentence(multiplies, adds, iterations, out.numel()), name, code, ok, note, loop_diff,
        tuple(out.reshape(-1)[:64].tolist()),
        loop_code, _script(eq, shapes, found, failure, loop_code, loops),
    )


def operation_counts(n_operands: int, iterations: int, out_numel: int) -> tuple[int, int]:
    """(multiplies, adds) of the loop nest: n - 1 multiplies per iteration; an output element that sums t terms
    needs t - 1 adds (its first term is copied in), so a transpose or diagonal (t = 1) adds nothing."""
    return (n_operands - 1) * iterations, max(0, iterations - out_numel)


def arithmetic_sentence(multiplies: int, adds: int, iterations: int, out_numel: int) -> str:
    """What the loop nest does per output element, in words, from the counts."""
    if not iterations:
        return "no arithmetic: the loop nest is empty, so the output stays zeros"
    terms = iterations // out_numel
    each = "the single output element" if out_numel == 1 else f"each of the {out_numel:,} output elements"
    muls = f"{multiplies:,} multiplies" if multiplies else "no multiplies"
    what = "product" if multiplies else "input element"
    if not adds:
        one = "is a copy of one input element" if not multiplies else "is one product"
        return f"{muls} and no adds: {each} {one}"
    return f"{muls} and {adds:,} adds: {each} sums {terms:,} {what}s"


def index_table(r: EinsumResult) -> pd.DataFrame:
    """One row per index letter: its size, the operands it appears in and its role."""
    return pd.DataFrame([{"index": i.name, "size": i.size, "in": ", ".join(i.operands), "role": i.role}
                         for i in r.indices])


def network_dot(r: EinsumResult) -> str:
    """Tensor-network diagram: a box per operand, edges labelled by index. Purple batch and blue free indices run
    to the output; orange contracted ones join the operands that share them (or a sum node, or a self-loop)."""
    eq = parse_equation(r.equation)
    lines = ["graph einsum {", "  rankdir=TB; nodesep=0.6; ranksep=0.9;",
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=16];',
             '  edge [fontname="Helvetica", fontsize=15, penwidth=2.5];']
    for name, shape in zip(NAMES, r.shapes, strict=False):
        lines.append(f'  {name} [label="{name}\\n{format_shape(shape)}", fillcolor="{COLORS["data"]}", '
                     f'fontcolor="{text_on(COLORS["data"])}"];')
    lines.append(f'  out [label="out\\n{format_shape(r.out_shape)}", fillcolor="{COLORS["parameter"]}", '
                 f'fontcolor="{text_on(COLORS["parameter"])}"];')
    lines.append(f"  {{rank=same; {'; '.join(NAMES[: len(r.shapes)])}}}")
    edges: dict[tuple[str, str, str], list[str]] = {}  # (end, end, role) -> index labels, one edge each
    for info in r.indices:
        label = f"{info.name}={info.size}"
        if info.role != "contracted":
            for n in info.operands:
                edges.setdefault((n, "out", info.role), []).append(label)
            continue
        carriers = list(info.operands)
        repeats = [n for n, term in zip(NAMES, eq.inputs, strict=False) if term.count(info.name) > 1]
        if len(carriers) == 1 and not repeats:
            color = ROLE_COLORS["contracted"]
            lines.append(f'  sum_{info.name} [label="Σ{info.name}", shape=circle, fillcolor="{color}", '
                         f'fontcolor="{text_on(color)}"];')
            edges.setdefault((carriers[0], f"sum_{info.name}", "contracted"), []).append(label)
        for a, b in zip(carriers, carriers[1:], strict=False):
            edges.setdefault((a, b, "contracted"), []).append(label)
        for n in repeats:
            edges.setdefault((n, n, "contracted"), []).append(label)
    for (a, b, role), labels in edges.items():
        color = ROLE_COLORS[role]
        lines.append(f'  {a} -- {b} [label="{", ".join(labels)}", color="{color}", fontcolor="{darkened(color)}"];')
    lines.append("}")
    return "\n".join(lines)


# Worst cases allowed by the limits, timed by `python -m bench`.
BENCH_CASES = {
    "matmul at the iteration limit": lambda: einsum("ij,jk->ik", "(160, 195); (195, 160)"),
    "outer products at the limit": lambda: einsum("ij,kl,mn->", "(13, 13); (13, 13); (13, 13)"),
    "loop nest run in Python": lambda: einsum("bij,bjk->bik", "(2, 10, 10); (2, 10, 25)"),
}
