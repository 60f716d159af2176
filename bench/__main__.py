"""Benchmark the real app in headless Chromium and print a markdown table.

    python -m bench                      # every registered page, each also in whiteboard mode
    python -m bench --pages tensors,autograd --reruns 5
    python -m bench --every-view         # also every section of every page (demos/registry.py declares them)
    python -m bench --memory             # PSS of heavy demos, five visitors, idle; the upload worst case

Measures: cold start (server start to first page rendered) against an app whose only page imports torch, a
widget change in a bare app (Streamlit's own floor on this host),
first visit (on this server, running the page's default cases) and again in a new session (defaults cached), what a
visitor waits after changing one of a view's own widgets (bench/changes.py: until the view has redrawn, its
fragment or the page), warm full reruns per page (the 'r' key, in the browser, and the page script alone in
AppTest), the same for each page in whiteboard mode (a view, ?whiteboard=true), server RSS
(children included) after all pages and after 50 more reruns, and the time of each heavy demo case that a
demos module lists in BENCH_CASES.
"""

import argparse
import contextlib
import importlib
import pkgutil
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from unittest import mock

import psutil
from playwright.sync_api import sync_playwright
from streamlit.runtime.scriptrunner.script_cache import ScriptCache
from streamlit.testing.v1 import AppTest, app_test, local_script_runner

import demos
from bench import memory as memory_bench
from bench import uploads
from bench.changes import change_ms
from demos.registry import HOME, by_slug, registered
from demos.tensors import shapes as lab
from harness.browser import (
    CHART_SELECTOR,
    launch_chromium,
    new_context,
    run_mark,
    run_started,
    settle,
    streamlit_server,
    wait_run,
)

MiB = 2**20
BUDGET = {"warm_median_ms": 150, "warm_max_ms": 500, "first_visit_s": 5.0, "rss_mib": 600, "growth_mib": 30,
          "cold_ratio": 1.3, "change_median_ms": 100, "change_max_ms": 200}
# Pages whose issue names its own warm-rerun budget (ms); every other page has warm_median_ms.
PAGE_RERUN_BUDGET_MS = {"tensors": 100, "autograd": 200}
# Views timed whenever their page is: the Shape lab with a 10-step chain (issue budget: the tensors page's 100 ms).
PAGE_VIEWS = {"tensors": [f"tensors?{urllib.parse.urlencode(lab.lab_query(*lab.PRESETS['10-step chain']))}"]}
TORCH_ONLY_APP = '''import streamlit as st
st.navigation([st.Page("only.py", title="torch only")]).run()
'''
TORCH_ONLY_PAGE = '''import streamlit as st
import torch
st.title("torch only")
st.write(torch.__version__)
'''

# The floor of a widget change: a bare app whose one key row holds a slider and a radio and whose script does nothing
# else. What it takes is Streamlit's own round trip on this host, the least any view's change can take.
BARE_APP = '''import streamlit as st
with st.container(key="keys-bare"):
    n = st.slider("n", 0, 10, 3, key="bare_n")
    pick = st.radio("pick", ["a", "b", "c"], key="bare_pick", horizontal=True)
st.write(f"n = {n}, pick = {pick}")
'''


def bare_change(browser, changes: int) -> dict:
    """Widget changes of the bare app (its slider, as bench/changes.py chooses), timed like every view's."""
    folder = Path(tempfile.mkdtemp(prefix="wb-bare-"))
    (folder / "app.py").write_text(BARE_APP)
    with streamlit_server("app.py", cwd=folder) as (url, _):
        context = new_context(browser, viewport={"width": 1400, "height": 900})
        page = context.new_page()
        page.goto(url)
        wait_run(page, timeout=120)
        page.locator("[data-testid=stSlider]").first.wait_for(timeout=60_000)
        result = change_ms(page, changes)
        context.close()
    return result


def wait_charts_drawn(page, charts: int, timeout: float = 120) -> None:
    if charts:
        page.wait_for_function(
            f"() => document.querySelectorAll({CHART_SELECTOR!r}).length >= {charts}", timeout=timeout * 1000
        )


def cold_start(browser, app: str, cwd: Path, charts: int) -> float:
    """Seconds from launching the server process to the first page rendered in the browser."""
    start = time.perf_counter()
    with streamlit_server(app, cwd=cwd) as (url, _):
        context = new_context(browser)
        page = context.new_page()
        page.goto(url)
        wait_run(page, timeout=120)
        wait_charts_drawn(page, charts)
        elapsed = time.perf_counter() - start
        context.close()
    return elapsed


def torch_only_dir() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="wb-torch-only-"))
    (folder / "app.py").write_text(TORCH_ONLY_APP)
    (folder / "only.py").write_text(TORCH_ONLY_PAGE)
    return folder


def rerun_ms(page, charts: int, attempts: int = 3) -> float:
    """One rerun via the 'r' shortcut, timed in the browser from the rerun request to the script state idle.

    That spans the round trip to the server, the script, Streamlit's post-run garbage collection (which holds
    the messages back until it ends) and the frontend drawing every element. The shortcut's own key dispatch
    before the request is left out: it is not the page's cost. A press the frontend ignores (it sometimes
    does, right after a run) is retried.
    """
    for _ in range(attempts):
        mark = run_mark(page)
        page.locator("[data-testid=stMain]").press("r")
        if run_started(page, mark, timeout=5):
            started, finished = wait_run(page, mark)
            break
    else:
        raise RuntimeError(f"no rerun started after {attempts} presses of 'r'")
    wait_charts_drawn(page, charts)
    return finished - started


def process_role(p: psutil.Process) -> str:
    """What one process of the server's tree is: the server, a fork server, multiprocessing's resource tracker, or
    a child a demo started."""
    cmdline = " ".join(p.cmdline())
    if "forkserver" in cmdline:
        return "fork server (demos/processes.py)"
    if "resource_tracker" in cmdline:
        return "multiprocessing's resource tracker"
    return "a demo's child process"


def server_memory(proc) -> dict:
    """Resident memory (RSS) of the server and all its children, MiB, and each process's RSS and PSS: PSS splits a
    page shared by processes between them, so the PSS column adds up to what the tree costs the host."""
    root = psutil.Process(proc.pid)
    rows = []
    for p in [root, *root.children(recursive=True)]:
        try:
            info = p.memory_full_info()
            role = "the Streamlit server" if p.pid == root.pid else process_role(p)
        except psutil.NoSuchProcess:
            continue
        rows.append({"role": role, "rss": info.rss / MiB, "pss": info.pss / MiB})
    return {"rss": sum(r["rss"] for r in rows), "pss": sum(r["pss"] for r in rows), "processes": rows}


def server_rss(proc) -> float:
    """Resident memory of the server and all its children, MiB."""
    return server_memory(proc)["rss"]


def visit(page, url: str, topic) -> float:
    """Seconds to open a page the way a visitor does: a sidebar click (a page load for the first page), until the
    page's title is shown, its run has ended and its charts are drawn. (A fast run drawn in one go shows no running
    state, so the page's own title says the new page has run.)"""
    link = page.locator(f"[data-testid=stSidebarNav] a[href$='/{topic.slug}']")
    start = time.perf_counter()
    if topic is not HOME and link.count() == 1:
        link.click()
    else:
        page.goto(f"{url}/{'' if topic is HOME else topic.slug}")
    heading = "PyTorch Whiteboard" if topic is HOME else topic.title
    title = page.locator("[data-testid=stMain] h1").filter(has_text=heading).first
    title.wait_for(state="visible", timeout=120_000)
    settle(page, timeout=120)
    wait_charts_drawn(page, topic.charts)
    return time.perf_counter() - start


@contextlib.contextmanager
def compiled_once():
    """AppTest compiles the scripts again on every run; the server compiles each once (its ScriptCache) and reuses
    the bytecode until a file changes. Share one cache across runs so a warm rerun is timed as the server runs it
    (for the Tensors page the recompile alone is about 27 ms)."""
    shared = ScriptCache()
    with mock.patch.object(app_test, "ScriptCache", lambda: shared), \
            mock.patch.object(local_script_runner, "ScriptCache", lambda: shared):
        yield


def script_ms(topic, reruns: int, query: dict | None = None) -> float:
    """Median time of the page's script alone on a warm rerun (AppTest, in this process): no browser, no network."""
    with compiled_once():
        return _script_ms(topic, reruns, query)


def _script_ms(topic, reruns: int, query: dict | None) -> float:
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=300)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    if topic is not HOME:
        at.switch_page(topic.file).run()
    at.run()  # warm the page's caches
    times = []
    for _ in range(reruns):
        start = time.perf_counter()
        at.run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def visit_again(browser, url: str, topic) -> float:
    """The page's first visit in a new session once its default cases are cached (they run once per server): what
    every visitor after the first one waits."""
    context = new_context(browser, viewport={"width": 1400, "height": 900})
    page = context.new_page()
    visit(page, url, HOME)
    seconds = visit(page, url, topic)
    context.close()
    return seconds


def bench_views(page, url: str, views: list[str], reruns: int) -> list[dict]:
    """Warm reruns of views named by URL ('tensors?tensors_tab=dtypes'): a tab, a question, a setting."""
    rows = []
    for view in views:
        slug, _, query = view.partition("?")
        topic = by_slug(slug)
        page.goto(f"{url}/{view}")
        wait_run(page, timeout=120)
        rerun_ms(page, 0)  # the first rerun after a page load still competes with lazily loaded chart code
        times = [rerun_ms(page, 0) for _ in range(reruns)]
        rows.append({"page": f"{topic.title} ({urllib.parse.unquote_plus(query)})", "slug": slug, "first_s": None,
                     "cached_first_s": None, "change": change_ms(page, reruns),
                     "median_ms": statistics.median(times), "max_ms": max(times),
                     "script_ms": script_ms(topic, reruns, dict(urllib.parse.parse_qsl(query)))})
        print(f"  {view}: warm median {rows[-1]['median_ms']:.0f} ms", file=sys.stderr)
    return rows


def bench_pages(browser, topics, reruns: int, extra_reruns: int, views: list[str]) -> tuple[list[dict], dict]:
    rows = []
    with streamlit_server() as (url, proc):
        context = new_context(browser, viewport={"width": 1400, "height": 900})
        page = context.new_page()
        visit(page, url, HOME)  # warm the server's imports once, as any visitor after the first sees it
        for topic in topics:
            first = visit(page, url, topic)
            times = [rerun_ms(page, topic.charts) for _ in range(reruns)]
            change = change_ms(page, reruns)
            again = visit_again(browser, url, topic) if topic is not HOME else first
            rows.append({"page": topic.title, "slug": topic.slug, "first_s": first, "cached_first_s": again,
                         "change": change, "median_ms": statistics.median(times), "max_ms": max(times),
                         "script_ms": script_ms(topic, reruns)})
            print(f"  {topic.slug}: first {first:.2f} s ({again:.2f} s cached), "
                  f"warm median {rows[-1]['median_ms']:.0f} ms", file=sys.stderr)
        after_pages = server_memory(proc)
        # each visit is one rerun of that page's script; a sidebar click on the open page starts no run, so a
        # single page alternates with Home
        cycle = topics if len(topics) > 1 else [*topics, HOME]
        for i in range(extra_reruns):
            visit(page, url, cycle[i % len(cycle)])
        memory = {"after_pages": after_pages["rss"], "tree": after_pages, "after_reruns": server_rss(proc)}
        rows += bench_views(page, url, views, reruns)
        context.close()
    return rows, memory


def time_case(fn) -> dict:
    """First call and best of two more; a number the case returns is reported, a failure is a row, not a crash."""
    times, value = [], None
    try:
        for _ in range(3):
            start = time.perf_counter()
            value = fn()
            times.append(time.perf_counter() - start)
    except Exception as err:  # report and go on: one failing case must not hide the others
        return {"first_s": times[0] if times else None, "best_s": None, "result": f"FAILED: {err}"}
    result = f"{value:.2f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else ""
    return {"first_s": times[0], "best_s": min(times[1:]), "result": result}


def bench_cases(pattern: str) -> list[dict]:
    """Time each heavy demo listed in a demos module's BENCH_CASES."""
    rows = []
    for info in pkgutil.walk_packages(demos.__path__, "demos."):
        if pattern not in info.name:
            continue
        module = importlib.import_module(info.name)
        for name, fn in getattr(module, "BENCH_CASES", {}).items():
            rows.append({"case": f"{info.name.removeprefix('demos.')}: {name}", **time_case(fn)})
            print(f"  {rows[-1]['case']}: {rows[-1]['first_s']} s {rows[-1]['result']}", file=sys.stderr)
    return rows


def seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s"


def changed(change: dict | None) -> str:
    """A widget change's median (max), or a dash where there was no control to change."""
    return "—" if change is None else f"{change['median_ms']:.0f} ms ({change['max_ms']:.0f} ms)"


def ok(value: float, budget: float) -> str:
    return "✅" if value <= budget else "❌"


def report(cold: dict, rows: list[dict], memory: dict, cases: list[dict]) -> str:
    b = BUDGET
    ratio = cold["app"] / cold["torch_only"]
    growth = memory["after_reruns"] - memory["after_pages"]
    lines = [
        "| measure | value | budget | |",
        "| --- | ---: | ---: | --- |",
        f"| cold start, this app (median of {cold['repeat']}) | {cold['app']:.2f} s | | |",
        f"| cold start, torch-only app (median of {cold['repeat']}) | {cold['torch_only']:.2f} s | | |",
        f"| cold start ratio | {ratio:.2f}x | <= {b['cold_ratio']}x | {ok(ratio, b['cold_ratio'])} |",
        f"| server RSS after all pages | {memory['after_pages']:.0f} MiB | <= {b['rss_mib']} MiB "
        f"| {ok(memory['after_pages'], b['rss_mib'])} |",
        f"| widget change, a bare Streamlit app (a slider; Streamlit's own floor here) "
        f"| {changed(cold['bare_change'])} | | |",
        f"| RSS growth over {memory['reruns']} more reruns | {growth:+.1f} MiB | <= {b['growth_mib']} MiB "
        f"| {ok(growth, b['growth_mib'])} |",
        *[f"| {r['role']}: RSS {r['rss']:.0f} MiB, PSS | {r['pss']:.0f} MiB | | |"
          for r in memory["tree"]["processes"]],
        f"| all of them, PSS (what the host pays) | {memory['tree']['pss']:.0f} MiB | | |",
        "",
        f"| page or view | first visit | first visit, defaults cached | widget change median (max), budget "
        f"{b['change_median_ms']} ({b['change_max_ms']}) ms | widget | full rerun median (max) | budget "
        "| script alone (median) | |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        budget = PAGE_RERUN_BUDGET_MS.get(r["slug"], b["warm_median_ms"])
        change = r.get("change")
        # the first-visit budget holds for every visitor after the one whose visit ran the page's default cases
        good = ((r["cached_first_s"] is None or r["cached_first_s"] <= b["first_visit_s"])
                and r["median_ms"] <= budget and r["max_ms"] <= b["warm_max_ms"]
                and (change is None or (change["median_ms"] <= b["change_median_ms"]
                                        and change["max_ms"] <= b["change_max_ms"])))
        changed_ms = changed(change)
        lines.append(f"| {r['page']} | {seconds(r['first_s'])} | {seconds(r['cached_first_s'])} | {changed_ms} "
                     f"| {change['widget'] if change else '—'} | {r['median_ms']:.0f} ms ({r['max_ms']:.0f} ms) "
                     f"| {budget} ms | {r['script_ms']:.0f} ms | {'✅' if good else '❌'} |")
    if cases:
        lines += ["", "| heavy demo | first call | best of next two | result |", "| --- | ---: | ---: | --- |"]
        lines += [f"| {c['case']} | {seconds(c['first_s'])} | {seconds(c['best_s'])} | {c['result']} |"
                  for c in cases]
    return "\n".join(lines)


def undeclared_view(view: str) -> str:
    """What is wrong with a view named by URL ('tensors?tensors_tab=dtypes'), or '' when its page and tabs exist."""
    slug, _, query = view.partition("?")
    if slug not in {t.slug for t in registered()}:
        return f"{view}: no registered page {slug!r}"
    wrong = by_slug(slug).undeclared_tabs(dict(urllib.parse.parse_qsl(query)))
    return f"{view}: {slug} declares no tab {', '.join(wrong)} (demos/registry.py)" if wrong else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", help="comma-separated slugs (default: every registered page)")
    parser.add_argument("--reruns", type=int, default=7, help="warm reruns timed per page")
    parser.add_argument("--extra-reruns", type=int, default=50, help="reruns before the second memory reading")
    parser.add_argument("--cold-repeat", type=int, default=3)
    parser.add_argument("--views", default="",
                        help="comma-separated extra views to time, e.g. tensors?tensors_tab=dtypes")
    parser.add_argument("--every-view", action="store_true",
                        help="also time every section (tab) of the chosen pages, as the registry declares them")
    parser.add_argument("--no-whiteboard", action="store_true", help="skip each page's whiteboard-mode view")
    parser.add_argument("--cases", default="", help="only heavy demo cases whose module name contains this")
    parser.add_argument("--no-cases", action="store_true", help="skip the heavy demo cases")
    parser.add_argument("--memory", action="store_true",
                        help="only the memory tables (bench/memory.py) and the upload worst case (bench/uploads.py)")
    parser.add_argument("--demos", default="", help="with --memory: only the heavy demos whose name contains this "
                        "(each alone; no five-at-once run)")
    args = parser.parse_args()
    if args.memory:
        with sync_playwright() as p:
            browser = launch_chromium(p)
            result = memory_bench.run(browser, args.demos)
            browser.close()
        print(memory_bench.report(result) + ("" if args.demos else "\n\n" + uploads.report(uploads.run())))
        return
    topics = registered()
    if args.pages:
        wanted = set(args.pages.split(","))
        topics = [t for t in topics if t.slug in wanted]
        if not topics:
            parser.error(f"no registered page among {sorted(wanted)}")
    for view in args.views.split(","):
        if view and (wrong := undeclared_view(view)):
            parser.error(wrong)
    with sync_playwright() as p:
        browser = launch_chromium(p)
        torch_dir = torch_only_dir()
        cold_app, cold_torch = [], []
        for _ in range(args.cold_repeat):
            cold_torch.append(cold_start(browser, "app.py", torch_dir, 0))
            cold_app.append(cold_start(browser, "app.py", Path.cwd(), HOME.charts))
        cold = {"app": statistics.median(cold_app), "torch_only": statistics.median(cold_torch),
                "repeat": args.cold_repeat}
        print(f"  cold start: app {cold['app']:.2f} s, torch-only {cold['torch_only']:.2f} s", file=sys.stderr)
        cold["bare_change"] = bare_change(browser, args.reruns)
        views = [] if args.no_whiteboard else [f"{t.slug}?whiteboard=true" for t in topics]
        views += [v for t in topics for v in PAGE_VIEWS.get(t.slug, [])]
        views += [v for v in args.views.split(",") if v]
        if args.every_view:
            views += [f"{t.slug}?{urllib.parse.urlencode(q)}" for t in topics for q in t.sections() if q]
        rows, memory = bench_pages(browser, topics, args.reruns, args.extra_reruns, views)
        memory["reruns"] = args.extra_reruns
        browser.close()
    cases = [] if args.no_cases else bench_cases(args.cases)
    print(report(cold, rows, memory, cases))


if __name__ == "__main__":
    main()
