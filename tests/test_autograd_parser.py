"""The expression language and leaf declarations: unit cases and hypothesis fuzzing (parsed or InputError only)."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from demos.autograd.backward import backward_view
from demos.autograd.expr import (
    MAX_EXPR,
    evaluate,
    make_leaves,
    parse_expression,
    parse_leaves,
    to_source,
)
from demos.autograd.graph import build, graph_view
from demos.errors import InputError

LEAVES = "x: 4,3 grad; W: 3,2 grad; b: 2; s: () grad"
TOKENS = ["x", "W", "b", "s", "q", "2", "0.5", "1e3", "+", "-", "*", "/", "@", "**", "(", ")", "[", "]", ",", ":",
          ".T", ".detach()", "relu(", "sum(", "mean(", "softmax(", "log(", "exp(", "tanh(", "sigmoid(", "dim=",
          "-1", "0", "1", "%", "//", "^", " ", "x.sum()", "foo("]


@pytest.mark.parametrize("text, torch_text", [
    ("mean((x @ W + b - y) ** 2)", "torch.mean((x @ W + b - y) ** 2)"),
    ("sum(softmax(q @ k.T / 2, -1) @ v)", "torch.sum(torch.softmax(q @ k.T / 2, dim=-1) @ v)"),
    ("-x ** 2", "-x ** 2"),
    ("(-x) ** 2", "(-x) ** 2"),
    ("a - (b - c)", "a - (b - c)"),
    ("x[0, 1:3, ::2].detach()", "x[0, 1:3, ::2].detach()"),
    ("sum(x, dim=1)", "torch.sum(x, dim=1)"),
])
def test_round_trip_to_torch_code(text, torch_text):
    tree = parse_expression(text)
    assert to_source(tree, torch_style=True) == torch_text
    assert parse_expression(to_source(tree)) == tree


@pytest.mark.parametrize("text, words", [
    ("x % 2", "not supported"),
    ("x // 2", "not supported"),
    ("foo(x)", "unknown function `foo` at position 1"),
    ("x +", "ends too early"),
    ("(" * 30 + "x" + ")" * 30, "nests more than"),
    ("x.sum()", "only .detach() and .T"),
    ("x[1:2:-1]", "positive"),
    ("x" + " + x" * 70, "too long"),
    ("", "empty; type an expression"),
])
def test_bad_expressions_are_named(text, words):
    with pytest.raises(InputError, match=words.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        parse_expression(text)


@pytest.mark.parametrize("expr, words", [
    ("x @ b", "inner sizes 3 and 2"),
    ("x + W", "(4, 3) and (3, 2) do not broadcast"),
    ("zz * 2", "Unknown name `zz`"),
    ("x[9]", "Index 9 is out of range"),
    ("sum(x, 5)", "dim=5 is out of range"),
    ("s.T", ".T needs a 2-D tensor"),
    ("2 + 3", "plain number"),
    ("b * 2", "no grad_fn"),
    ("x.detach() * 2", "no grad_fn"),
])
def test_evaluation_errors_name_the_shapes(expr, words):
    with pytest.raises(InputError, match=words.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        build(LEAVES, expr)


@pytest.mark.parametrize("text, words", [
    ("x 4,3", "not a leaf declaration"),
    ("x: 65,2", "limit is 64"),
    ("x: 4,4,4,4", "at most 3"),
    ("x: 2; x: 3", "declared twice"),
    ("sum: 3", "reserved"),
    ("x: 0,3", "zero dimension"),
    ("a: 1; b: 1; c: 1; d: 1; e: 1; f: 1; g: 1", "At most 6"),
    ("", "at least one"),
])
def test_bad_leaves_are_named(text, words):
    with pytest.raises(InputError, match=words):
        parse_leaves(text)


def test_leaves_are_seeded_and_flagged():
    leaves = parse_leaves("x: 4,3; W: 3,2 requires_grad")
    a, b = make_leaves(leaves), make_leaves(leaves)
    assert torch.equal(a["x"], b["x"]) and a["W"].requires_grad and not a["x"].requires_grad
    assert a["W"].shape == (3, 2)


def test_evaluation_matches_torch():
    tensors = make_leaves(parse_leaves(LEAVES))
    x, W, b = tensors["x"], tensors["W"], tensors["b"]
    out = evaluate(parse_expression("mean(relu(x @ W + b) ** 2, 0)[1:] - softmax(x, 0).T[0, 0]"), tensors)
    expected = torch.mean(torch.relu(x @ W + b) ** 2, dim=0)[1:] - torch.softmax(x, dim=0).T[0, 0]
    torch.testing.assert_close(out, expected)


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.text(max_size=MAX_EXPR + 20))
def test_any_text_parses_or_raises_input_error(text):
    try:
        parse_expression(text)
    except InputError:
        pass


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=25).map("".join))
def test_token_soup_draws_or_raises_input_error(text):
    try:
        graph_view(LEAVES, text, show_saved=True)
    except InputError:
        pass


@FUZZ
@given(st.text(alphabet=st.sampled_from(list("xWb:;,() 0123456789grad_\n-")), max_size=60))
def test_any_leaf_text_parses_or_raises_input_error(text):
    try:
        leaves = parse_leaves(text)
    except InputError:
        return
    assert all(len(leaf.shape) <= 3 and all(1 <= d <= 64 for d in leaf.shape) for leaf in leaves)


def _expressions():
    """Well-formed expressions over the test leaves, so evaluation, backward and the chain rule get exercised."""
    atoms = st.sampled_from(["x", "W", "b", "s", "2", "0.5", "zz"])

    def grow(inner):
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "@", "**"]), inner)
            .map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(st.sampled_from(["relu", "sigmoid", "tanh", "exp", "log", "sum", "mean", "softmax"]), inner)
            .map(lambda t: f"{t[0]}({t[1]})"),
            st.tuples(st.sampled_from(["sum", "mean", "softmax"]), inner, st.integers(-2, 1))
            .map(lambda t: f"{t[0]}({t[1]}, {t[2]})"),
            inner.map(lambda e: f"{e}.T"),
            inner.map(lambda e: f"{e}.detach()"),
            inner.map(lambda e: f"-{e}"),
            st.tuples(inner, st.sampled_from(["[0]", "[1:3]", "[:, 0]", "[-1, ::2]", "[5]"])).map("".join),
        )

    return st.recursive(atoms, grow, max_leaves=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_expressions())
def test_grammar_expressions_run_backward_or_raise_input_error(text):
    try:
        backward_view(LEAVES, text)
    except InputError:
        pass
