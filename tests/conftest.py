"""Shared test helpers: AppTest for any registered page (its views are in demos/registry.py), and fixtures."""

import re
import sys
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from demos.registry import registered
from pages.ui.errors import BUG_NOTE
from tests.snippet_runner import snippet_server  # noqa: F401 (a fixture: the fork server that runs snippets)

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def open_page(page_file: str, timeout: float = 120, query: dict | None = None) -> AppTest:
    """Run app.py (navigation, sidebar and all) switched to one page file, as a visitor would see it."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    if page_file != "pages/home.py":
        at.switch_page(page_file).run()
    return at


def shown_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A st.table's frame as the browser shows it: pages.ui.tables.literal's markdown escapes (a backslash before
    punctuation, a word joiner in links) removed from every text cell and label, so `131\\,072` reads 131,072."""
    def text(v):
        return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", v).replace("\u2060", "") if isinstance(v, str) else v

    return frame.map(text).rename(columns=text, index=text)


def shown_table(table):
    """An AppTest st.table's frame as the browser shows it (shown_frame)."""
    return shown_frame(table.value)


def every_section() -> list[tuple[str, dict]]:
    """(page file, query) for each section of every registered page (demos/registry.py declares them)."""
    return [(topic.file, query) for topic in registered() for query in topic.sections()]


def view_id(value) -> str:
    """A test id for a page file or a view's query."""
    return value if isinstance(value, str) else "-".join(value.values()) or "defaults"


def switch_tab(at: AppTest, key: str, tab: str) -> AppTest:
    """Open another tab of a URL-bound tab set, as a click would (AppTest has no tab click).

    AppTest passes its query_params as the URL on every run, and a URL value wins over session state, so the
    tab's parameter leaves the URL first.
    """
    at.query_params.pop(key, None)
    at.session_state[key] = tab
    return at.run()


# The browser tests in two halves of about equal time (about 10 minutes each, timed on one worker), one per worker:
# each half starts one server, and neither waits for the other.
BROWSER_HALVES = {
    "test_shared_views.py": 1, "test_practice.py": 1, "test_hostile_input.py": 1,
    "test_whiteboard.py": 2, "test_browser.py": 2, "test_concurrency.py": 2, "test_replicas.py": 2,
}


# A browser test that fails is run once more (pytest-rerunfailures), and the run's summary counts it as "rerun":
# on two cores shared by two servers, two Chromiums and the rest of the suite, the frontend now and then loses an
# action (harness/browser.py waits out every case it can tell apart and says what it saw when it cannot). A test
# that fails twice fails the run.
BROWSER_RERUNS = 1


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid.startswith("tests/browser/"):
            item.add_marker(pytest.mark.flaky(reruns=BROWSER_RERUNS))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under `--dist loadscope` (pyproject's addopts) a test module runs whole on one xdist worker, so its module
    fixtures are built once. The browser tests form two units (BROWSER_HALVES), handed out before any other, so
    each worker starts one browser half first (one server each) and the rest of the suite fills in around them."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class BrowserHalvesFirst(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if not nodeid.startswith("tests/browser/"):
                return super()._split_scope(nodeid)
            module = nodeid.split("::")[0].removeprefix("tests/browser/")
            return f"tests/browser (half {BROWSER_HALVES.get(module, 2)})"

        def _assign_work_unit(self, node) -> None:
            for scope in sorted((s for s in self.workqueue if s.startswith("tests/browser ")), reverse=True):
                self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return BrowserHalvesFirst(config, log)


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for a test module (`pytestmark = pytest.mark.usefixtures("one_thread")`): tiny ops on a
    shared 2-core host run far faster without OpenMP threads spin-waiting for each other."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def no_bug_boxes(monkeypatch):
    """Every AppTest run in the suite fails if a page showed the 'this is a bug' sentence (pages/ui/errors.py).

    The check sits on AppTest._run, the one method every run goes through: `at.run()` and also a widget's
    `.click().run()` / `.set_value(v).run()`, which call the element tree's run and never `AppTest.run`.
    """
    run = AppTest._run

    def checked_run(self, *args, **kwargs):
        at = run(self, *args, **kwargs)
        bugs = [e.value for e in at.error if BUG_NOTE in e.value]
        assert not bugs, bugs
        return at

    monkeypatch.setattr(AppTest, "_run", checked_run)


def assert_clean(at: AppTest) -> None:
    """No exception element and no st.error on the page."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


@pytest.fixture
def page():
    return open_page


@pytest.fixture
def no_warm_helpers():
    """Start with no warm fork server or resource tracker left by earlier tests, and no idle timer pending."""
    from demos import guests

    assert guests.stop_idle_helpers(), "no run holds the process slot"
    if guests._idle_timer is not None:
        guests._idle_timer.cancel()
