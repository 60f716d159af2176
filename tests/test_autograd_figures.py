"""Autograd's Backward and Custom Functions tabs open on figures: the gradient on each edge of the backward graph
and the custom Functions' gradients, checked against torch.autograd.grad and the analytic derivatives."""

import json

import pytest
import torch

from demos.autograd.backward import preview
from demos.autograd.backward_graph import backward_flow, edge_label
from demos.autograd.custom_figure import CASES, custom_curves
from demos.autograd.graph import DEFAULT_PRESET, PRESETS, build, node_ids
from tests.conftest import assert_clean, open_page

PAGE = "pages/autograd.py"


def incoming(flow, k: int) -> torch.Tensor:
    """The sum of the gradients that flowed into node k (what the engine hands it)."""
    return sum(e.grad for e in flow.edges if e.dst == k and e.grad is not None)


@pytest.mark.parametrize("preset", list(PRESETS))
def test_the_gradient_into_each_node_is_torchs_gradient_of_what_it_made(preset):
    leaves, expr = PRESETS[preset]
    flow = backward_flow(leaves, expr)
    fresh = build(leaves, expr)  # the same seeded run, differentiated by torch.autograd.grad
    ids = node_ids(fresh.nodes)
    made = {ids[s.out.grad_fn]: s.out for s in fresh.steps if s.out.grad_fn in ids}
    made |= {ids[fn]: fn.variable for fn in fresh.nodes if hasattr(fn, "variable")}
    for k, tensor in made.items():
        (want,) = torch.autograd.grad(fresh.out, tensor, torch.ones_like(fresh.out), retain_graph=True)
        torch.testing.assert_close(incoming(flow, k), want, msg=f"{preset}: node #{k} {flow.names[k]}")
    assert sorted(r for r in flow.ran if r is not None) == list(range(1, len(flow.names) + 1)), "every node ran once"


def test_detach_leaves_one_edge_into_the_leaf_it_hides():
    leaves, expr = "x: 3 grad; w: 3 grad", "sum(x * w.detach() + w)"
    flow = backward_flow(leaves, expr)
    b = build(leaves, expr)
    w_node = next(k for k, fn in enumerate(b.nodes) if getattr(fn, "variable", None) is b.tensors["w"])
    into_w = [e for e in flow.edges if e.dst == w_node]
    assert len(into_w) == 1 and torch.equal(into_w[0].grad, torch.ones(3)), "only the + w path reaches w"
    torch.testing.assert_close(flow.leaf_grads["x"], b.tensors["w"].detach())


def test_backward_tab_opens_on_the_graph_with_torchs_leaf_gradients_on_its_edges():
    at = open_page(PAGE, query={"ag_tab": "Backward"})
    assert_clean(at)
    (chart,) = at.get("graphviz_chart")
    leaves, expr = PRESETS[DEFAULT_PRESET]
    b = build(leaves, expr)
    for name, t in b.tensors.items():
        if t.requires_grad:
            (g,) = torch.autograd.grad(b.out, t, retain_graph=True)
            assert f'[label="{edge_label(g)}"]' in chart.proto.spec, f"the edge into {name}'s AccumulateGrad"
            assert preview(g, 3) in chart.proto.spec


@pytest.mark.parametrize("name", list(CASES))
def test_custom_curves_match_the_analytic_derivatives(name):
    c = custom_curves(name)
    x = torch.tensor(c.x, dtype=torch.float64)
    forward, derivative, plain = {
        "Straight-through estimator for rounding": (torch.round(x), torch.ones_like(x), torch.zeros_like(x)),
        "Numerically stable log-sum-exp": (
            torch.logsumexp(torch.stack([x, 0 * x, 0 * x + 1], -1), -1),
            torch.softmax(torch.stack([x, 0 * x, 0 * x + 1], -1), -1)[:, 0], None),
        "Swish with ctx.save_for_backward": (x * torch.sigmoid(x),
                                             torch.sigmoid(x) * (1 + x * (1 - torch.sigmoid(x))), None),
    }[name]
    torch.testing.assert_close(torch.tensor(c.forward, dtype=torch.float64), forward)
    torch.testing.assert_close(torch.tensor(c.custom_grad, dtype=torch.float64), derivative)
    torch.testing.assert_close(torch.tensor(c.plain_grad, dtype=torch.float64),
                               derivative if plain is None else plain)


def test_custom_functions_tab_opens_on_the_sweep_of_its_example():
    at = open_page(PAGE, query={"ag_tab": "Custom Functions"})
    assert_clean(at)
    (spec,) = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    custom = next(d for d in spec["data"] if d["name"] == "custom backward")
    plain = next(d for d in spec["data"] if d["name"] == "autograd, plain version")
    assert set(custom["y"]) == {1.0} and set(plain["y"]) == {0.0}, "the STE reports slope 1; round's true slope is 0"
    assert any(c.value.endswith("differ by at most 1.") for c in at.caption)
