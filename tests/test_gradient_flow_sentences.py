"""The gradient-flow page's explanations against the numbers they explain: the residual stream that makes the full
fix's loss far above chance, the verdict's margin over seeds and depths, the ReLU stream whose variance compounds,
the dead units before training, and the model answer about normalization."""

import math
import re

import pytest
import torch

from demos.gradient_flow import flow
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


def test_dead_units_before_training_are_explained_by_the_shrinking_signal(at):
    said = next(m.value for m in at.markdown if m.value.startswith("Dead before training (PyTorch default init)"))
    run = dead_run(0.3, "default")  # the page's defaults
    model, linears = relu_net("default", 0)
    x = torch.randn(EVAL, 16, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        wh1 = x @ linears[0].weight.T
    assert f"shrank from {wh1.std(0).mean().item():.3g} in layer 1" in said
    shrink = float(re.search(r"÷([\d.]+) per layer", said).group(1))
    assert 2.0 < shrink < 3.0 and "√6 ≈ 2.4" in said
    cross = int(re.search(r"From layer (\d) on the bias", said).group(1))
    assert run.spread_before[cross - 1] < run.bias_before[cross - 1]
    assert run.spread_before[cross - 2] >= run.bias_before[cross - 2]
    assert said.endswith(f"Dead per layer before training: {', '.join(f'{d:.0%}' for d in run.dead_before)}.")
    assert "plain SGD cannot bring it back" not in " ".join(m.value for m in at.markdown)


def test_the_model_answer_does_not_promise_a_gain_of_one():
    answer = dict(model_answers("gradient-flow"))["How do normalization layers and residual connections help "
                                                   "gradient flow?"]
    assert "gain stays near 1" not in answer and "does not make each layer's gain 1" in answer
    layernorm = flow.one_pass(flow.fix_variants(DEFAULT)[2])[0]
    assert layernorm.layer_gain < 0.5, "LayerNorm + sigmoid still shrinks the gradient every layer, as it says"
