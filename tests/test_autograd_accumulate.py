"""Accumulation and reuse: repeated backward, micro-batches, freed graphs, second-order gradients."""

import pytest
import torch

from demos.autograd.accumulate import freed_graph, gradient_penalty, micro_batches, repeated_backward
from demos.errors import InputError


def test_grad_adds_up_over_calls():
    r = repeated_backward(3)
    for k, grad in enumerate(r.accumulated, 1):
        assert grad == pytest.approx([k * v for v in r.x])
    assert all(g == pytest.approx(r.x) for g in r.zeroed)


@pytest.mark.parametrize("batch, k", [(32, 4), (256, 16), (30, 5), (7, 7), (2, 1)])
def test_micro_batches_equal_one_large_batch(batch, k):
    r = micro_batches(batch, k)
    assert r.max_diff <= 1e-6
    assert r.forgot_ratio == pytest.approx(k)
    assert r.forgot == pytest.approx([k * v for v in r.full])


def test_micro_batch_inputs_are_checked():
    with pytest.raises(InputError, match="does not split"):
        micro_batches(30, 4)
    with pytest.raises(InputError, match="Batch size: 1000 is out of range"):
        micro_batches(1000, 4)


def test_second_backward_through_a_freed_graph():
    r = freed_graph()
    assert "backward through the graph a second time" in r.second_error
    assert r.retained_grads == ((2.0, 4.0, 6.0), (4.0, 8.0, 12.0))


def test_gradient_penalty_matches_double_backward():
    r = gradient_penalty()
    x = torch.tensor(r.x, requires_grad=True)
    (g,) = torch.autograd.grad((x**3).sum(), x, create_graph=True)
    (second,) = torch.autograd.grad((g**2).sum(), x)
    assert r.second == pytest.approx(second.tolist())
    assert r.second == pytest.approx([36 * v**3 for v in r.x])
    assert r.gradgradcheck_ok and "does not require grad" in r.no_create_graph_error
