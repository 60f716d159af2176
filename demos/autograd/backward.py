"""Section 2: backward step by step: leaf and intermediate gradients, engine order, one chain rule, gradcheck."""

import dataclasses
import re
from dataclasses import dataclass

import pandas as pd
import torch
from torch.autograd.gradcheck import GradcheckError

from demos.autograd import expr as E
from demos.autograd.expr import (
    BinOp,
    Call,
    Detach,
    Index,
    Neg,
    Transpose,
    evaluate,
    make_leaves,
    parse_expression,
    parse_leaves,
    seeded_leaves,
    to_source,
)
from demos.autograd.graph import build, code_lines, creators, fn_name, graph_nodes, unpacking, variable_names
from demos.errors import InputError
from demos.parsing import format_shape
from demos.shown import Script, entry, script

FULL_GRADCHECK_NUMEL = 128


@dataclass(frozen=True)
class ChainTerm:
    operand: str
    formula: str  # symbolic local rule
    numbers: str  # the rule at element 0 with the actual values
    element: str  # which element
    hand: float | None  # the rule computed by hand (no autograd)
    engine: float | None  # what autograd passed to this operand from this node
    max_abs_diff: float | None  # hand vs engine over the whole operand


@dataclass(frozen=True)
class Chain:
    """The chain rule at one operation: what flowed into its output, and what it passed to each operand."""

    step: str
    grad_fn: str
    operands: tuple[str, ...]  # a (and b) as sub-expressions; numbers included
    upstream: str
    terms: tuple[ChainTerm, ...]
    note: str = ""  # why no rule is shown (no gradient reached this operation)
    symbols: tuple[str, ...] = ("a",)  # each operand's letter in the formulas, then the upstream gradient's


# The letters the rules are written with: operands a and b (A and B for @, a and n for **), g for the upstream
# gradient. A leaf may have one of these names (the bias b of x @ W + b): then the rules use the first spare letter
# no leaf has, and a Greek one (never a leaf name: names start with an ASCII letter) when all are taken.
SPARE_SYMBOLS = {"a": "upcdα", "b": "vqfhβ", "A": "UPCDΦ", "B": "VQFHΨ", "n": "kmjrν", "g": "γ"}
_SYMBOL = re.compile(r"(?<![A-Za-z])([abABng])(?![A-Za-z])")


def rule_symbols(node) -> tuple[str, ...]:
    """The letters the rules of this operation name its operands with."""
    if isinstance(node, BinOp):
        return {"@": ("A", "B"), "**": ("a", "n")}.get(node.op, ("a", "b"))
    return ("a",)


def free_symbols(taken) -> dict[str, str]:
    """Each rule letter, or its first spare that no leaf is named (and no other letter already took)."""
    chosen: dict[str, str] = {}
    for letter, spares in SPARE_SYMBOLS.items():
        chosen[letter] = next(c for c in letter + spares if c not in taken and c not in chosen.values())
    return chosen


def renamed(text: str, symbols: dict[str, str]) -> str:
    """A rule or its numbers with each rule letter written as the letter chosen for it."""
    return _SYMBOL.sub(lambda m: symbols[m.group(1)], text)


def operands_sentence(chain: Chain) -> str:
    """What each letter of the rules stands for at this operation, and the gradient flowing in."""
    *letters, g = chain.symbols
    names = ", ".join(f"{letter} = `{text}`" for letter, text in zip(letters, chain.operands, strict=False))
    return (f"Here {names}; {g} = ∂L/∂out is the gradient flowing into `{chain.step}`: `{chain.upstream}`. "
            "The numbers are at element 0 of each operand.")


CUT_BY_DETACH = "None: cut off by .detach()"
NO_GRADIENT_NOTE = ("No gradient reaches this operation: every path from its result to the output goes through "
                    ".detach(), so backward never runs its node and its .grad stays None.")


@dataclass(frozen=True)
class BackwardResult:
    leaf_grads: pd.DataFrame
    intermediate_grads: pd.DataFrame
    order: pd.DataFrame
    chains: tuple[Chain, ...]  # one per operation that needs a gradient, in evaluation order
    gradcheck_ok: bool
    gradcheck_mode: str
    gradcheck_message: str
    max_diff_vs_autograd_grad: float
    code: Script


def preview(t: torch.Tensor | None, n: int = 6) -> str:
    """A short text of a tensor's values: all of them when few, else the first n and an ellipsis."""
    if t is None:
        return "None"
    flat = t.detach().flatten().tolist()
    body = ", ".join(f"{v:.4g}" for v in flat[:n])
    return f"[{body}{', …' if len(flat) > n else ''}]" if t.dim() else f"{flat[0]:.4g}"


def _num(v: float, digits: int = 4) -> str:
    """A number for a written-out product: negatives in brackets, so '2 × (-3)' never reads as '2 ×- 3'."""
    text = f"{v:.{digits}g}"
    return f"({text})" if v < 0 else text


def _first(t: torch.Tensor) -> float:
    return float(t.detach().flatten()[0])


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b|, counting equal entries (the same infinity, or nan in both) as 0; 0 for empty tensors."""
    if a.numel() == 0:
        return 0.0
    same = (a == b) | (a.isnan() & b.isnan())
    return float(torch.where(same, 0.0, (a - b).abs()).max())


def _tensor(v, like: torch.Tensor) -> torch.Tensor:
    """A number operand as a 0-d tensor: its rules then divide by zero as torch does (inf), never raising."""
    return v if isinstance(v, torch.Tensor) else torch.tensor(float(v), dtype=like.dtype)


def _elem(shape) -> str:
    return "[" + ", ".join("0" for _ in shape) + "]" if len(shape) else ""


def run_backward(b) -> tuple[torch.Tensor, list[int]]:
    """backward_in_order on the expression's run: the seed it used and the node numbers in the engine's order."""
    ran = backward_in_order(b.out, [s.out for s in b.steps if s.out.requires_grad])
    return torch.ones_like(b.out), [i for i, _ in ran]


def backward_in_order(out, intermediates):
    """retain_grad() on each intermediate, a pre-hook on every node of out's graph recording when the engine runs
    it, then backward from a gradient of ones. Returns (number, class) of each node in the order the engine ran
    them, numbered as graph_nodes numbers them."""
    for t in intermediates:
        t.retain_grad()  # without it, backward fills .grad of leaves only
    nodes = graph_nodes(out)
    ran = []
    hooks = [fn.register_prehook(lambda grads, i=i: ran.append(i)) for i, fn in enumerate(nodes)]
    out.backward(torch.ones_like(out))
    for hook in hooks:
        hook.remove()
    return [(i, type(nodes[i]).__name__) for i in ran]


# ---- the chain rule at one node, computed by hand and compared with the engine -----------------------------------

def _broadcast_term(g, factors, operand, out) -> tuple[torch.Tensor, str]:
    """g times local factors, summed back to the operand's shape; the numbers at the operand's element 0."""
    prod = g
    for _, f in factors:
        prod = prod * f
    prod = prod.expand(out.shape) if isinstance(prod, torch.Tensor) else torch.full(out.shape, float(prod))
    hand = prod.sum_to_size(operand.shape) if operand.shape != out.shape else prod
    if operand.shape == out.shape:
        parts = [_num(_first(g))] + [_num(_first(f) if isinstance(f, torch.Tensor) else f) for _, f in factors]
        numbers = " × ".join(parts) + f" = {_first(hand):.4g}" if factors else f"g = {_first(hand):.4g}"
    else:
        count = out.numel() // max(operand.numel(), 1)
        numbers = f"sum over the {count} broadcast copies of g·(local) = {_first(hand):.4g}"
    return hand, numbers


def _matmul_terms(a, b, g, which: int) -> tuple[str, torch.Tensor | None, str]:
    if a.dim() != 2 or b.dim() != 2:
        return "∂L/∂A = g @ Bᵀ, ∂L/∂B = Aᵀ @ g", None, "element formula shown for 2-D @ 2-D only"
    if which == 0:
        hand = g @ b.T
        terms = [(float(g[0, k]), float(b[0, k])) for k in range(g.shape[1])]
        rule = "∂L/∂A[0,0] = Σₖ g[0,k] · B[0,k]"
    else:
        hand = a.T @ g
        terms = [(float(a[i, 0]), float(g[i, 0])) for i in range(g.shape[0])]
        rule = "∂L/∂B[0,0] = Σᵢ A[i,0] · g[i,0]"
    shown = " + ".join(f"{_num(x, 3)}·{_num(y, 3)}" for x, y in terms[:4]) + (" + …" if len(terms) > 4 else "")
    return rule, hand, f"{shown} = {float(hand[0, 0]):.4g}"


def _local(step, which: int, g):
    """(symbolic rule, hand-computed gradient for operand `which`, numbers at its element 0)."""
    node, out = step.node, step.out
    a = step.inputs[which]
    if isinstance(node, BinOp):
        x, y = (_tensor(v, out) for v in step.inputs)
        if node.op == "@":
            return _matmul_terms(x, y, g, which)
        rule, factors = _binary_factors(node.op, which, x, y, out)
        hand, numbers = _broadcast_term(g, factors, a, out)
        return f"∂L/∂{rule_symbols(node)[which]} = {rule}", hand, numbers
    if isinstance(node, Neg):
        hand, numbers = _broadcast_term(g, [("−1", -1.0)], a, out)
        return "∂L/∂a = −g", hand, numbers
    if isinstance(node, Call):
        return _call_terms(node, a, out, g)
    if isinstance(node, Transpose):
        return "∂L/∂a = gᵀ", g.T, f"g[0,0] = {_first(g):.4g}"
    if isinstance(node, Index):
        hand = torch.zeros_like(a)
        key = tuple(i if isinstance(i, int) else slice(*i) for i in node.items)
        hand[key] = g
        return "∂L/∂a = g scattered into the selected positions, 0 elsewhere", hand, f"{_first(hand):.4g}"
    return "no gradient", None, ""


def _binary_factors(op: str, which: int, x, y, out) -> tuple[str, list]:
    """The local derivative of a op b with respect to operand `which`, as named factors."""
    if op == "+":
        return "g", []
    if op == "-":
        return ("g", []) if which == 0 else ("−g", [("−1", -1.0)])
    if op == "*":
        return ("g · b", [("b", y)]) if which == 0 else ("g · a", [("a", x)])
    if op == "/":
        return ("g / b", [("1/b", 1 / y)]) if which == 0 else ("−g · a / b²", [("−a/b²", -x / y**2)])
    # torch defines the two 0·inf corners of pow as 0 (pow_backward and pow_backward_exponent); so does the hand rule
    if which == 0:
        return "g · n · a^(n−1) (0 where n = 0)", [("n·a^(n−1)", torch.where(y == 0, 0.0, y * x ** (y - 1)))]
    local = torch.where((x == 0) & (y >= 0), 0.0, out * torch.log(x))
    return "g · a^n · ln a (0 where a = 0 and n ≥ 0)", [("a^n·ln a", local)]


def _call_terms(node, a, out, g):
    f = node.func
    if f == "relu":  # torch selects rather than multiplies: an inf g stays inf where a > 0 and becomes 0 elsewhere
        hand = torch.where(a <= 0, 0.0, g)
        a0 = _first(a)
        why = "≤ 0, so 0" if a0 <= 0 else "> 0, so g" if a0 > 0 else "is nan, so g"
        return "∂L/∂a = g where a > 0, 0 where a ≤ 0 (where a is nan, g passes on)", hand, \
            f"a = {_num(a0)} {why} = {_first(hand):.4g}"
    if f in ("sigmoid", "tanh", "exp", "log"):
        rule, factor = {
            "sigmoid": ("g · σ(a)(1 − σ(a))", out * (1 - out)),
            "tanh": ("g · (1 − tanh²(a))", 1 - out**2),
            "exp": ("g · exp(a)", out),
            "log": ("g / a", 1 / a),
        }[f]
        hand, numbers = _broadcast_term(g, [("local", factor)], a, out)
        return f"∂L/∂a = {rule}", hand, numbers
    if f in ("sum", "mean"):
        n = a.numel() if node.dim is None else a.shape[node.dim] if a.dim() else 1
        div = n if f == "mean" else 1
        gg = g if node.dim is None or a.dim() == 0 else g.unsqueeze(node.dim)
        hand = (gg / div).expand(a.shape).clone()
        rule = "∂L/∂a[i] = g" + (f" / N (N = {n})" if f == "mean" else " (copied to every element)")
        return rule, hand, _num(_first(gg)) + (f" / {n}" if f == "mean" else "") + f" = {_first(hand):.4g}"
    dim = node.dim
    dot = (g * out).sum(dim=dim, keepdim=True)
    hand = out * (g - dot)
    numbers = f"{_num(_first(out))} × ({_num(_first(g))} − {_num(_first(dot))}) = {_first(hand):.4g}"
    return "∂L/∂a[i] = s[i] · (g[i] − Σⱼ g[j] s[j])", hand, numbers


def chain_rule(step, g: torch.Tensor, symbols: dict[str, str]) -> tuple[ChainTerm, ...]:
    """For each operand of one operation that needs a gradient: the rule by hand vs the engine's value, its letters
    the chosen `symbols`."""
    terms = []
    for which, a in enumerate(step.inputs):
        label = to_source(_operand_node(step.node, which))
        if not isinstance(a, torch.Tensor) or not a.requires_grad:
            continue
        if a.numel() == 0:
            terms.append(ChainTerm(label, f"`{label}` has shape {format_shape(a.shape)}: no elements, so no "
                                   "gradient to show", "", "", None, None, None))
            continue
        with torch.no_grad():
            rule, hand, numbers = _local(step, which, g)
        engine = _engine_vjp(step, which, g)
        diff = None if hand is None else max_abs_diff(hand, engine)
        terms.append(ChainTerm(label, renamed(rule, symbols), renamed(numbers, symbols), f"{label}{_elem(a.shape)}",
                               None if hand is None else _first(hand), _first(engine), diff))
    return tuple(terms)


def chain_at(step, leaf_names=()) -> Chain:
    """The chain rule at one operation that needs a gradient, or a note when no gradient reached it; its rules
    written with letters no leaf is named."""
    operands = tuple(E.to_source(c) for c in E.children(step.node))
    symbols = free_symbols(set(leaf_names))
    letters = tuple(symbols[s] for s in rule_symbols(step.node)) + (symbols["g"],)
    g = step.out.grad
    if g is None:
        return Chain(step.text, fn_name(step.out.grad_fn), operands, CUT_BY_DETACH, (), NO_GRADIENT_NOTE, letters)
    return Chain(step.text, fn_name(step.out.grad_fn), operands, preview(g), chain_rule(step, g, symbols), "",
                 letters)


def _engine_vjp(step, which: int, g: torch.Tensor) -> torch.Tensor:
    """What autograd passes to one operand through this operation alone: the op re-run on detached operands."""
    kids = E.children(step.node)
    local = {f"_{i}": v.detach().requires_grad_(i == which) for i, v in enumerate(step.inputs)
             if isinstance(v, torch.Tensor)}
    swapped = [E.Name(f"_{i}") if f"_{i}" in local else kid for i, kid in enumerate(kids)]
    node = step.node
    if isinstance(node, BinOp):
        node = dataclasses.replace(node, left=swapped[0], right=swapped[1])
    elif isinstance(node, Call):
        node = dataclasses.replace(node, arg=swapped[0])
    else:
        node = dataclasses.replace(node, operand=swapped[0])
    out = E.evaluate(node, local)
    (grad,) = torch.autograd.grad(out, local[f"_{which}"], g)
    return grad


def _operand_node(node, which: int):
    if isinstance(node, BinOp):
        return (node.left, node.right)[which]
    return getattr(node, "operand", None) or node.arg


# ---- gradcheck ------------------------------------------------------------------------------------------------

def gradcheck_expression(leaves_text: str, expr_text: str) -> tuple[bool, str, str]:
    """Finite differences in float64 against the analytic gradient of out.sum(); fast mode for big inputs."""
    leaves = parse_leaves(leaves_text)
    tree = parse_expression(expr_text)
    tensors = make_leaves(leaves, torch.float64)
    names = [n for n, t in tensors.items() if t.requires_grad]
    inputs = tuple(tensors[n] for n in names)

    def fn(*values):
        return evaluate(tree, {**tensors, **dict(zip(names, values, strict=True))}).sum()

    numel = sum(t.numel() for t in inputs)
    fast = numel > FULL_GRADCHECK_NUMEL
    mode = (f"fast mode (random projections; {numel} inputs > {FULL_GRADCHECK_NUMEL})" if fast
            else f"full Jacobian ({numel} inputs)")
    try:
        ok = torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, fast_mode=fast)
        return ok, mode, "analytic and numerical gradients agree"
    except GradcheckError as err:
        reason = gradcheck_reason(err)
        if not _finite_gradient(fn, inputs):
            reason += (" (expected: the analytic gradient contains inf or nan, from a division by zero, a log or "
                       "power of a non-positive number, or an overflow, and finite differences cannot match it)")
        elif _has_detach(tree):
            reason += " (expected: .detach() hides part of the dependence from autograd; finite differences see it)"
        return False, mode, reason


def _finite_gradient(fn, inputs) -> bool:
    grads = torch.autograd.grad(fn(*inputs), inputs, allow_unused=True)
    return all(g is None or bool(torch.isfinite(g).all()) for g in grads)


def _has_detach(node) -> bool:
    return isinstance(node, Detach) or any(_has_detach(c) for c in E.children(node))


def gradcheck_reason(err: Exception) -> str:
    """torch's first line of a gradcheck failure, without the matrices that follow it."""
    return str(err).strip().splitlines()[0].rstrip(",") + ": the numerical and analytical Jacobians differ"


# ---- the whole section ----------------------------------------------------------------------------------------

@entry("w: 3 grad; leaves: 3", "sum(w * (w * 2).detach() + leaves * w)", entries=64)
def backward_view(leaves_text: str, expr_text: str) -> BackwardResult:
    """Backward with retained intermediate grads and the engine order; oracle: torch.autograd.grad on a fresh run."""
    b = build(leaves_text, expr_text)
    seed, order = run_backward(b)
    grad_steps = [s for s in b.steps if s.out.requires_grad]
    if not grad_steps:
        raise InputError("No operation in the expression needs a gradient.")
    chains = tuple(chain_at(s, b.tensors) for s in grad_steps)

    fresh = build(leaves_text, expr_text)
    wanted = [(n, t) for n, t in fresh.tensors.items() if t.requires_grad]
    oracle = torch.autograd.grad(fresh.out, [t for _, t in wanted], torch.ones_like(fresh.out), allow_unused=True)
    diffs = [max_abs_diff(_or_zeros(b.tensors[n].grad, t), _or_zeros(o, t))
             for (n, t), o in zip(wanted, oracle, strict=True)]
    ok, mode, message = gradcheck_expression(leaves_text, expr_text)
    made = creators(b)
    return BackwardResult(
        leaf_grads=pd.DataFrame([{
            "leaf": n, "shape": format_shape(t.shape), "requires_grad": t.requires_grad,
            ".grad": preview(t.grad) if t.requires_grad else "— (requires_grad=False)",
            "‖grad‖": None if t.grad is None else round(float(t.grad.norm()), 5),
        } for n, t in b.tensors.items()]),
        intermediate_grads=pd.DataFrame([{
            "operation": s.text, "grad_fn": fn_name(s.out.grad_fn), "shape": format_shape(s.out.shape),
            "value": preview(s.out),
            "gradient flowing in (.grad)": CUT_BY_DETACH if s.out.grad is None else preview(s.out.grad),
        } for s in grad_steps]),
        order=pd.DataFrame([{"ran": i + 1, "node": f"#{k}", "grad_fn": fn_name(b.nodes[k]),
                             "for": made.get(b.nodes[k], "(part of an indexing step)")}
                            for i, k in enumerate(order)]),
        chains=chains,
        gradcheck_ok=ok, gradcheck_mode=mode, gradcheck_message=message,
        max_diff_vs_autograd_grad=max(diffs, default=0.0),
        code=backward_code(b, grad_steps),
    )


def _or_zeros(grad: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """A leaf's gradient, zeros when none reached it (unused, or only used through .detach())."""
    return torch.zeros_like(like) if grad is None else grad


BACKWARD_SHOWN = (seeded_leaves, graph_nodes, backward_in_order, preview)


def backward_code(b, grad_steps: list) -> Script:
    """The snippet: the functions that made the leaves and ran backward, then the visitor's expression as torch code,
    one operation per line (a variable per intermediate, so its .grad can be retained and printed)."""
    # keyed by id: two equal sub-expressions (x * 2 + x * 2) are two operations, each with its own variable
    temps = {id(s.node): f"t{i}" for i, s in enumerate(b.steps[:-1], 1)} | {id(b.steps[-1].node): "out"}
    names = variable_names(b.leaves, {"torch", "shapes", "requires_grad", "leaves", "order", "name", "leaf",
                                      *temps.values(), *(f.__name__ for f in BACKWARD_SHOWN)})
    settings = {"shapes": {leaf.name: leaf.shape for leaf in b.leaves},
                "requires_grad": [leaf.name for leaf in b.leaves if leaf.requires_grad]}
    wanted = [temps[id(s.node)] for s in grad_steps]
    lines = ["leaves = seeded_leaves(shapes, requires_grad)", f"{unpacking(names)} = leaves.values()",
             code_lines("# as typed: ", to_source(b.tree))]
    lines += [code_lines(f"{temps[id(s.node)]} = ", _code_with_temps(s.node, temps, names, top=True))
              for s in b.steps]
    lines += [
        code_lines("order = backward_in_order(out, [", ", ".join(wanted) + "])"),
        'print("engine order:", order)',
        "for name, leaf in leaves.items():",
        "    if leaf.requires_grad:",
        '        print(f"{name}.grad", preview(leaf.grad))',
    ]
    lines += [f'print("{t}.grad", preview({t}.grad))' for t in wanted]
    return script(*BACKWARD_SHOWN, settings=settings, run="\n".join(lines))


def _code_with_temps(node, temps: dict, names: dict, top: bool = False) -> str:
    """torch code for one operation, its operands replaced by their temporaries, leaves by their variables."""
    if not top and id(node) in temps:
        return temps[id(node)]

    def sub(child):
        text = _code_with_temps(child, temps, names)
        return text if id(child) in temps or isinstance(child, (E.Name, E.Num)) else f"({text})"

    if isinstance(node, E.Num):
        return E.to_source(node)
    if isinstance(node, E.Name):
        return names.get(node.name, node.name)
    if isinstance(node, E.BinOp):
        return f"{sub(node.left)} {node.op} {sub(node.right)}"
    if isinstance(node, E.Neg):
        return f"-{sub(node.operand)}"
    if isinstance(node, E.Call):
        dim = "" if node.dim is None else f", dim={node.dim}"
        return f"torch.{node.func}({sub(node.arg)}{dim})"
    if isinstance(node, E.Detach):
        return f"{sub(node.operand)}.detach()"
    if isinstance(node, E.Transpose):
        return f"{sub(node.operand)}.T"
    return f"{sub(node.operand)}{E.index_text(node.items)}"

