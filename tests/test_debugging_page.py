"""The debugging page: each tab at defaults, moved widgets, and bad input answered with a sentence."""

import pytest

from demos.debugging import model_tests, nan_trace
from tests.conftest import assert_clean, open_page

pytestmark = pytest.mark.usefixtures("one_thread")

PAGE = "pages/debugging.py"


def test_nan_tab_at_defaults_draws_the_graph_and_names_the_op():
    at = open_page(PAGE)
    assert_clean(at)
    assert len(at.get("graphviz_chart")) == 1
    assert any("LogBackward0" in c.value for c in at.code)
    for source in nan_trace.SOURCES[1:]:
        at.selectbox(key="dbg_nan_src").set_value(source).run()
        assert_clean(at)
        assert any(nan_trace.EXPECTED_NODE[source] in c.value for c in at.code)


def test_fp16_overflow_says_anomaly_mode_names_the_div_and_the_tracer_names_the_exp():
    at = open_page(PAGE)
    at.selectbox(key="dbg_nan_src").set_value("fp16_overflow").run()
    assert_clean(at)
    r = nan_trace.trace_nan("fp16_overflow")
    assert any(f"Function '{r.node}' returned nan values" in c.value for c in at.code), "the real exception text"
    assert any(m.value.startswith(f"Op-level tracer: first non-finite output from **`{r.origin.op}`**")
               and f"{r.origin.nonfinite} of {r.origin.numel} values" in m.value for m in at.markdown)
    why = [i.value for i in at.info if "detect_anomaly" in i.value]
    assert why == [nan_trace.anomaly_vs_origin(r)]
    assert "`DivBackward0`: the first backward node that returned NaN, not where" in why[0]
    assert "`aten.exp.default`" in why[0]


def test_reproducibility_tab_and_a_bad_seed():
    at = open_page(PAGE, query={"dbg_tab": "Reproducibility"})
    assert_clean(at)
    assert [m.value for m in at.metric[:2]] == ["False", "True"]
    at.text_input(key="dbg_seed").input("seven").run()
    assert not at.exception
    shown = [e.value for e in at.error]
    assert shown == ["Seed: `seven` is not a whole number; type one from 0 to 2147483647."], shown
    at.text_input(key="dbg_seed").input("99999999999").run()
    assert any("Seed: `99999999999` is out of range" in e.value for e in at.error)


def test_leaks_tab_moves_its_slider():
    at = open_page(PAGE, query={"dbg_tab": "Memory leaks"})
    assert_clean(at)
    at.slider(key="dbg_leak_steps").set_value(5).run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 1


def test_unit_tests_tab_each_bug():
    at = open_page(PAGE, query={"dbg_tab": "Unit tests for models"})
    assert_clean(at)
    for bug in model_tests.BUGS[2:4]:
        at.selectbox(key="dbg_bug").set_value(bug).run()
        assert_clean(at)


def test_profiler_tab_has_the_phases_and_a_download():
    at = open_page(PAGE, query={"dbg_tab": "Profiler"})
    assert_clean(at)
    assert [m.label for m in at.metric] == [f"{p} (record_function)" for p in ("forward", "backward", "optimizer")]
    at.select_slider(key="dbg_prof_width").set_value(64).run()
    assert_clean(at)
