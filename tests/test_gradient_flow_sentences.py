"""The gradient-flow page's explanations against the numbers they explain: the residual stream that makes the full
fix's loss far above chance, the verdict's margin over seeds and depths, the ReLU stream whose variance compounds,
the dead units before training (each unit's largest input against its bias), the per-layer factor of the
backpropagated gradient (not the weight gradients'), and the model answers about normalization and dead ReLUs."""

import dataclasses
import math
import re

import pytest
import torch
from torch import nn

from demos.gradient_flow import dead_relu, flow
from demos.gradient_flow.dead_relu import EVAL, dead_run, relu_net
from demos.gradient_flow.network import NetConfig, batch, build
from pages.ui.quiz import model_answers
from tests.conftest import assert_clean, open_page

PAGE = "pages/gradient-flow.py"
DEFAULT = NetConfig(30, 32, "sigmoid", "normal", "none", False)  # the page's defaults


def stream_after_blocks(cfg: NetConfig, seed: int = 0) -> torch.Tensor:
    """The residual stream after the last block, rebuilt here with plain module calls."""
    net = build(cfg, seed)
    h, _ = batch(cfg, seed)
    with torch.no_grad():
        for block in net.blocks:
            h = block(h)
    return h


@pytest.fixture(scope="module")
def at():
    at = open_page(PAGE)
    assert_clean(at)
    return at


def test_the_full_fix_is_explained_by_its_measured_residual_stream(at):
    said = next(m.value for m in at.markdown if m.value.startswith("**What each line measured**"))
    line = next(x for x in said.splitlines() if x.startswith("- full fix: right init + LayerNorm + residual: the "))
    mean, loss = (float(v) for v in re.search(r"to mean ([\d.]+), std [\d.]+ after block 30\..*\(loss ([\d.]+)\)",
                                              line).groups())
    fixed = flow.fix_variants(DEFAULT)[-1]
    h = stream_after_blocks(fixed)
    assert mean == pytest.approx(h.mean().item(), abs=0.5) and mean > 10, "the stream drifted far from 0"
    assert "Each block adds its sigmoid output, which averages about 0.5" in line
    assert loss > 2 * math.log(10) and "No line is healthy here" in said


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_verdicts_keep_a_margin_over_seeds_and_depths(seed):
    """Near the defaults no line sits at the cutoff: the full fix is well above it, your setting well below."""
    for depth in (25, 30, 35):
        cfg = NetConfig(depth, 32, "sigmoid", "normal", "none", False)
        yours, fixed = (flow.one_pass(v, seed)[0] for v in (cfg, flow.fix_variants(cfg)[-1]))
        assert fixed.loss > 2 * flow.BLOWN_UP_LOSS and fixed.verdict == "loss far above chance", (seed, depth)
        assert yours.loss < 0.6 * flow.BLOWN_UP_LOSS and yours.verdict == "vanishing", (seed, depth)


def test_relu_residual_without_norm_is_blamed_on_its_growing_variance():
    r = flow.gradient_flow(30, 32, "relu", "kaiming", "none", False, steps=1)
    residual = r.variants[1]
    line = next(x for x in flow.fix_sentences(r, ("yours", "+ residual", "+ LayerNorm", "full fix"))
                if x.startswith("+ residual: the residual stream"))
    growth = float(re.search(r"×([\d.]+) per block", line).group(1))
    h = stream_after_blocks(residual.cfg)
    first = residual.act_stds[0]
    assert growth == pytest.approx((h.std().item() / first) ** (1 / 29), abs=0.01) and growth > 1.3
    assert "the variance compounds" in line and "the activation's slope is not the cause" in line
    assert not any("mean slope went from" in x and x.startswith("+ residual") for x in flow.fix_sentences(
        r, ("yours", "+ residual", "+ LayerNorm", "full fix")))


def largest_wh(init: str) -> list[torch.Tensor]:
    """Per layer of the untrained net: each unit's largest W·h over the inputs, and its bias, rebuilt here."""
    _, linears = relu_net(init, 0)
    h = torch.randn(EVAL, 16, generator=torch.Generator().manual_seed(0))
    peaks = []
    with torch.no_grad():
        for lin in linears:
            wh = h @ lin.weight.T
            peaks.append((wh.max(0).values, lin.bias.clone()))
            h = torch.relu(wh + lin.bias)
    return peaks


@pytest.mark.parametrize("init", ["default", "negative_bias"])
def test_dead_units_before_training_are_explained_by_each_units_largest_input(at, init):
    said = dead_relu.before_sentence(dead_run(0.3, init))
    if init == "default":  # the page's defaults: the sentence is on the page
        assert said in [m.value for m in at.markdown]
    run, peaks = dead_run(0.3, init), largest_wh(init)
    assert [((p + b) <= 0).float().mean().item() for p, b in peaks] == pytest.approx(run.dead_before), \
        "silent on every input exactly when the bias is at most minus the largest W·h, as the sentence says"
    cross = int(re.search(r"From layer (\d) on, that largest W·h averages less than the mean \|bias\| \(layer \d: "
                          r"([\d.e-]+) against ([\d.e-]+)\)", said).group(1))
    means = [(p.mean().item(), b.abs().mean().item()) for p, b in peaks]
    assert all(m < b for m, b in means[cross - 1:]) and means[cross - 2][0] >= means[cross - 2][1]
    first = re.search(r"In layer 1 the largest W·h averages ([\d.]+) against a mean \|bias\| of ([\d.]+), and "
                      r"(\d+)% of its units are dead", said)
    assert float(first.group(1)) == pytest.approx(means[0][0], rel=1e-2) and means[0][0] > means[0][1]
    assert int(first.group(3)) == round(100 * run.dead_before[0]) == 0
    assert "bias alone decides" not in said
    assert said.endswith(f"Dead per layer before training: {', '.join(f'{d:.0%}' for d in run.dead_before)}.")


def test_the_model_answer_says_how_a_dead_relu_can_come_back():
    """A unit silent on every input gets no gradient, yet momentum and weight decay move it, as the answer says."""
    answer = dict(model_answers("gradient-flow"))["What is a dead ReLU and how do you prevent it?"]
    assert "never update" not in answer and "momentum" in answer and "weight decay" in answer
    lin = nn.Linear(2, 1)
    x = torch.randn(16, 2, generator=torch.Generator().manual_seed(0)).abs()
    with torch.no_grad():
        lin.weight.fill_(1.0)
        lin.bias.fill_(-100.0)  # silent on every input: W·x + b < 0

    def step(**options):
        unit = dead_copy(lin)
        opt = torch.optim.SGD(unit.parameters(), lr=0.1, **options)
        if "momentum" in options:  # a velocity built while the unit was alive
            opt.state[unit.bias]["momentum_buffer"] = torch.ones(1)
            opt.state[unit.weight]["momentum_buffer"] = torch.ones(1, 2)
        opt.zero_grad()
        torch.relu(unit(x)).sum().backward()
        assert unit.bias.grad.item() == 0 and unit.weight.grad.abs().max().item() == 0
        before = unit.bias.item()
        opt.step()
        return before, unit.bias.item()

    before, after = step()
    assert after == before, "plain SGD: no gradient, no update"
    before, after = step(momentum=0.9)
    assert after != before, "momentum keeps moving it"
    before, after = step(weight_decay=0.1)
    assert abs(after) < abs(before), "weight decay pulls the negative bias toward 0"


def dead_copy(lin: nn.Linear) -> nn.Linear:
    unit = nn.Linear(2, 1)
    unit.load_state_dict(lin.state_dict())
    return unit


def delta_and_inputs(cfg: NetConfig) -> tuple[list[float], list[float], list[float]]:
    """Rebuilt here with retain_grad: per layer ‖∂loss/∂(linear output)‖, ‖its input‖ and ‖∂loss/∂W‖, and a check that
    ∂loss/∂W is δᵀ·h."""
    net = build(cfg, 0)
    h, y = batch(cfg, 0)
    outs, ins = [], []
    for block in net.blocks:
        ins.append(h)
        z = block.linear(h)
        z.retain_grad()
        outs.append(z)
        rest = block.act(block.norm(z))
        h = h + rest if cfg.residual else rest
    nn.functional.cross_entropy(net.head(h), y).backward()
    for z, h_in, block in zip(outs, ins, net.blocks, strict=True):
        assert torch.allclose(block.linear.weight.grad, z.grad.T @ h_in, rtol=1e-4, atol=1e-12)
    return ([z.grad.norm().item() for z in outs], [h_in.norm().item() for h_in in ins],
            [block.linear.weight.grad.norm().item() for block in net.blocks])


NAMES = ("your setting", "+ residual", "+ LayerNorm", "full fix")


@pytest.mark.parametrize(("cfg", "variant"), [(DEFAULT, 1), (DEFAULT, 0), (NetConfig(30, 32, "tanh", "normal", "none",
                                                                                      False), 1)])
def test_per_layer_factor_is_the_backpropagated_gradients_not_the_weight_gradients(cfg, variant):
    """+ residual at the defaults: the weight-gradient ratio is 0.15, yet the gradient itself is 8.2x larger at layer 1
    than at layer 30; the sentence says both, and why they differ, from the numbers."""
    r = flow.gradient_flow(*dataclasses.astuple(cfg), steps=1)
    line = [x for x in flow.fix_sentences(r, NAMES) if x.startswith("**")][variant]
    deltas, inputs, weights = delta_and_inputs(flow.fix_variants(cfg)[variant])
    found = re.search(r"layer 1 / last = ([\d.e+-]+) .*is ([\d.e+-]+)× at layer 1 what it is at layer 30: ×([\d.]+) "
                      r"per layer", line)
    weight_ratio, backprop, gain = (float(v) for v in found.groups())
    assert weight_ratio == pytest.approx(weights[0] / weights[-1], rel=0.05)
    assert backprop == pytest.approx(deltas[0] / deltas[-1], rel=0.05)
    assert gain == pytest.approx((deltas[0] / deltas[-1]) ** (1 / 29), rel=0.01)
    differ = abs(math.log2(weights[0] / weights[-1] / (deltas[0] / deltas[-1]))) > 1
    assert ("The weight ratio differs" in line) == differ
    if differ:
        assert f"norm goes from {inputs[0]:.3g} at layer 1 to {inputs[-1]:.3g} at layer 30" in line
    if (cfg, variant) == (DEFAULT, 1):
        assert "= 0.15 (loss far above chance)" in line and "is 8.2× at layer 1" in line and gain > 1
        assert "0.937" not in line


def test_the_model_answer_does_not_promise_a_gain_of_one():
    answer = dict(model_answers("gradient-flow"))["How do normalization layers and residual connections help "
                                                   "gradient flow?"]
    assert "gain stays near 1" not in answer and "does not make each layer's gain 1" in answer
    layernorm = flow.one_pass(flow.fix_variants(DEFAULT)[2])[0]
    assert layernorm.layer_gain < 0.5, "LayerNorm + sigmoid still shrinks the gradient every layer, as it says"
