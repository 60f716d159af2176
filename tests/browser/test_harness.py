"""The harness's wait for a run (harness/browser.py) sees a fragment's run end as surely as a whole rerun's, on an
app made for the check: a slider and a chart inside an `st.fragment` (a change there reruns only the fragment),
a slider outside it. Streamlit's frontend sets `data-test-script-state` to 'running' for either kind of run and
marks stale only the elements the run will redraw; wait_run returns once the run's elements are drawn, and so does
act, which waits for an action's outcome."""

import pytest
from playwright.sync_api import expect

from harness.browser import APP, IDLE, act, open_page, rerun, run_mark, run_started, streamlit_server, wait_run

pytestmark = pytest.mark.browser

FRAGMENT_APP = '''
import time

import pandas as pd
import streamlit as st

st.title("harness check")
whole = st.slider("whole page", 1, 40, 1, key="whole")
time.sleep(float(st.query_params.get("sleep", 0)))
st.write(f"page ran with {whole}")


@st.fragment
def view():
    n = st.slider("points", 2, 60, 2, key="points")
    time.sleep(float(st.query_params.get("sleep", 0)))
    st.line_chart(pd.DataFrame({"y": [i * i for i in range(n)]}))
    st.write(f"fragment drew {n} points")


view()
'''
SLOW_S = 1.0


@pytest.fixture(scope="module")
def fragment_app(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fragment-app")
    (folder / "app.py").write_text(FRAGMENT_APP)
    with streamlit_server("app.py", cwd=folder) as (url, _):
        yield url


def slider(page, name: str):
    return page.get_by_role("slider", name=name)


def text(page, start: str) -> str:
    """The shown text that starts with `start`, read now (no waiting)."""
    return page.locator("[data-testid=stMarkdownContainer]").filter(has_text=start).inner_text().strip()


def stale(page, start: str) -> str | None:
    """The stale mark of the element that shows the text starting with `start`."""
    return page.locator("[data-testid=stElementContainer]").filter(has_text=start).last.get_attribute("data-stale")


def test_a_slow_fragment_run_is_waited_for_to_its_end_and_only_its_elements_go_stale(browser, fragment_app):
    context, page = open_page(browser, f"{fragment_app}/?sleep={SLOW_S}")
    try:
        mark = run_mark(page)
        slider(page, "points").press("ArrowRight")
        assert run_started(page, mark), "the fragment's run shows as a script run"
        expect(page.locator(APP)).to_have_attribute("data-test-script-state", "running")
        assert stale(page, "fragment drew") == "true", "the fragment's elements wait for their redraw"
        assert stale(page, "page ran with") == "false", "the rest of the page is not rerun"
        started, finished = wait_run(page, mark)
        assert text(page, "fragment drew") == "fragment drew 3 points", "the run's elements are drawn when it ends"
        assert finished - started >= SLOW_S * 1000 * 0.9, (started, finished)
        assert stale(page, "fragment drew") == "false"
        assert text(page, "page ran with") == "page ran with 1"

        mark = run_mark(page)
        slider(page, "whole page").press("ArrowRight")
        assert run_started(page, mark)
        assert stale(page, "page ran with") == "true"
        started, finished = wait_run(page, mark)
        assert text(page, "page ran with") == "page ran with 2"
        assert finished - started >= 2 * SLOW_S * 1000 * 0.9, "the whole script: its own sleep and the fragment's"
    finally:
        context.close()


@pytest.mark.parametrize("where", ["points", "whole page"])
def test_an_action_waited_for_by_its_outcome_is_over_when_act_returns(browser, fragment_app, where):
    """Twenty fast runs in a row (a few milliseconds of script each), waited for by what each must show: when act
    returns, the run has drawn everything and ended (the text and the state are read without waiting), whether
    the run's 'running' state was drawn or not."""
    context, page = open_page(browser, fragment_app)
    try:
        first, prefix, shown = (2, "fragment drew", "fragment drew {} points") if where == "points" else (
            1, "page ran with", "page ran with {}")
        for step in range(1, 21):
            act(page, lambda: slider(page, where).press("ArrowRight"),
                lambda s=step: expect(page.get_by_text(shown.format(first + s), exact=True)).to_be_visible())
            assert page.locator(APP).get_attribute("data-test-script-state") == IDLE
            assert text(page, prefix) == shown.format(first + step)
            assert stale(page, prefix) == "false"
        started, finished = rerun(page)  # the r key: a whole rerun with the same inputs, always seen
        assert started <= finished
        assert text(page, prefix) == shown.format(first + 20)
    finally:
        context.close()
