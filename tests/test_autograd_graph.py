"""The graph and backward sections against torch itself: node table, gradients, chain rule, gradcheck."""

import re

import pytest
import torch

from demos.autograd import backward
from demos.autograd.backward import backward_view, gradcheck_expression, preview, run_backward
from demos.autograd.graph import MAX_GRAPH_NODES, PRESETS, build, graph_view
from demos.errors import InputError
from tests.provenance import assert_shows_what_ran
from tests.snippet_runner import run_alone
from tests.snippets import autograd as snippets
from tests.test_autograd_backward_props import check_snippet

CASES = list(PRESETS.values()) + [
    ("x: 4,3 grad; y: 3 grad", "sum(x[1:3] * y + 2 ** y - x[0] / y ** 2) + mean(log(sigmoid(x)), 1)[0] - x.T[0, 0]"),
    ("x: 3 grad", "sum(x * x + x.detach() * exp(-x))"),
]


def walk(root) -> tuple[list, list]:
    """An independent traversal: every grad_fn reachable through next_functions, and each input edge."""
    nodes, edges, todo = [], [], [root]
    while todo:
        fn = todo.pop()
        if fn in nodes:
            continue
        nodes.append(fn)
        for nxt, _ in fn.next_functions:
            if nxt is not None:
                edges.append((fn, nxt))
                todo.append(nxt)
    return nodes, edges


@pytest.mark.parametrize("leaves, expr", CASES)
def test_node_table_equals_a_traversal_of_next_functions(leaves, expr):
    b = build(leaves, expr)
    nodes, edges = walk(b.out.grad_fn)
    assert set(b.nodes) == set(nodes)
    table = graph_view(leaves, expr).nodes
    assert sorted(table["grad_fn"]) == sorted(type(n).__name__ for n in nodes)
    listed = sum(0 if cell == "—" else len(cell.split(", ")) for cell in table["next functions"])
    assert listed == len(edges)
    assert (table["leaf"] == "yes").sum() == sum(hasattr(n, "variable") for n in nodes)


@pytest.mark.parametrize("leaves, expr", CASES)
def test_every_shown_gradient_equals_autograd_grad(leaves, expr):
    b = build(leaves, expr)
    run_backward(b)
    fresh = build(leaves, expr)
    seed = torch.ones_like(fresh.out)
    wanted = [t for t in fresh.tensors.values() if t.requires_grad]
    grads = torch.autograd.grad(fresh.out, wanted, seed, retain_graph=True, allow_unused=True)
    shown = backward_view(leaves, expr)
    for (name, t), g in zip([(n, t) for n, t in b.tensors.items() if t.requires_grad], grads, strict=True):
        expected = torch.zeros_like(t) if g is None else g
        got = torch.zeros_like(t) if t.grad is None else t.grad
        torch.testing.assert_close(got, expected)
        row = shown.leaf_grads.set_index("leaf").loc[name]
        assert row[".grad"] == preview(t.grad)
    steps = [s for s in fresh.steps if s.out.requires_grad]
    inter = torch.autograd.grad(fresh.out, [s.out for s in steps], seed, allow_unused=True)
    for s, g, shown_row in zip(steps, inter, shown.intermediate_grads.to_dict("records"), strict=True):
        assert shown_row["gradient flowing in (.grad)"] == preview(g)
        assert shown_row["operation"] == s.text


@pytest.mark.parametrize("leaves, expr", CASES)
def test_chain_rule_by_hand_matches_the_engine(leaves, expr):
    result = backward_view(leaves, expr)
    assert result.chains
    for chain in result.chains:
        for term in chain.terms:
            if term.max_abs_diff is not None:
                assert term.max_abs_diff < 1e-4, (chain.step, term)


def test_engine_order_starts_at_the_output_and_visits_every_node():
    leaves, expr = PRESETS["Two-layer MLP"]
    b = build(leaves, expr)
    _, order = run_backward(b)
    assert order[0] == 0 and sorted(order) == list(range(len(b.nodes)))


@pytest.mark.parametrize("leaves, expr", CASES[:-1])
def test_gradcheck_passes_for_the_expressions(leaves, expr):
    ok, _, message = gradcheck_expression(leaves, expr)
    assert ok, message


def test_gradcheck_fails_when_detach_hides_a_dependence():
    ok, _, message = gradcheck_expression(*CASES[-1])
    assert not ok and ".detach()" in message


def test_gradcheck_reports_a_failure_instead_of_raising():
    ok, _, message = gradcheck_expression("x: 3 grad", "sum(log(x))")  # log of negatives: nan
    assert not ok and message


def test_graph_size_is_capped_with_a_sentence():
    with pytest.raises(InputError, match=f"limit is {MAX_GRAPH_NODES}"):
        build("x: 2,2,2 grad",  # 21 x 3 selects: 85 nodes within the text and operation limits
              "sum(" + "+".join(["x[0,0,0]"] * 21) + ")")


def test_saved_tensors_are_drawn_on_request():
    leaves, expr = PRESETS["Linear layer + MSE loss"]
    plain, saved = graph_view(leaves, expr, False), graph_view(leaves, expr, True)
    assert "orange" in saved.dot and "orange" not in plain.dot
    assert "MmBackward0" in plain.dot and "AccumulateGrad" in plain.dot


@pytest.mark.parametrize("name", ["Two-layer MLP", "Attention scores"])
def test_backward_snippet_reproduces_the_page(name):
    leaves, expr = PRESETS[name]
    check_snippet(backward_view(leaves, expr))  # engine order and every gradient, as the page's tables show them


def test_graph_and_backward_snippets_of_a_matmul_and_a_broadcast_add_print_their_tables(tmp_path, snippet_server):
    """The snippet checks (tests/snippets/autograd.py) on a second case beside the entries' example: each snippet,
    run alone, prints the node table and the gradients the page shows for it."""
    def run(code: str) -> str:
        done = run_alone(code, tmp_path, snippet_server)
        assert done.returncode == 0, done.stderr
        return done.stdout

    leaves, expr = "x: 4,3; W: 3,2 grad; b: 2 grad", "sum(x @ W + b)"
    snippets.autograd_graph(assert_shows_what_ran(graph_view, leaves, expr, False), run)
    snippets.autograd_backward(assert_shows_what_ran(backward_view, leaves, expr), run)


def letters_read(chain) -> dict[str, str]:
    """The letter each operand is given in the page's sentence 'Here a = `x`, b = `W`; g = ...'."""
    said = backward.operands_sentence(chain)
    pairs = re.findall(r"(\S+) = `([^`]*)`", said.split("; ")[0].removeprefix("Here "))
    return dict(pairs)


@pytest.mark.parametrize(("leaves", "expr"), [
    PRESETS["Linear layer + MSE loss"],  # its bias is the leaf b
    ("a: 3 grad; b: 3 grad; n: 3; g: 3 grad", "sum(relu(a * b) ** 2 + exp(g) @ n)"),  # every rule letter a leaf
    ("A: 2,3 grad; U: 3,2 grad; x: 2 grad", "sum(A @ U + x * 3)"),
])
def test_the_rule_letters_are_the_sentences_and_never_a_leafs_name(leaves, expr):
    """'Here a = x, b = W' on a page whose b is the bias: the letters now name no leaf and are the rules' own."""
    result = backward_view(leaves, expr)
    names = set(parse_leaf_names(leaves))
    for chain in result.chains:
        given = letters_read(chain)
        *operand_letters, upstream = chain.symbols
        assert list(given) == operand_letters[:len(chain.operands)] and list(given.values()) == list(chain.operands)
        assert not (set(chain.symbols) & names), (chain.step, chain.symbols)
        assert f"; {upstream} = ∂L/∂out is the gradient flowing into `{chain.step}`" in \
            backward.operands_sentence(chain)
        for term in chain.terms:
            letter = re.match(r"∂L/∂(\S+?)(?:\[|\s)", term.formula).group(1)
            assert given.get(letter) == term.operand, (chain.step, term.formula, given)
            assert not any(re.search(rf"(?<![A-Za-z]){re.escape(n)}(?![A-Za-z0-9_])", term.formula) for n in names
                           if len(n) == 1), term.formula
    if "x @ W + b" in expr:
        first = backward.operands_sentence(result.chains[0])
        assert first.startswith("Here A = `x`, B = `W`; g = ") and "b = `W`" not in first


def parse_leaf_names(leaves: str) -> list[str]:
    return [entry.split(":")[0].strip() for entry in leaves.split(";")]
