"""Gradient-flow demos against torch itself: norms, stds, heatmap, histograms, clipping, dead units (the snippets:
tests/test_shown_core.py)."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from demos.errors import InputError
from demos.gradient_flow import clipping, dead_relu, figures, flow
from demos.gradient_flow.network import batch, build

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def vanishing():
    return flow.gradient_flow(30, 32, "sigmoid", "normal", "none", False, steps=3)


def test_norms_equal_the_parameters_grad(vanishing):
    cfg = vanishing.cfg
    net = build(cfg)
    x, y = batch(cfg, 0)
    nn.functional.cross_entropy(net(x), y).backward()
    direct = [b.linear.weight.grad.norm().item() for b in net.blocks]
    assert vanishing.yours.grad_norms == pytest.approx(direct, rel=1e-6)


def test_activation_stds_equal_a_direct_forward(vanishing):
    net = build(vanishing.cfg)
    h, _ = batch(vanishing.cfg, 0)
    stds = []
    for block in net.blocks:
        h = block(h)
        stds.append(h.std().item())
    assert vanishing.yours.act_stds == pytest.approx(stds, rel=1e-6)


def test_sigmoid_normal_depth_30_vanishes_and_the_fix_closes_the_gap(vanishing):
    yours = vanishing.yours.grad_norms[0] / vanishing.yours.grad_norms[-1]
    fixed = vanishing.fixed.grad_norms[0] / vanishing.fixed.grad_norms[-1]
    assert yours < 1e-3, "early layer orders of magnitude below the last"
    assert fixed > 1e-2, "residuals + LayerNorm + right init keep them within two orders"
    assert fixed / yours > 1e2
    assert vanishing.fixed.cfg.residual and vanishing.fixed.cfg.norm == "layer"


def test_heatmap_equals_manual_sgd_steps(vanishing):
    cfg = vanishing.cfg
    net = build(cfg)
    opt = torch.optim.SGD(net.parameters(), lr=flow.LR)
    for step in range(3):
        x, y = batch(cfg, 1 + step)
        loss = nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        norms = [b.linear.weight.grad.norm().item() for b in net.blocks]
        assert [row[step] for row in vanishing.heatmap] == pytest.approx(norms, rel=1e-6)
        assert vanishing.step_losses[step] == pytest.approx(loss.item(), rel=1e-6)
        opt.step()


def test_histograms_count_every_gradient_entry(vanishing):
    width = vanishing.cfg.width
    assert [h.layer for h in vanishing.histograms] == [1, 10, 20, 30]
    for h in vanishing.histograms:
        assert sum(h.counts) + h.zeros == width * width


def test_relu_too_small_init_gives_exact_zero_gradients_drawn_at_the_floor():
    r = flow.gradient_flow(30, 32, "relu", "small", "none", False, steps=1)
    assert r.yours.grad_norms[0] == 0.0
    assert r.fixed.grad_norms[0] > 0


@pytest.mark.parametrize("kwargs, words", [
    (dict(depth=0), "Depth"), (dict(depth=51), "Depth"), (dict(width=3), "Width"), (dict(width=513), "Width"),
    (dict(activation="swish"), "Activation"), (dict(init="orthogonal"), "Initialization"),
    (dict(norm="group"), "Normalization"), (dict(steps=0), "Training steps"), (dict(steps=13), "Training steps"),
])
def test_bad_network_settings_raise_input_error(kwargs, words):
    args = dict(depth=4, width=8, activation="relu", init="default", norm="none", residual=False, steps=1) | kwargs
    with pytest.raises(InputError, match=words):
        flow.gradient_flow(**args)


def test_clipping_equals_torch():
    c = clipping.compare_clipping(1.0, 0.1)
    grads = clipping.raw_gradients()
    expected_total = torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads])).item()
    assert c.norm_before == pytest.approx(expected_total, rel=1e-5)
    assert c.returned_norm == pytest.approx(expected_total, rel=1e-5)
    params = [nn.Parameter(torch.zeros_like(g)) for g in grads]
    for p, g in zip(params, grads, strict=True):
        p.grad = g.clone()
    nn.utils.clip_grad_norm_(params, 1.0)
    assert c.norm_after_norm_clip == pytest.approx(clipping.total_norm([p.grad for p in params]), rel=1e-6)
    for p, g in zip(params, grads, strict=True):
        p.grad = g.clone()
    nn.utils.clip_grad_value_(params, 0.1)
    assert c.norm_after_value_clip == pytest.approx(clipping.total_norm([p.grad for p in params]), rel=1e-6)
    assert c.cosine_norm_clip == pytest.approx(1.0, abs=1e-5), "norm clipping keeps the direction"
    assert c.cosine_value_clip < 0.99, "value clipping turns it"
    assert max(abs(v) for v in c.after_value) <= 0.1 + 1e-7


def test_clipping_rescues_the_diverging_run():
    r = clipping.clipping_run("0.1", 1.0)
    assert r.plain_diverged
    assert all(math.isfinite(v) for v in r.loss_clipped)
    assert r.loss_clipped[-1] < r.loss_clipped[0]
    assert len(r.loss_clipped) == clipping.RUN_STEPS


def test_clipping_run_matches_a_manual_loop():
    losses, norms = clipping.train(0.01, 1.0)
    model = clipping.mlp()
    x, y = clipping.regression_data()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    for step in range(5):
        idx = torch.randint(0, len(x), (64,), generator=g)
        loss = nn.functional.mse_loss(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        assert nn.utils.clip_grad_norm_(model.parameters(), 1.0).item() == pytest.approx(norms[step], rel=1e-5)
        opt.step()
        with torch.no_grad():
            assert nn.functional.mse_loss(model(x), y).item() == pytest.approx(losses[step], rel=1e-5)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_parse_lr_accepts_or_raises_input_error(text):
    try:
        lr = clipping.parse_lr(text)
    except InputError as err:
        assert str(err).endswith(".")
        return
    assert clipping.MIN_LR <= lr <= clipping.MAX_LR


@pytest.mark.parametrize("text", ["abc", "5", "-0.1", "nan", "inf", "1e-9", "", "0.1.2"])
def test_bad_learning_rates_name_the_field(text):
    with pytest.raises(InputError, match="Learning rate"):
        clipping.parse_lr(text)


@pytest.mark.parametrize("value", [0.0, 1000.0, float("nan")])
def test_bad_clip_values_raise(value):
    with pytest.raises(InputError, match="max_norm"):
        clipping.compare_clipping(value, 0.1)


def test_dead_fractions_equal_a_direct_count():
    run = dead_relu.dead_run(0.3, "default")
    model, linears = dead_relu.relu_net("default")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(dead_relu.EVAL, 16, generator=g)
    h, before = x, []
    for lin in linears:
        h = torch.relu(lin(h))
        before.append(((h > 0).sum(0) == 0).float().mean().item())
    assert run.dead_before == pytest.approx(before)


def test_bad_lr_kills_units_and_negative_bias_is_dead_from_the_start():
    d = dead_relu.dead_relus(0.3, "default")
    assert sum(d.yours.dead_after) > sum(d.yours.dead_before) + 0.5
    assert d.yours.finite
    assert max(d.good.dead_after) < 0.1
    neg = dead_relu.dead_run(0.01, "negative_bias")
    assert all(f == 1.0 for f in neg.dead_before[1:])


def test_dead_relu_validation():
    with pytest.raises(InputError, match="Learning rate"):
        dead_relu.dead_relus(0.5, "default")
    with pytest.raises(InputError, match="Initialization"):
        dead_relu.dead_relus(0.01, "zeros")


def test_activation_slopes_are_the_derivative_torch_gives_at_each_layers_input(vanishing):
    net = build(vanishing.cfg)
    h, _ = batch(vanishing.cfg, 0)
    slopes = []
    for block in net.blocks:
        z = block.norm(block.linear(h))
        s = torch.sigmoid(z)
        slopes.append((s * (1 - s)).mean().item())  # d sigmoid / dz
        h = block(h)
    assert vanishing.yours.act_slopes == pytest.approx(slopes, rel=1e-5)
    assert vanishing.yours.layer_gain == pytest.approx(vanishing.yours.backprop_ratio ** (1 / 29))


def test_xavier_keeps_the_linear_factor_near_1_but_sigmoid_still_vanishes():
    """The claim the page makes about init, checked: with Xavier the per-layer factor is the sigmoid's slope."""
    r = flow.gradient_flow(30, 32, "sigmoid", "xavier", "none", False, steps=1)
    p = r.yours
    assert p.verdict == "vanishing" and p.ratio < 1e-10
    assert max(p.act_slopes) <= 0.25
    assert p.layer_gain / (sum(p.act_slopes) / len(p.act_slopes)) == pytest.approx(1.0, abs=0.1)


def test_defaults_explain_why_layernorm_is_the_worst_line(vanishing):
    lines = flow.fix_sentences(vanishing, figures.VARIANT_NAMES)
    yours, residual, layernorm, fixed = vanishing.variants
    assert layernorm.ratio < yours.ratio, "at defaults + LayerNorm really is below your setting"
    why = next(line for line in lines if line.startswith("+ LayerNorm's gradient changes more per layer"))
    assert f"{yours.layer_gain:.3g} to {layernorm.layer_gain:.3g}" in why
    assert layernorm.backprop_ratio < yours.backprop_ratio < 1, "the backpropagated gradient shrinks more, as said"
    assert [line for line in lines if line.startswith("**")][2].startswith(
        f"**+ LayerNorm**: weight gradients, layer 1 / last = {layernorm.ratio:.2g} (vanishing)")
    healthy = [p for p in vanishing.variants if p.verdict == "healthy"]
    assert bool(healthy) != any(line.startswith("No line is healthy") for line in lines)


def test_a_blown_up_run_is_not_called_healthy():
    r = flow.gradient_flow(30, 32, "relu", "normal", "none", False, steps=2)
    assert 0.1 < r.yours.ratio < 10, "the ratio alone would look healthy"
    assert r.yours.loss > 100 * flow.CHANCE_LOSS
    assert r.yours.verdict == "loss far above chance"
    assert f"{r.yours.loss:.3g}" in flow.health_warning(r)


def test_diverged_training_is_named_with_its_step():
    r = flow.gradient_flow(30, 32, "relu", "normal", "none", False, steps=3)
    assert not math.isfinite(r.step_losses[-1])
    cfg_ok = flow.gradient_flow(30, 32, "sigmoid", "normal", "none", False, steps=2)
    assert flow.health_warning(cfg_ok) == ""


def test_batchnorm_alone_beating_the_recipe_is_said():
    r = flow.gradient_flow(30, 32, "sigmoid", "normal", "batch", False, steps=1)
    assert r.yours.verdict == "healthy" and r.fixed.verdict != "healthy"
    assert any(line.startswith("Healthy here: your setting; the textbook recipe is not")
               for line in flow.fix_sentences(r, figures.VARIANT_NAMES))
