"""Training loop sentences against their numbers: the walk's state table shows small Adam state at its scale,
exp_avg_sq is drawn on a non-negative scale, the scheduler that moved the learning rate is named with the move,
and the GradScaler demo's settings are contrasted with torch's own defaults."""

import re

import pytest
import torch

from demos.training import amp, step
from tests.conftest import assert_clean, open_page

PAGE = "pages/training-loop.py"
SCHEDULER_STEP = 14  # sub-step 14: scheduler.step() of iteration 2 (Adam has state by then)


@pytest.fixture(scope="module")
def walk_at_scheduler():
    at = open_page(PAGE, query={"tl_walk": str(SCHEDULER_STEP), "tl_walk_opt": "Adam"})
    assert_clean(at)
    return at


def test_the_state_table_shows_exp_avg_sq_at_its_own_scale(walk_at_scheduler):
    r = step.walk(SCHEDULER_STEP - 1, "Adam", 0.05, 0.05, 0)
    table = next(d.value for d in walk_at_scheduler.dataframe if "exp_avg_sq (first 3)" in d.value.columns)
    for name, shown in zip(table["parameter"], table["exp_avg_sq (first 3)"], strict=True):
        values = [float(v) for v in re.findall(r"[-+][\d.]+(?:e[-+]\d+)?", shown)]
        truth = torch.tensor(r.after.state[name]["exp_avg_sq"]).flatten()[:3].tolist()
        assert values == pytest.approx(truth, rel=6e-4), name
        assert "+0.0000" not in shown
    assert min(min(v) for v in table["exp_avg_sq (first 3)"].map(
        lambda s: [float(x) for x in re.findall(r"[-+][\d.]+(?:e[-+]\d+)?", s)])) < 1e-4, "small values shown"


def test_exp_avg_sq_is_drawn_from_zero_not_on_a_diverging_scale():
    r = step.walk(SCHEDULER_STEP - 1, "Adam", 0.05, 0.05, 0)
    fig = step.state_figure(r)
    panels = {t.text.split(" — ")[0]: i for i, t in enumerate(fig.layout.annotations)}
    sq = fig.data[panels["exp_avg_sq"]]
    assert sq.zmin == 0 and len(sq.colorscale) == 2
    grad = fig.data[panels[".grad"]]
    assert grad.zmin == -grad.zmax, "a signed quantity keeps the diverging scale"


def test_the_learning_rate_move_names_its_scheduler(walk_at_scheduler):
    said = next(m.value for m in walk_at_scheduler.markdown if m.value.startswith("**Just ran: `scheduler.step()`**"))
    before, after = (float(v) for v in re.search(r"learning rate ([\d.]+) → ([\d.]+)", said).groups())
    assert "ExponentialLR(gamma=0.9) moved the learning rate" in said
    assert after == pytest.approx(before * step.GAMMA, rel=1e-4)
    lr = next(m for m in walk_at_scheduler.metric if m.label == "Learning rate")
    assert float(lr.value) == pytest.approx(after, rel=1e-4)


def test_the_scaler_caption_contrasts_the_demo_with_torchs_defaults():
    at = open_page(PAGE, query={"tl_tab": "Mixed precision"})
    assert_clean(at)
    said = next(c.value for c in at.caption if c.value.startswith("Defaults: `GradScaler()`"))
    scaler = torch.amp.GradScaler("cpu")
    assert f"init_scale {scaler.get_scale():,.0f} (2^16)" in said
    assert f"growth_interval {scaler.get_growth_interval():,} clean steps" in said
    assert "This demo starts at 2^24 and grows every 10 steps so that 80 steps" in said
    assert said == amp.scaler_contrast(24, 10, 80)
    order = next(m.value for m in open_page(PAGE).markdown if "`model.train()`" in m.value)
    assert order.index("scaler.unscale_(optimizer)") < order.index("`scaler.step(optimizer)`")
