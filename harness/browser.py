"""Start the real Streamlit server and a headless Chromium; shared by the browser tests and the benchmark.

Waiting: a test does an action once and waits for what it must show (`act`, with Playwright's auto-retrying
`expect`), then for the app to be idle; never for a fixed time. A run's start and end are read from the page's own
record of the app's script state (STATE_RECORDER), which a fragment's run changes as a whole rerun does
(tests/browser/test_harness.py); the benchmark times reruns from it (`rerun`, `wait_run`)."""

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from demos.processes import free_port

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
CHART_SELECTOR = (
    "[data-testid=stPlotlyChart] .js-plotly-plot, [data-testid=stGraphVizChart] svg, "
    "[data-testid=stVegaLiteChart] > svg.marks"
)


def system_chromium() -> str | None:
    """The Debian chromium binary if installed, else None (Playwright's own build is used)."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


class NoChromium(RuntimeError):
    """Neither a system Chromium nor Playwright's own build could be had on this machine."""


def launch_chromium(playwright):
    """System Chromium when present; otherwise Playwright's bundled build, installing it once if missing (NoChromium
    when that cannot be downloaded or started)."""
    path = system_chromium()
    if path:
        return playwright.chromium.launch(executable_path=path, args=CHROMIUM_FLAGS)
    try:
        return playwright.chromium.launch(args=CHROMIUM_FLAGS)
    except Exception:
        pass
    try:
        subprocess.run([sys.executable, "-m", "playwright", "install", "chromium"], check=True)
        return playwright.chromium.launch(args=CHROMIUM_FLAGS)
    except Exception as error:
        raise NoChromium(f"no chromium on PATH, and Playwright's own build failed: {error}") from error


def _wait_healthy(url: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"streamlit did not answer at {url} within {timeout} s")


@contextmanager
def streamlit_server(app: str = "app.py", timeout: float = 90, cwd: Path = ROOT):
    """Run `streamlit run app` on a free 127.0.0.1 port; yields (base_url, process); always stops it."""
    port = free_port()
    cmd = [
        sys.executable, "-m", "streamlit", "run", app, "--server.port", str(port), "--server.address", "127.0.0.1",
        "--server.headless", "true", "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false",
    ]
    log = open(ROOT / "tests" / "artifacts" / f"server-{port}.log", "w") if _artifacts() else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, timeout)
        yield url, proc
    finally:
        _stop(proc)
        if log is not subprocess.DEVNULL:
            log.close()


def _artifacts() -> Path:
    path = ROOT / "tests" / "artifacts"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group, then SIGKILL if it lingers."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


# Installed in every page of a context before Streamlit loads: stamps each change of the app's script state
# (`data-test-script-state` on stApp, which Streamlit's frontend sets for a whole rerun and for a fragment's run
# alike) with the page's clock, so a run's start and end can be timed and no change slips between two polls. A
# change's old value is recorded too: a run that starts and ends within one batch of changes leaves its 'running'
# only there.
#
# What it cannot see: a run whose messages all reach the frontend before it draws, which React then draws in one
# go, leaving the state 'notRunning' throughout. That happens to fast runs on a busy host (a Practice question's
# "Run it": the server's twelve messages within 10 ms, no state change). So a test waits for the outcome of its
# action (`act`); wait_run is for what always shows: a page's first run, the r key's rerun (the frontend shows
# 'rerunRequested' the moment the key is pressed) and runs that take seconds.
STATE_RECORDER = """
window.__wbStates = [];
new MutationObserver(records => {
  const now = performance.now();
  for (const r of records) window.__wbStates.push([r.oldValue, now]);
  const app = records[records.length - 1].target;
  window.__wbStates.push([app.getAttribute('data-test-script-state'), now]);
}).observe(document, {attributes: true, subtree: true, attributeOldValue: true,
                      attributeFilter: ['data-test-script-state']});
"""
APP = "[data-testid=stApp]"
IDLE = "notRunning"


def new_context(browser, **options):
    """A browser context whose pages record script-state changes (see wait_run)."""
    context = browser.new_context(**options)
    context.add_init_script(STATE_RECORDER)
    return context


def run_mark(page) -> list:
    """Where the page's record of script states stands now; take it while the app is idle, then act, then pass it to
    run_started or wait_run.

    The record lives in the loaded document, so a reload starts it afresh: a mark names its document
    (performance.timeOrigin), and everything recorded in a later one counts as after it.
    [document, states recorded, page time]
    """
    return page.evaluate("() => [performance.timeOrigin, window.__wbStates.length, performance.now()]")


# Whether mark `m` was taken in this document (none: no mark, everything since the document loaded counts).
SAME_DOCUMENT = "(m => Boolean(m) && m[0] === performance.timeOrigin)"

# The states recorded since mark `m`: [state, page time] each.
SINCE = f"(m => {SAME_DOCUMENT}(m) ? window.__wbStates.slice(m[1]) : window.__wbStates)"

# A state that is not idle: a run requested ('rerunRequested', the r key), under way ('running'), being stopped, or
# the page's first run not yet begun ('initial'). The app was idle at the mark, so any of these since is a run.
IS_START = f"x => x[0] !== '{IDLE}'"

# A run that started after `m` has finished: its start is recorded and the last state recorded is idle.
FINISHED = f"m => {{ const s = {SINCE}(m); return s.some({IS_START}) && s[s.length - 1][0] === '{IDLE}'; }}"


def run_started(page, mark: list, timeout: float = 10) -> bool:
    """Whether a script run (the whole script or a fragment) started after `mark` within `timeout` s."""
    try:
        page.wait_for_function(f"m => {SINCE}(m).some({IS_START})", arg=mark, timeout=timeout * 1000)
        return True
    except PlaywrightTimeout:
        return False


def wait_run(page, mark: list | None = None, timeout: float = 60) -> tuple[float, float]:
    """Wait for a script run (the whole script or a fragment) that started after `mark` (none: since the document
    loaded, the page's first run) to finish; returns (started, finished), the page's clock in ms. For a run that
    shows its state (see STATE_RECORDER)."""
    try:
        page.wait_for_function(FINISHED, arg=mark, timeout=timeout * 1000)
    except PlaywrightTimeout as error:
        seen = page.evaluate(f"m => ({{states: {SINCE}(m), now: performance.now(), address: location.href}})", mark)
        raise AssertionError(f"no finished run within {timeout} s; script states since the mark (this document's "
                             f"clock, ms): {seen}") from error
    return tuple(page.evaluate(
        f"m => {{ const s = {SINCE}(m); return [s.find({IS_START})[1], s[s.length - 1][1]]; }}", mark))


def rerun(page, timeout: float = 60) -> tuple[float, float]:
    """A whole rerun with the same inputs (the r key), waited for to its end; returns its (started, finished)."""
    settle(page, timeout)  # the frontend ignores r while a run is under way
    mark = run_mark(page)
    page.locator("[data-testid=stMain]").press("r")
    return wait_run(page, mark, timeout=timeout)


def act(page, action, outcome, timeout: float = 60) -> None:
    """Do `action()` once (a click, a key, an upload: it reruns the script or a fragment), wait for `outcome()` (an
    `expect` of what that run must show, which no earlier run shows), then for the app to be idle: that run's end.

    Whatever the frontend's script state showed meanwhile: once the outcome shows, the run has begun, and the
    state is idle again only when it has ended (a run drawn in one go never left idle)."""
    settle(page, timeout)
    action()
    outcome()
    settle(page, timeout)


def settle(page, timeout: float = 60) -> None:
    """Wait until the app is idle: no run under way or requested."""
    expect(page.locator(APP)).to_have_attribute("data-test-script-state", IDLE, timeout=timeout * 1000)


def tab_drawn(tab, timeout: float = 60) -> None:
    """Wait until `tab` is selected and its panel holds an element: a tab set that draws only its open tab
    (`tab.open`, as ui.section_tabs does) draws it in the run the tab's click starts."""
    expect(tab).to_have_attribute("aria-selected", "true", timeout=timeout * 1000)
    panel = tab.page.locator(f"[id='{tab.get_attribute('aria-controls')}']")
    expect(panel.get_by_test_id("stElementContainer").first).to_be_attached(timeout=timeout * 1000)


def open_page(browser, url: str, timeout: float = 120, **options):
    """A new visitor (a context made by new_context with `options`) at `url`, its first run finished; returns
    (context, page)."""
    context = new_context(browser, **options)
    page = context.new_page()
    page.goto(url)
    wait_run(page, timeout=timeout)
    return context, page


def wait_charts(page, count: int, timeout: float = 30) -> int:
    """Wait until at least `count` charts (plotly, vega or graphviz) are drawn; returns how many are (fewer when
    `timeout` s passed first: the caller says what it expected)."""
    charts = page.locator(CHART_SELECTOR)
    if count:
        try:
            expect(charts.nth(count - 1)).to_be_attached(timeout=timeout * 1000)
        except AssertionError:
            pass
    return charts.count()


# Each chart element of the page, and the drawing inside it that shows once its figure has rendered.
CHART_PARTS = (("[data-testid=stPlotlyChart]", ".js-plotly-plot"), ("[data-testid=stGraphVizChart]", "svg"),
               ("[data-testid=stVegaLiteChart]", ":scope > svg.marks"))


def wait_every_chart_drawn(page, timeout: float = 60) -> int:
    """Wait until every visible chart element on the page has drawn its figure, however many the view has (none is
    fine; one in a closed tab or expander is not waited for); returns how many charts are drawn."""
    page.wait_for_function(
        """parts => parts.every(([box, drawn]) => [...document.querySelectorAll(box)]
               .filter(el => el.getClientRects().length > 0).every(el => el.querySelector(drawn)))""",
        arg=[list(p) for p in CHART_PARTS], timeout=timeout * 1000)
    return page.locator(CHART_SELECTOR).count()


def next_frames(page, frames: int = 2) -> None:
    """Let the page draw `frames` animation frames: what a run's last render started (a component's mount, a
    scroll) is done by then."""
    page.evaluate("n => new Promise(done => { const tick = k => k ? requestAnimationFrame(() => tick(k - 1)) : "
                  "done(); tick(n); })", frames)


def wait_still(page, timeout: float = 10) -> None:
    """Wait until nothing on the page scrolls any more (the scroll offsets agree over three animation frames)."""
    page.wait_for_function(
        """() => new Promise(done => {
             const scrolled = () => [...document.querySelectorAll('*')].reduce((s, n) => s + n.scrollTop, 0)
                                    + window.scrollY;
             let last = null, same = 0;
             const tick = () => {
               const y = scrolled();
               same = y === last ? same + 1 : 0;
               last = y;
               if (same >= 3) done(true); else requestAnimationFrame(tick);
             };
             tick(); })""", timeout=timeout * 1000)


def artifacts_dir(*parts: str) -> Path:
    path = _artifacts().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


MAX_SHOT_HEIGHT = 12000


def wait_loaded(page, timeout_ms: int = 60_000) -> None:
    """Lazy elements (tables, charts) show skeletons until their code has loaded: wait them out (on a loaded
    host that has taken over 20 s)."""
    expect(page.get_by_test_id("stSkeleton")).to_have_count(0, timeout=timeout_ms)


def full_screenshot(page, name: str) -> None:
    """Grow the viewport to the page's content height (same width) so one PNG in artifacts/screenshots holds the
    whole page; then restore the viewport."""
    viewport = page.viewport_size
    height = page.evaluate(
        "() => Math.max(...['stMain', 'stAppViewContainer'].map("
        "id => document.querySelector(`[data-testid=${id}]`)?.scrollHeight || 0))"
    )
    height = min(max(height, viewport["height"]), MAX_SHOT_HEIGHT)
    page.set_viewport_size({"width": viewport["width"], "height": height})
    wait_loaded(page)
    wait_every_chart_drawn(page)
    next_frames(page, 3)  # the charts' resize to the taller viewport is drawn
    page.screenshot(path=str(artifacts_dir("screenshots") / f"{name}.png"), full_page=True)
    page.set_viewport_size(viewport)
