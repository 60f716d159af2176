"""Several visitors start process demos at the same moment: every run finishes, each visitor sees the result of
their own settings, and the runs took turns (one set of worker processes at a time)."""

import pytest

from harness.browser import new_context, run_mark, wait_run

pytestmark = pytest.mark.browser

DATASETS = (7, 11, 13)  # one sampler dataset size per visitor: a result shows whose run it was


def metric(page, label: str) -> str:
    box = page.locator("[data-testid=stMetric]").filter(has=page.get_by_text(label, exact=True)).first
    return box.locator("[data-testid=stMetricValue]").inner_text().strip()


def test_simultaneous_visitors_each_get_their_own_run(server, browser):
    tabs = []
    try:
        for size in DATASETS:
            context = new_context(browser, viewport={"width": 1400, "height": 900})
            page = context.new_page()
            tabs.append((context, page))
            page.goto(f"{server}/distributed?dist_world=3&dist_d_in=12&dist_d_out=6&dist_tab=DistributedSampler"
                      f"&dist_dataset={size}")
            wait_run(page, timeout=120)
        marks = []
        for _, page in tabs:  # press all three buttons before any run can finish
            marks.append(run_mark(page))
            page.get_by_role("button", name="Run DistributedSampler on 3 ranks").click()
        pids = []
        for (_, page), mark, size in zip(tabs, marks, DATASETS, strict=True):
            wait_run(page, mark, timeout=180)
            assert page.locator("[data-testid=stException]").count() == 0
            assert page.locator("[data-testid=stAlertContentError]").count() == 0
            assert metric(page, "dataset") == str(size), "this visitor's own dataset size"
            assert metric(page, "samples per rank") == str(-(-size // 3))
            label = page.locator("[data-testid=stExpander] summary").filter(has_text="live run").first.inner_text()
            pids.append(label.split("pids ")[1].split(")")[0])
        assert len(set(pids)) == len(DATASETS), f"three separate runs, not one shared result: {pids}"
    finally:
        for context, _ in tabs:
            context.close()
