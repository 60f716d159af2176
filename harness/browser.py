"""Start the real Streamlit server and a headless Chromium; shared by the browser tests and the benchmark."""

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


def launch_chromium(playwright):
    """System Chromium when present; otherwise Playwright's bundled build, installing it once if missing."""
    path = system_chromium()
    if path:
        return playwright.chromium.launch(executable_path=path, args=CHROMIUM_FLAGS)
    try:
        return playwright.chromium.launch(args=CHROMIUM_FLAGS)
    except Exception:
        subprocess.run([sys.executable, "-m", "playwright", "install", "chromium"], check=True)
        return playwright.chromium.launch(args=CHROMIUM_FLAGS)


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


# Installed in every page of a context before Streamlit loads: records each change of the app's script
# state with a page-side timestamp, so no run can slip between two polls; counts the messages the page sends to
# the server (a rerun request is one), so a test can tell a dropped action from a slow server; counts the messages
# it receives (a run that React drew in one batch may leave no state change behind, never its messages); and logs
# the socket's opening and closing, for the message of a test that waited in vain.
STATE_RECORDER = """
window.__wbStates = [];
window.__wbSent = 0;
window.__wbReceived = [0, 0];  // messages received, page time of the last
window.__wbSocket = [];
const send = WebSocket.prototype.send;
WebSocket.prototype.send = function (...args) { window.__wbSent += 1; return send.apply(this, args); };
window.WebSocket = class extends WebSocket {
  constructor(...args) {
    super(...args);
    this.addEventListener('message', () => { window.__wbReceived = [window.__wbReceived[0] + 1, performance.now()]; });
    this.addEventListener('open', () => window.__wbSocket.push(['open', performance.now()]));
    this.addEventListener('close', e => window.__wbSocket.push(['close', e.code, performance.now()]));
  }
};
new MutationObserver(records => {
  // getAttribute reads the value now, after every change in this batch: a fast run's 'running' survives only
  // as the old value of the next change, so the old values are recorded too.
  const now = performance.now();
  for (const r of records) window.__wbStates.push([r.oldValue, now]);
  const app = records[records.length - 1].target;
  window.__wbStates.push([app.getAttribute('data-test-script-state'), now]);
}).observe(document, {attributes: true, subtree: true, attributeOldValue: true,
                      attributeFilter: ['data-test-script-state']});
"""


def new_context(browser, **options):
    """A browser context whose pages record script-state changes (see wait_run)."""
    context = browser.new_context(**options)
    context.add_init_script(STATE_RECORDER)
    return context


def run_mark(page) -> list:
    """Where the page's records stand now; pass it to wait_run after triggering a run.

    The records live in the loaded document, so a reload (a link the frontend let the browser follow) starts them
    afresh: a mark names its document (performance.timeOrigin), and everything recorded in a later one counts as
    after it. [document, states recorded, messages received, page time, messages sent]
    """
    return page.evaluate("() => [performance.timeOrigin, window.__wbStates.length, window.__wbReceived[0], "
                         "performance.now(), window.__wbSent]")


# Whether mark `m` was taken in this document (none: no mark, everything since the document loaded counts).
SAME_DOCUMENT = "(m => Boolean(m) && m[0] === performance.timeOrigin)"

# The states recorded since mark `m`.
SINCE = f"(m => {SAME_DOCUMENT}(m) ? window.__wbStates.slice(m[1]) : window.__wbStates)"

# A run shows as 'rerunRequested' (a rerun the frontend asked for) and/or 'running'; a run that finishes within
# one frame may never show 'running' at all.
IS_START = "x => x[0] === 'running' || x[0] === 'rerunRequested'"

# Messages received from the server since mark `m`.
RECEIVED = f"(m => window.__wbReceived[0] - ({SAME_DOCUMENT}(m) ? m[2] : 0))"

# Messages sent to the server since mark `m`.
SENT = f"(m => window.__wbSent - ({SAME_DOCUMENT}(m) ? m[4] : 0))"

# The app's script state now.
STATE_NOW = "(() => document.querySelector('[data-test-script-state]')?.getAttribute('data-test-script-state'))"

# A run that started after `m` has finished: its start and end are recorded, or (a run React drew in one batch)
# the server has answered since `m`, the app is idle and nothing has arrived for a second.
FINISHED = f"""m => {{
  const s = {SINCE}(m);
  if (s.some({IS_START}) && s[s.length - 1][0] === 'notRunning') return true;
  return {RECEIVED}(m) > 0 && {STATE_NOW}() === 'notRunning' && performance.now() - window.__wbReceived[1] > 1000;
}}"""


def run_started(page, mark: list, timeout: float = 10) -> bool:
    """Whether a script run started after `mark` within `timeout` s (the frontend sometimes drops a request)."""
    try:
        page.wait_for_function(f"m => {SINCE}(m).some({IS_START}) || {RECEIVED}(m) > 0", arg=mark,
                               timeout=timeout * 1000)
        return True
    except PlaywrightTimeout:
        return False


def act_and_wait_run(page, act, start_timeout: float = 10, timeout: float = 60, attempts: int = 3) -> None:
    """Do `act()` (a click, an upload, a key), then wait for the run it starts.

    The frontend now and then drops the rerun request of an action that comes right after a run, more often on a
    loaded host. The action is done again (up to `attempts` times in all) only when, `start_timeout` s later, no
    run has started and the page has sent the server nothing: an action whose request went out is never doubled,
    however slow the server is to start its run.
    """
    for attempt in range(attempts):
        mark = run_mark(page)
        act()
        if run_started(page, mark, timeout=start_timeout) or attempt == attempts - 1:
            break
        if page.evaluate(f"m => {SENT}(m)", mark):
            break  # the request went out: the run is coming, only late
    wait_run(page, mark, timeout=timeout)


def wait_run(page, mark: list | None = None, timeout: float = 60) -> tuple[float, float]:
    """Wait for a script run that started after `mark` (none: since the document loaded) to finish; returns
    (started, finished), page clock in ms (for a run seen only by its messages: the mark and its last message)."""
    try:
        page.wait_for_function(FINISHED, arg=mark, timeout=timeout * 1000)
    except PlaywrightTimeout as error:
        seen = page.evaluate(f"m => ({{states: {SINCE}(m), state_now: {STATE_NOW}(), received: {RECEIVED}(m), "
                             f"sent: {SENT}(m), socket: window.__wbSocket, now: performance.now(), "
                             f"address: location.href}})", mark)
        raise AssertionError(f"no finished run within {timeout} s; since the action (this document's clock, "
                             f"ms): {seen}") from error
    return tuple(page.evaluate(
        f"""m => {{ const s = {SINCE}(m), start = s.find({IS_START});
                   return start ? [start[1], s[s.length - 1][1]] : [m ? m[3] : 0, window.__wbReceived[1]]; }}""",
        mark,
    ))


def wait_charts(page, count: int, timeout: float = 30) -> int:
    """Wait until at least `count` charts (plotly or graphviz) are drawn; returns how many are."""
    deadline = time.monotonic() + timeout
    while True:
        found = page.locator(CHART_SELECTOR).count()
        if found >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


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


def artifacts_dir(*parts: str) -> Path:
    path = _artifacts().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


MAX_SHOT_HEIGHT = 12000


def wait_loaded(page, timeout_ms: int = 60_000) -> None:
    """Lazy elements (tables, charts) show skeletons until their code has loaded: wait them out (on a loaded
    host that has taken over 20 s)."""
    page.wait_for_function("() => document.querySelectorAll('[data-testid=stSkeleton]').length === 0",
                           timeout=timeout_ms)
    page.wait_for_timeout(500)


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
    page.screenshot(path=str(artifacts_dir("screenshots") / f"{name}.png"), full_page=True)
    page.set_viewport_size(viewport)
