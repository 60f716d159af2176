"""Random expressions drawn from the grammar: every section of the backward view agrees with torch.autograd.grad.

The generator builds syntax trees whose shapes fit (broadcasting, matmul, reductions with any valid dim, slices,
transposes), including zero divisors, powers of negative bases, logs and .detach() on intermediates, so inf and
nan gradients are exercised. The oracle is a separate ten-line interpreter over the same tree and
torch.autograd.grad: the gradient flowing into any sub-expression is torch.autograd.grad with respect to a
fresh leaf standing in for it.
"""

import contextlib
import dataclasses
import io
import operator

import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from demos.autograd.backward import CUT_BY_DETACH, NO_GRADIENT_NOTE, backward_view, preview
from demos.autograd.expr import (
    MAX_EXPR,
    BinOp,
    Call,
    Detach,
    Index,
    Name,
    Neg,
    Num,
    Transpose,
    children,
    make_leaves,
    parse_expression,
    parse_leaves,
    to_source,
)
from demos.autograd.graph import graph_view
from demos.errors import InputError
from demos.parsing import format_shape

SHAPES = {"x": (3, 4), "W": (4, 3), "b": (4,), "c": (3, 1), "s": ()}
NUMBERS = (0.0, 0.0, 1.0, 2.0, 0.5, 3.0, 0.001, 10.0)  # zero twice: zero divisors and 0 ** x are the edge
ELEMENTWISE = ("relu", "sigmoid", "tanh", "exp", "log")
KINDS = ("elementwise", "reduce", "softmax", "detach", "neg", "T", "index", "binary", "binary", "matmul",
         "divide by zero", "cut", "cut", "cut")
BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "**": operator.pow,
          "@": operator.matmul}


def _broadcasts(a: tuple, b: tuple) -> bool:
    try:
        torch.broadcast_shapes(a, b)
    except RuntimeError:
        return False
    return True


def _index_key(items) -> tuple:
    return tuple(i if isinstance(i, int) else slice(*i) for i in items)


@st.composite
def index_items(draw, shape: tuple):
    items = []
    for size in shape[:draw(st.integers(1, len(shape)))]:
        if size and draw(st.booleans()):
            items.append(draw(st.integers(-size, size - 1)))
        else:
            bound = st.none() | st.integers(-size - 1, size + 1)
            items.append((draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2]))))
    return tuple(items)


@st.composite
def tensor_expr(draw, depth: int):
    """(tree, shape) for a tensor-valued expression over SHAPES that torch can evaluate."""
    if depth == 0:
        name = draw(st.sampled_from(sorted(SHAPES)))
        return Name(name), SHAPES[name]
    kind = draw(st.sampled_from(KINDS))
    a, shape = draw(smaller(depth))
    n = max(len(shape), 1)
    if kind == "elementwise":
        return Call(draw(st.sampled_from(ELEMENTWISE)), a), shape
    if kind == "reduce":
        dim = draw(st.none() | st.integers(-n, n - 1))
        out = () if dim is None or not shape else shape[:dim % n] + shape[dim % n + 1:]
        return Call(draw(st.sampled_from(["sum", "mean"])), a, dim), out
    if kind == "softmax":
        return Call("softmax", a, draw(st.integers(-n, n - 1))), shape
    if kind == "detach":
        return Detach(a), shape
    if kind == "divide by zero":
        return BinOp("/", a, Num(0.0)), shape
    if kind == "cut":  # a * f(a').detach(): the intermediate f(a') gets no gradient
        b, other = draw(tensor_expr(1))
        if _broadcasts(shape, other):
            return BinOp("*", a, Detach(b)), tuple(torch.broadcast_shapes(shape, other))
    if kind == "T" and len(shape) == 2:
        return Transpose(a), shape[::-1]
    if kind == "index" and shape:
        items = draw(index_items(shape))
        return Index(a, items), tuple(torch.empty(shape)[_index_key(items)].shape)
    if kind == "matmul" and len(shape) in (1, 2):
        partners = [(Name(k), s) for k, s in SHAPES.items() if len(s) in (1, 2) and s[0] == shape[-1]]
        b, other = draw(smaller(depth))
        if len(other) == 2 and other[1] == shape[-1]:
            partners.append((Transpose(b), other[::-1]))
        if partners:
            b, other = draw(st.sampled_from(partners))
            return BinOp("@", a, b), tuple((torch.empty(shape) @ torch.empty(other)).shape)
    return draw(binary(a, shape, depth))


def smaller(depth: int):
    """A sub-expression of any depth below this one."""
    return st.integers(0, depth - 1).flatmap(tensor_expr)


@st.composite
def binary(draw, a, shape: tuple, depth: int):
    op = draw(st.sampled_from(["+", "-", "*", "/", "**"]))
    if draw(st.booleans()):
        b, other = Num(draw(st.sampled_from(NUMBERS))), ()
    else:
        b, other = draw(smaller(depth))
        if not _broadcasts(shape, other):
            b, other = Call("sum", b), ()
        if not isinstance(b, Name) and draw(st.booleans()):
            b = Detach(b)  # an intermediate whose only use is .detach(): no gradient reaches it
    if isinstance(b, Num) and draw(st.booleans()):
        return BinOp(op, b, a), shape  # a number on the left: 2 ** x, 0 / x
    return BinOp(op, a, b), tuple(torch.broadcast_shapes(shape, other))


@st.composite
def cases(draw):
    grads = {name: draw(st.sampled_from([True, True, False])) for name in SHAPES}
    grads["x"] = grads["x"] or not any(grads.values())
    leaves = "; ".join(f"{n}: {','.join(map(str, s)) or '()'}" + (" grad" if grads[n] else "")
                       for n, s in SHAPES.items())
    tree, _ = draw(tensor_expr(draw(st.integers(1, 4))))
    return leaves, to_source(tree)


# ---- the oracle: an independent interpreter and torch.autograd.grad ---------------------------------------------

def run(node, env: dict):
    """Evaluate a tree with torch directly (no demos code)."""
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Name):
        return env[node.name]
    args = [run(c, env) for c in children(node)]
    if isinstance(node, BinOp):
        return BINARY[node.op](*args)
    if isinstance(node, Neg):
        return -args[0]
    if isinstance(node, Detach):
        return args[0].detach()
    if isinstance(node, Transpose):
        return args[0].T
    if isinstance(node, Index):
        return args[0][_index_key(node.items)]
    if node.func == "softmax":
        return torch.softmax(args[0], dim=node.dim)
    if node.dim is not None:
        return getattr(torch, node.func)(args[0], dim=node.dim)
    return getattr(torch, node.func)(args[0])


def substitute(node, target, new):
    """The tree with one occurrence (by identity) of a sub-expression replaced."""
    if node is target:
        return new
    kids = {f: substitute(getattr(node, f), target, new) for f in ("left", "right", "operand", "arg")
            if hasattr(node, f)}
    return dataclasses.replace(node, **kids) if kids else node


def grad_into(tree, target, env: dict):
    """What backward sends into one occurrence of a sub-expression: autograd.grad w.r.t. a leaf standing in for it."""
    stand_in = run(target, env).detach().requires_grad_()
    out = run(substitute(tree, target, Name("_t")), {**env, "_t": stand_in})
    if not out.requires_grad:
        return None
    return torch.autograd.grad(out, stand_in, torch.ones_like(out), allow_unused=True)[0]


def post_order(node) -> list:
    """Sub-expressions in evaluation order (operands first), numbers left out."""
    if isinstance(node, Num):
        return []
    return [n for c in children(node) for n in post_order(c)] + [node]


def close(got: float | None, want: float | None, rtol: float = 1e-5) -> bool:
    """Equal up to rounding; the same inf, or nan on both sides, counts as equal."""
    if got is None or want is None:
        return got is want
    return bool(torch.isclose(torch.tensor(float(got)), torch.tensor(float(want)), rtol=rtol, atol=1e-6,
                              equal_nan=True))


PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(cases())
def test_every_section_agrees_with_autograd_grad(case):
    leaves_text, text = case
    if len(text) > MAX_EXPR:
        with pytest.raises(InputError, match="too long"):
            backward_view(leaves_text, text)
        return
    tree = parse_expression(text)
    env = make_leaves(parse_leaves(leaves_text))
    out = run(tree, env)
    if isinstance(tree, Name):
        with pytest.raises(InputError, match="only the leaf"):
            backward_view(leaves_text, text)
        return
    if not out.requires_grad:
        with pytest.raises(InputError, match="no grad_fn"):
            backward_view(leaves_text, text)
        return
    graph, shown = graph_view(leaves_text, text, show_saved=True), backward_view(leaves_text, text)
    label_case(text, shown)

    assert graph.out_shape == format_shape(out.shape)
    finite = [bool(torch.isfinite(run(n, env)).all()) for n in post_order(tree) if not isinstance(n, Name)]
    assert any("the first operation whose result holds an inf or a nan" in n for n in graph.notes) == (not all(finite))
    assert any(n.startswith("The output contains inf or nan") for n in graph.notes) == (not finite[-1])

    names = [n for n, t in env.items() if t.requires_grad]
    oracle = torch.autograd.grad(out, [env[n] for n in names], torch.ones_like(out), allow_unused=True)
    rows = shown.leaf_grads.set_index("leaf")
    for name, g in zip(names, oracle, strict=True):
        assert rows.loc[name, ".grad"] == preview(g)
        norm = rows.loc[name, "‖grad‖"]
        if g is None:
            assert pd.isna(norm)  # None in a float column
        else:
            assert close(norm, round(float(g.norm()), 5))
    assert shown.max_diff_vs_autograd_grad == 0.0

    steps = [n for n in post_order(tree) if not isinstance(n, Name) and run(n, env).requires_grad]
    assert list(shown.intermediate_grads["operation"]) == [to_source(n) for n in steps]
    assert len(shown.chains) == len(steps)
    for node, row, chain in zip(steps, shown.intermediate_grads.to_dict("records"), shown.chains, strict=True):
        g = grad_into(tree, node, env)
        assert row["gradient flowing in (.grad)"] == (CUT_BY_DETACH if g is None else preview(g))
        if g is None:
            assert chain.note == NO_GRADIENT_NOTE and not chain.terms
            continue
        assert chain.upstream == preview(g)
        check_chain_terms(tree, node, chain, env)
    assert len(shown.order) == len(set(shown.order["node"]))
    check_snippet(shown)


def check_snippet(shown) -> None:
    """The backward snippet, run here, prints the engine order and every gradient the page shows, as it shows them
    (the first values of each, to 4 significant digits)."""
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        exec(compile(shown.code, "<snippet>", "exec"), {"__name__": "__main__"})
    lines = said.getvalue().splitlines()
    order = [(int(k.removeprefix("#")), name) for k, name in zip(shown.order["node"], shown.order["grad_fn"],
                                                                  strict=True)]
    leaves = [f"{row['leaf']}.grad {row['.grad']}" for row in shown.leaf_grads.to_dict("records")
              if row["requires_grad"]]
    assert lines[:1 + len(leaves)] == [f"engine order: {order}", *leaves]
    assert [line.split(" ", 1)[1] for line in lines[1 + len(leaves):]] == [
        "None" if g == CUT_BY_DETACH else g for g in shown.intermediate_grads["gradient flowing in (.grad)"]]


def label_case(text: str, shown) -> None:
    """Hypothesis statistics (--hypothesis-show-statistics): how often the edge cases were reached."""
    event("rendered")
    if (shown.intermediate_grads["gradient flowing in (.grad)"] == CUT_BY_DETACH).any():
        event("an intermediate cut off by .detach()")
    if any(word in cell for cell in shown.leaf_grads[".grad"] for word in ("inf", "nan")):
        event("inf or nan gradient")
    if "/ 0" in text:
        event("zero divisor")


def check_chain_terms(tree, node, chain, env) -> None:
    """Each operand's term: the engine's value equals autograd.grad into that operand; the hand rule agrees."""
    operands = [c for c in children(node) if isinstance(v := run(c, env), torch.Tensor) and v.requires_grad]
    assert len(chain.terms) == len(operands)
    for child, term in zip(operands, chain.terms, strict=True):
        assert term.operand == to_source(child)
        want = grad_into(tree, child, env)
        if want.numel() == 0:
            assert term.engine is None
            continue
        assert close(term.engine, float(want.flatten()[0])), (term, want)
        if term.hand is not None:
            assert close(term.hand, term.engine, rtol=1e-3), term
            scale = float(want[torch.isfinite(want)].abs().max()) if torch.isfinite(want).any() else 0.0
            assert term.max_abs_diff <= 1e-3 * (1 + scale), (term, want)


@pytest.mark.parametrize("leaves, expr", [
    ("W: 3,2 grad", "W / 0"),
    ("W: 3,2 grad", "sum(W) / 0"),
    ("W: 3,2 grad", "W / 0.0"),
    ("w: 3 grad", "sum(w * (w * 2).detach())"),
    ("x: 3,3 grad", "sum(x.T.detach() @ x)"),
    ("x: 3 grad", "x[2:1] * 2"),
    ("x: 3 grad", "0 ** x"),
])
def test_reported_crashes_render(leaves, expr):
    """The expressions that once ended in ZeroDivisionError, TypeError, AttributeError or IndexError."""
    shown = backward_view(leaves, expr)
    assert shown.max_diff_vs_autograd_grad == 0.0
    assert graph_view(leaves, expr).n_nodes > 0


def test_zero_divisor_gives_infinite_gradients_like_torch():
    shown = backward_view("W: 3,2 grad", "W / 0")
    assert shown.leaf_grads.loc[0, ".grad"] == "[inf, inf, inf, inf, inf, inf]"
    (term,) = shown.chains[0].terms
    assert term.hand == term.engine == float("inf") and term.max_abs_diff == 0.0
    assert "inf or nan" in shown.gradcheck_message


def test_equal_sub_expressions_get_their_own_temporaries_in_the_snippet():
    """x * 2 + x * 2 is two multiplications: the snippet once reused one temporary for both (t3 = t2 + t2)."""
    shown = backward_view("x: 3 grad", "sum(x * 2 + x * 2)")
    assert "t3 = t1 + t2" in shown.code
    check_snippet(shown)


def test_detached_intermediate_says_no_gradient_reaches_it():
    shown = backward_view("w: 3 grad", "sum(w * (w * 2).detach())")
    cut = shown.chains[0]
    assert cut.step == "w * 2" and cut.note == NO_GRADIENT_NOTE
    assert shown.intermediate_grads.loc[0, "gradient flowing in (.grad)"] == CUT_BY_DETACH
