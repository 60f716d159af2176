"""Several visitors start heavy demos at the same moment: every run finishes with no bug sentence, each visitor
sees the result of their own settings, the runs take turns, and a run that waited in line leaves a cached
result that later visitors get cleanly (the place-in-line notice is written outside the cached functions)."""

import pytest
from playwright.sync_api import expect

from harness.browser import act, open_page, run_mark, wait_run
from pages.ui.errors import BUG_NOTE

pytestmark = pytest.mark.browser

QUEUE_TEXT = "ahead of yours"
FSDP = ("distributed?dist_world=2&dist_tab=FSDP+%26+ZeRO&dist_fsdp_layers=6&dist_fsdp_width=256"
        "&dist_fsdp_per_rank=32", "Run FSDP on 2 ranks")
WORKERS = ("debugging?dbg_tab=Reproducibility", "Start 2 workers for each loader")
DATASETS = (7, 11, 13, 17)  # one sampler dataset size per visitor: a result shows whose run it was


def sampler(size: int) -> tuple[str, str]:
    return (f"distributed?dist_world=3&dist_d_in=12&dist_d_out=6&dist_tab=DistributedSampler&dist_dataset={size}",
            "Run DistributedSampler on 3 ranks")


def explain(shapes: str) -> tuple[str, str]:
    return f"memory?mem_tab=torch.compile&mem_shapes={shapes}", "Explain and count"


def metric(page, label: str) -> str:
    box = page.locator("[data-testid=stMetric]").filter(has=page.get_by_text(label, exact=True)).first
    return box.locator("[data-testid=stMetricValue]").inner_text().strip()


def open_tab(browser, url: str, path: str):
    return open_page(browser, f"{url}/{path}", viewport={"width": 1400, "height": 900})


def press(page, button: str) -> list:
    """Press a heavy demo's button; returns the run mark taken just before (for wait_run: a heavy run takes
    seconds, so its start shows)."""
    mark = run_mark(page)
    page.get_by_role("button", name=button).first.click(timeout=120_000)  # a loaded host draws the page slowly
    return mark


WORKER_SEEDS = "with worker processes forked from a fork server"


def run_caption(page) -> str:
    """The worker-seed run's caption: its base seeds and how long it took."""
    return page.get_by_text(WORKER_SEEDS).first.inner_text()


def assert_no_bug(page) -> None:
    assert page.locator("[data-testid=stException]").count() == 0
    assert page.get_by_text(BUG_NOTE).count() == 0, page.locator("[data-testid=stAlertContentError]").all_inner_texts()
    assert page.locator("[data-testid=stAlertContentError]").count() == 0


def test_a_run_that_waited_in_line_gets_its_result_and_leaves_a_clean_cache_entry(server, browser):
    (ca, a), (cb, b) = open_tab(browser, server, FSDP[0]), open_tab(browser, server, WORKERS[0])
    try:
        mark_a = press(a, FSDP[1])
        expect(a.get_by_test_id("stExpanderIconSpinner")).to_be_visible(timeout=60_000)  # A's run is under way
        mark_b = press(b, WORKERS[1])
        expect(b.get_by_text(QUEUE_TEXT).first).to_be_visible()  # B waits behind A and is told so
        wait_run(b, mark_b, timeout=180)
        wait_run(a, mark_a, timeout=180)
        for page in (a, b):
            assert_no_bug(page)
        assert b.get_by_text("repeat: worker 1 draws exactly what worker 0 draws").count() == 1
        cc, c = open_tab(browser, server, WORKERS[0])  # a third visitor, same settings: the cached result
        act(c, lambda: press(c, WORKERS[1]), lambda: expect(c.get_by_text(WORKER_SEEDS).first).to_be_visible())
        assert run_caption(c) == run_caption(b), "the cached run (its own duration), not a new one"
        assert_no_bug(c)
        assert c.get_by_text(QUEUE_TEXT).count() == 0
        assert c.get_by_text("repeat: worker 1 draws exactly what worker 0 draws").count() == 1
        cc.close()
    finally:
        ca.close()
        cb.close()


def test_ten_visitors_press_heavy_buttons_at_once(server, browser):
    demos = ([sampler(size) for size in DATASETS] + [WORKERS] * 3 + [explain("8%3B+16"), explain("4%3B+5%3B+6")]
             + [FSDP])
    assert len(demos) == 10
    tabs = [open_tab(browser, server, path) for path, _ in demos]
    try:
        marks = [press(page, button) for (_, page), (_, button) in zip(tabs, demos, strict=True)]
        for (_, page), mark in zip(tabs, marks, strict=True):
            wait_run(page, mark, timeout=300)
            assert_no_bug(page)
        pids = []
        for (_, page), size in zip(tabs, DATASETS, strict=False):
            assert metric(page, "dataset") == str(size), "this visitor's own dataset size"
            assert metric(page, "samples per rank") == str(-(-size // 3))
            label = page.locator("[data-testid=stExpander] summary").filter(has_text="live run").first.inner_text()
            pids.append(label.split("pids ")[1].split(")")[0])
        assert len(set(pids)) == len(DATASETS), f"separate runs, not one shared result: {pids}"
        for _, page in tabs[len(DATASETS):len(DATASETS) + 3]:
            assert page.get_by_text("repeat: worker 1 draws exactly what worker 0 draws").count() == 1
        for _, page in tabs[-3:-1]:
            assert page.get_by_text("Recompilation when the input shape changes").count() == 1
    finally:
        for context, _ in tabs:
            context.close()
