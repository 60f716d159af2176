"""Training loop sentences against their numbers: the walk's state table shows small Adam state at its scale,
exp_avg_sq is drawn on a non-negative scale, the scheduler that moved the learning rate is named with the move,
the GradScaler caption says what this run's scale did, the bfloat16 caption names the edges where it differs from
float32, model.train() is explained from the walk's own net, and the model answers about autocast and resuming."""

import math
import re

import pytest
import torch

from demos.training import amp, resume, step
from pages.ui.quiz import model_answers
from tests.conftest import assert_clean, open_page

PAGE = "pages/training-loop.py"
PAGE_SLUG = "training-loop"
SCHEDULER_STEP = 14  # sub-step 14: scheduler.step() of iteration 2 (Adam has state by then)


@pytest.fixture(scope="module")
def walk_at_scheduler():
    at = open_page(PAGE, query={"tl_walk": str(SCHEDULER_STEP), "tl_walk_opt": "Adam"})
    assert_clean(at)
    return at


def unescaped(markdown: str) -> str:
    """A cell of st.table as it reads: its markdown escapes (ui.tables.literal) removed."""
    return re.sub(r"\\(.)", r"\1", markdown)


def test_the_state_table_shows_exp_avg_sq_at_its_own_scale(walk_at_scheduler):
    r = step.walk(SCHEDULER_STEP - 1, "Adam", 0.05, 0.05, 0)
    table = next(t for t in (d.value.map(unescaped).rename(columns=unescaped) for d in walk_at_scheduler.table)
                 if "exp_avg_sq (first 3)" in t.columns)
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


@pytest.fixture(scope="module")
def amp_tab():
    at = open_page(PAGE, query={"tl_tab": "Mixed precision"})
    assert_clean(at)
    return at


def scale_moves(r) -> tuple[int, int]:
    """(halvings, doublings) read from the scale before and after each step."""
    pairs = list(zip(r.scale_before, r.scale_after, strict=True))
    return sum(a < b for b, a in pairs), sum(a > b for b, a in pairs)


def test_the_scaler_caption_contrasts_the_demo_with_torchs_defaults(amp_tab):
    said = next(c.value for c in amp_tab.caption if c.value.startswith("Defaults: `GradScaler()`"))
    scaler = torch.amp.GradScaler("cpu")
    assert f"init_scale {scaler.get_scale():,.0f} (2^16)" in said
    assert f"growth_interval {scaler.get_growth_interval():,} clean steps" in said
    r = amp.scaler_run(80, 24, 10, "40")
    assert said == amp.scaler_contrast(r)
    halved, doubled = scale_moves(r)
    assert f"This demo starts at 2^24 and doubles after every 10 clean steps in a row: in these 80 steps the scale " \
           f"was halved {halved} times (each on an overflow, its step skipped) and doubled {doubled} times." in said
    assert halved == sum(r.skipped) and doubled > 0
    order = next(m.value for m in open_page(PAGE).markdown if "`model.train()`" in m.value)
    assert order.index("scaler.unscale_(optimizer)") < order.index("`scaler.step(optimizer)`")


@pytest.mark.parametrize(("steps", "scale_exp", "growth", "spikes"), [(80, 24, 100, "40"), (80, 10, 10, ""),
                                                                      (30, 24, 10, "")])
def test_the_scaler_caption_says_what_this_run_did_not_what_it_was_meant_to(steps, scale_exp, growth, spikes):
    """The caption once promised 'the halving on overflow and the growth back' at settings where neither happens."""
    r = amp.scaler_run(steps, scale_exp, growth, spikes)
    said = amp.scaler_contrast(r)
    halved, doubled = scale_moves(r)
    assert "growth back" not in said and halved == sum(r.skipped)
    assert ("never halved" in said) == (halved == 0) and (f"halved {halved} time" in said) == (halved > 0)
    assert ("never doubled" in said) == (doubled == 0) and (f"doubled {doubled} time" in said) == (doubled > 0)
    longest_clean = max(len(run) for run in "".join("x" if s else "." for s in r.skipped).split("x"))
    assert (doubled == 0) == (longest_clean < growth)


def bf16(value: float) -> float:
    return torch.tensor(value, dtype=torch.float64).to(torch.bfloat16).double().item()


def test_the_bfloat16_caption_names_the_edges_where_it_differs_from_float32(amp_tab):
    """It said bfloat16 'neither underflows nor overflows where float32 would not': 1e-42 and 3.4e38 say otherwise."""
    said = next(c.value for c in amp_tab.caption if c.value.startswith("float16 has 5 exponent bits"))
    assert "neither underflows nor overflows" not in said and " Here:" not in said  # the default values are inside
    to_inf = float(re.search(r"float32 values from ([\d.e+]+) up", said).group(1))
    to_zero = float(re.search(r"subnormals of at most ([\d.e-]+) become 0", said).group(1))
    assert math.isinf(bf16(to_inf)) and not math.isinf(bf16(to_inf * 0.999)), "the shown edge, to 4 digits"
    assert bf16(to_zero) == 0 and bf16(to_zero * 1.001) > 0
    assert torch.tensor(3.4e38).isfinite() and math.isinf(bf16(3.4e38)), "float32 keeps 3.4e38, bfloat16 does not"
    assert torch.tensor(1e-42).item() > 0 and bf16(1e-42) == 0, "float32 keeps 1e-42, bfloat16 flushes it"
    top = float(re.search(r"up to ([\d.e+]+) keeps its magnitude", said).group(1))
    assert top == pytest.approx(torch.finfo(torch.bfloat16).max, rel=1e-3)
    f16_zero = float(re.search(r"gradients of at most ([\d.e-]+) underflow to 0", said).group(1))
    half = lambda v: torch.tensor(v, dtype=torch.float64).half().item()  # noqa: E731
    assert half(f16_zero) == 0 and half(f16_zero * 1.001) > 0


def test_the_bfloat16_caption_names_the_typed_values_bfloat16_loses():
    at = open_page(PAGE, query={"tl_tab": "Mixed precision", "tl_amp_values": "1e-42, 3.4e38, 1e-8"})
    assert_clean(at)
    said = next(c.value for c in at.caption if c.value.startswith("float16 has 5 exponent bits"))
    assert said.endswith("Here: 1e-42 becomes 0, 3.4e+38 becomes inf in bfloat16, and not in float32.")
    assert "1e-08 becomes" not in said and bf16(1e-8) > 0


def test_model_train_is_not_a_sub_step_because_the_walks_net_has_nothing_it_switches():
    """It said 'once per epoch here' of a walk that has no epoch."""
    said = next(m.value for m in open_page(PAGE).markdown if "`model.train()`" in m.value)
    assert "epoch" not in said and step.train_mode_note() in said
    x, _, model, *_ = step.setup("SGD + momentum", 0.05, 0)
    assert "no batch norm and dropout with p = 0" in said
    assert not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules())
    with torch.no_grad():
        trained = model.train()(x)
        evaluated = model.eval()(x)
    assert torch.equal(trained, evaluated), "the call would change nothing here, as it says"
    assert not any("eval" in s for s in step.SUBSTEPS)


def test_the_model_answers_say_which_device_keeps_what_in_float32_and_that_resume_deviates():
    answers = dict(model_answers(PAGE_SLUG))
    amp_answer = answers["Why does float16 training need a GradScaler but bfloat16 does not?"]
    assert "reductions, softmax and losses stay in float32" not in amp_answer
    assert "nothing underflows that float32 would keep" not in amp_answer
    ops = amp.recorded_step(32, 8, "cpu", torch.bfloat16)[0]
    forward = {op: out for phase, op, _, out in ops if phase == "forward"}
    assert forward["native_layer_norm"] == "bfloat16" and forward["_log_softmax"] == "float32"
    assert "layer_norm in\nbfloat16" in amp_answer or "layer_norm in bfloat16" in amp_answer.replace("\n", " ")
    assert bf16(1e-42) == 0 and math.isinf(bf16(3.4e38))
    resume_answer = answers["What must a checkpoint contain to resume exactly?"]
    assert "diverges" not in resume_answer and "departs from the uninterrupted one" in resume_answer
    r = resume.resume_demo(60, 30, 0)
    trap = r.resumed["no_optimizer"]
    assert trap.max_diff > 0 and all(math.isfinite(v) for v in trap.losses)
    assert max(trap.losses[30:]) < 2 * max(r.straight.losses[30:]), "it deviates; it does not blow up"
