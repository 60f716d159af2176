"""Custom autograd Functions: gradcheck passes for the correct ones, fails for the planted wrong backward."""

import torch

from demos.autograd.custom import (
    RoundSTE,
    SquareForgetsGrad,
    StableLogSumExp,
    Swish,
    all_custom,
    run_gradcheck,
    wrong_backward_trap,
)


def x64(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64).requires_grad_()


def test_gradcheck_passes_for_the_correct_functions():
    assert torch.autograd.gradcheck(StableLogSumExp.apply, (x64(3, 5),))
    assert torch.autograd.gradcheck(Swish.apply, (x64(3, 5),))
    assert run_gradcheck(Swish.apply, x64(4))[0]


def test_gradcheck_fails_for_the_planted_wrong_backward():
    assert not torch.autograd.gradcheck(SquareForgetsGrad.apply, (x64(5),), raise_exception=False)
    trap = wrong_backward_trap()
    assert trap.naive_passes and not trap.gradcheck_ok
    assert trap.weighted_custom != trap.weighted_true


def test_custom_gradients_equal_autograd_on_the_plain_versions():
    x = x64(3, 5)
    (g_custom,) = torch.autograd.grad(StableLogSumExp.apply(x).sum(), x)
    (g_plain,) = torch.autograd.grad(torch.logsumexp(x, dim=-1).sum(), x)
    torch.testing.assert_close(g_custom, g_plain)
    (g_custom,) = torch.autograd.grad(Swish.apply(x).sum(), x)
    (g_plain,) = torch.autograd.grad(torch.nn.functional.silu(x).sum(), x)
    torch.testing.assert_close(g_custom, g_plain)
    torch.testing.assert_close(StableLogSumExp.apply(x), torch.logsumexp(x, dim=-1))


def test_straight_through_passes_the_gradient_and_round_does_not():
    x = x64(6)
    (g,) = torch.autograd.grad(RoundSTE.apply(x).sum(), x)
    (g_round,) = torch.autograd.grad(torch.round(x).sum(), x)
    assert torch.equal(g, torch.ones_like(x)) and torch.equal(g_round, torch.zeros_like(x))


def test_shown_results_agree_with_the_checks():
    examples, trap = all_custom()
    ste, lse, swish = examples
    assert not ste.gradcheck_ok and ste.max_abs_diff == 1.0
    assert lse.gradcheck_ok and swish.gradcheck_ok and lse.max_abs_diff < 1e-12 and swish.max_abs_diff < 1e-12
    assert dict(lse.extra)["x = [1000, 1000.5, 999]: naive"] == "[inf]"
    assert dict(lse.extra)["x = [1000, 1000.5, 999]: stable"] == dict(lse.extra)["torch.logsumexp agrees"]
