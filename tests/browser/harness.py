"""The browser harness moved to harness/browser.py (the benchmark uses it too); this name still resolves to it."""

from harness.browser import (
    CHART_SELECTOR,
    ROOT,
    act_and_wait_run,
    artifacts_dir,
    full_screenshot,
    launch_chromium,
    new_context,
    run_mark,
    run_started,
    streamlit_server,
    wait_charts,
    wait_loaded,
    wait_run,
)

__all__ = ["CHART_SELECTOR", "ROOT", "act_and_wait_run", "artifacts_dir", "full_screenshot", "launch_chromium",
           "new_context", "run_mark", "run_started", "streamlit_server", "wait_charts", "wait_loaded", "wait_run"]
