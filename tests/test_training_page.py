"""The training-loop page in AppTest: every tab, the step walk, the main widgets, bad input as a sentence."""

import re

import pytest

from demos.registry import by_slug
from demos.shown import source
from demos.training import optimizers, resume, step
from tests.conftest import assert_clean, open_page, step_reveal

PAGE = "pages/training-loop.py"


def _texts(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_defaults_show_the_loop_and_the_state():
    at = open_page(PAGE)
    assert_clean(at)
    assert at.get("graphviz_chart") and at.get("plotly_chart")
    assert "Just ran: `optimizer.zero_grad()`" in _texts(at)


def test_walk_buttons_move_through_the_substeps():
    at = open_page(PAGE)
    for _ in range(4):
        at.button(key="tl_walk_next").click().run()
        assert_clean(at)
    assert at.slider(key="tl_walk").value == 5, "sub-step 5: the fifth call of the loop"
    assert "Just ran: `clip_grad_norm_`" in _texts(at)
    at.button(key="tl_walk_iter").click().run()
    assert at.slider(key="tl_walk").value == 5 + len(step.SUBSTEPS)
    at.button(key="tl_walk_back").click().run()
    at.selectbox(key="tl_walk_opt").select("SGD + momentum").run()
    assert_clean(at)
    assert "momentum\\_buffer" in str(at.table[0].value)  # st.table's cells are markdown, punctuation escaped
    at.button(key="tl_walk_reset").click().run()
    assert at.slider(key="tl_walk").value == 1
    assert_clean(at)


def test_a_link_opens_the_walk_at_its_sub_step_and_the_slider_jumps():
    at = open_page(PAGE, query={"tl_walk": "6"})
    assert_clean(at)
    assert "Just ran: `optimizer.step()`" in _texts(at), "sub-step 6 of the loop"
    at.slider(key="tl_walk").set_value(len(step.SUBSTEPS) + 4).run()
    assert "Just ran: `loss.backward()`" in _texts(at)
    assert any(m.label == "Iteration" and m.value == "2" for m in at.metric)
    at.button(key="tl_walk_next").click().run()
    assert at.slider(key="tl_walk").value == len(step.SUBSTEPS) + 5


@pytest.mark.parametrize("optimizer", step.WALK_OPTIMIZERS)
def test_walk_through_a_whole_iteration(optimizer):
    at = open_page(PAGE, query={"tl_walk_opt": optimizer})
    for sub in range(1, len(step.SUBSTEPS) + 1):
        at.button(key="tl_walk_next").click().run()
        assert_clean(at)
        assert f"Just ran: `{step.SUBSTEPS[sub % len(step.SUBSTEPS)]}`" in _texts(at)


@pytest.mark.parametrize("tab", by_slug("training-loop").tabs("tl_tab"))
def test_each_tab_runs_clean(tab):
    at = open_page(PAGE, query={"tl_tab": tab})
    assert_clean(at)
    assert at.get("plotly_chart"), tab


def test_mistakes_focus_and_overlay():
    at = open_page(PAGE, query={"tl_tab": "Mistakes", "tl_mis_steps": "60"})
    at.selectbox(key="tl_mis_focus").select("scheduler_first").run()
    assert_clean(at)
    assert any("Detected call of `lr_scheduler.step()`" in i.value for i in at.info)
    at.multiselect(key="tl_mis_shown").set_value(["no_zero_grad"]).run()
    assert_clean(at)


def test_optimizer_widgets_move():
    at = open_page(PAGE, query={"tl_tab": "Optimizers"})
    at.segmented_control(key="tl_opt_surface").set_value("rosenbrock").run()
    at.selectbox(key="tl_opt_extra").select("NAdam").run()
    at.slider(key="tl_opt_steps").set_value(60).run()
    assert_clean(at)
    assert "NAdam" in str(at.dataframe[0].value)


def test_the_code_beside_a_figure_is_the_source_of_what_ran():
    """The side-by-side panels show functions the demos ran (their source), not code written for the page."""
    shown = [c.value for c in open_page(PAGE, query={"tl_tab": "Optimizers"}).code]
    assert source(optimizers.adamw_first_step) in shown and source(optimizers.adam_l2_first_step) in shown
    shown = [c.value for c in open_page(PAGE, query={"tl_tab": "Resume"}).code]
    assert source(resume.checkpoint) in shown and source(resume.resume) in shown


def test_schedulers_warmup_is_offered_only_below_the_total():
    at = open_page(PAGE, query={"tl_tab": "Schedulers"})
    at.slider(key="tl_sch_total").set_value(10).run()
    assert_clean(at)
    assert at.number_input(key="tl_sch_warmup").proto.max == 9
    assert at.number_input(key="tl_sch_warmup").value == 9, "10 no longer fits: the default follows the total"
    at.number_input(key="tl_sch_warmup").set_value(5).run()
    assert_clean(at)


def test_losses_bad_logits_is_a_sentence():
    at = open_page(PAGE, query={"tl_tab": "Losses"})
    at.text_input(key="tl_ce_logits").input("2, x").run()
    assert not at.exception
    assert any(e.value == "Logits, entry 2: `x` is not a number such as 3, -0.5 or 1e-3." for e in at.error)
    at.text_input(key="tl_ce_logits").input("1, 2, 3, 4").run()
    at.number_input(key="tl_ce_target").set_value(9).run()
    assert any("Target class must be between 0 and 3" in e.value for e in at.error)
    at.number_input(key="tl_ce_target").set_value(2).run()
    at.slider(key="tl_bce_logit").set_value(-250.0).run()
    at.slider(key="tl_rob_n").set_value(10).run()
    assert_clean(at)


def test_mixed_precision_inputs_and_measure_button():
    at = open_page(PAGE, query={"tl_tab": "Mixed precision", "tl_amp_m_hidden": "128", "tl_amp_m_batch": "32",
                                "tl_amp_reps": "1"})
    at.text_input(key="tl_gs_spikes").input("5, abc").run()
    assert not at.exception
    assert any("spike steps" in e.value.lower() for e in at.error)
    at.text_input(key="tl_gs_spikes").input("500").run()
    assert any("from 0 to 79" in e.value for e in at.error)
    at.text_input(key="tl_gs_spikes").input("20").run()
    at.text_input(key="tl_amp_values").input("1e50").run()
    assert any("1e+50 is outside float32's range (±3.403e+38)" in e.value for e in at.error)
    at.text_input(key="tl_amp_values").input("1e-8").run()
    assert_clean(at)
    before = len(at.get("plotly_chart"))
    at.button(key="tl_amp_measure_button").click().run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == before + 1
    at.text_input(key="tl_amp_values").input("1e-7").run()
    assert len(at.get("plotly_chart")) == before + 1, "an unrelated widget keeps the measurement on screen"


def test_resume_shows_zero_difference():
    at = open_page(PAGE, query={"tl_tab": "Resume", "tl_res_total": "40"})
    at.slider(key="tl_res_split").set_value(15).run()
    assert_clean(at)
    assert at.metric[0].value == "0"


def test_whiteboard_mode_reveals_steps():
    """The loop's order opens on its first call in whiteboard mode; Next step adds the second (zero_grad), Previous
    step takes it back; outside whiteboard mode every step is shown at once."""
    at = open_page(PAGE, query={"whiteboard": "true"})
    assert_clean(at)
    caption, steps = step_reveal(at, "`model.train()`")
    total = int(caption.rsplit(" ", 1)[1])
    assert caption == f"Step 1 of {total}" and len(steps) == 1
    at.button(key="tl_order_steps_next").click().run()
    assert_clean(at)
    caption, shown = step_reveal(at, "`model.train()`")
    assert caption == f"Step 2 of {total}"
    assert len(shown) == 2 and shown[1].startswith("`optimizer.zero_grad()`")
    at.button(key="tl_order_steps_prev").click().run()
    assert step_reveal(at, "`model.train()`") == (f"Step 1 of {total}", steps)
    every = next(m.value for m in open_page(PAGE).markdown if m.value.startswith("1. `model.train()`"))
    assert len(re.findall(r"^\d+\. ", every, flags=re.M)) == total
