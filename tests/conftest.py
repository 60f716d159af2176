"""Shared test helpers: AppTest for any registered page (its views are in demos/registry.py), and fixtures."""

import re
import sys
import time
from collections import Counter
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


def step_reveal(at: AppTest, first: str) -> tuple[str, list[str]]:
    """A whiteboard step-by-step block (ui.steps) whose first step starts with `first`: its caption ('Step k of n')
    and the steps it shows so far, in order."""
    nodes = list(at.main)
    start = next(i for i, n in enumerate(nodes)
                 if getattr(n, "type", "") == "markdown" and n.value.startswith(f"1. {first}"))
    caption = next(n.value for n in nodes[start:] if getattr(n, "type", "") == "caption")
    return caption, [step.strip() for step in re.split(r"^\d+\. ", nodes[start].value, flags=re.M)[1:]]


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


# How the suite shares two xdist workers (pyproject's addopts: `-n 2 --dist loadscope --no-loadscope-reorder`). A test
# module runs whole on one worker, so its module fixtures (AppTest pages, the snippet fork server) are built once;
# xdist hands the modules out in the order the workers collected them, and this hook sets that order: the browser
# modules first, the longest first, so both workers start on them and share them out as they finish (each starting
# one server and Chromium for its share: the package fixtures of tests/browser/conftest.py), then the other modules,
# the largest first, filling in around them. (`--dist loadgroup` with `xdist_group` marks would name the groups,
# but with pytest 9.2 xdist 3.8 drops the marks: pytest-dev/pytest-xdist#1386.)
# How long each browser module takes on one worker, relative to the others (only their order counts): the walk of
# every view (test_shared_views.py, which also checks each view's whiteboard layout) is by far the longest.
BROWSER_SECONDS = {
    "test_shared_views.py": 4500, "test_whiteboard.py": 600, "test_browser.py": 413, "test_replicas.py": 182,
    "test_concurrency.py": 164, "test_practice.py": 109, "test_hostile_input.py": 98, "test_harness.py": 80,
}


def pytest_collection_modifyitems(config, items):
    if hasattr(config, "workerinput"):  # an xdist worker: its collection order is the order modules are handed out
        items[:] = handed_out_first(items)


def handed_out_first(items: list) -> list:
    """The items in the order xdist should hand their modules out: browser modules, longest first, then the other
    modules, the most tests first; a module's items stay together and keep their order."""
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)

    def order(module: str) -> tuple:
        name = module.removeprefix("tests/browser/")
        return (name == module, -BROWSER_SECONDS.get(name, 100), -len(modules[module]))

    return [item for module in sorted(modules, key=order) for item in modules[module]]


class WorkerLoad:
    """A line per xdist worker at the end of a run: how many tests it ran, its seconds inside them, and when its last
    report came (from the start of the run); the browser halves' balance shows here."""

    def __init__(self):
        self.start = time.monotonic()
        self.tests, self.busy, self.last = Counter(), Counter(), {}

    def pytest_runtest_logreport(self, report):
        node = getattr(report, "node", None)
        if node is None:
            return
        worker = node.gateway.id
        self.busy[worker] += report.duration
        self.last[worker] = time.monotonic() - self.start
        self.tests[worker] += report.when == "call"

    def pytest_terminal_summary(self, terminalreporter):
        for worker in sorted(self.busy):
            terminalreporter.write_line(
                f"{worker}: {self.tests[worker]} tests, {self.busy[worker] / 60:.1f} min in tests, done at "
                f"{self.last[worker] / 60:.1f} min")


def pytest_configure(config):
    if config.getoption("dist", "no") != "no" and not hasattr(config, "workerinput"):
        config.pluginmanager.register(WorkerLoad(), "worker-load")


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
