"""Memory of the real server as a small hosting tier sees it: PSS of the server process plus all its children.

PSS (proportional set size) splits each shared page among the processes that map it, so the sum over the tree
counts torch's libraries once although the server, its fork servers and their children all map them.

    python -m bench --memory            # every heavy demo alone, five visitors at once, idle after everything

- each heavy demo alone, on the smallest tier (690 MB): a fresh server, one visitor opens the demo's URL and
  presses its button; the peak PSS sampled every 0.1 s from the press until the run finished.
- five visitors at once, on a 1 GB tier: a fresh server, every page visited, then five visitors open the five
  heaviest demos and press their buttons together; the peak PSS, and how many of the queued visitors were told
  how many runs are ahead of theirs.
- idle: on that server, PSS 30 s after the last run ended.

A tier's limit reaches the server as WHITEBOARD_MEMORY_LIMIT_MB (demos/guests.py), as a container's cgroup limit
would, so the server scales its ranks and workers to it exactly as it does on the host.
"""

import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass

import psutil

from demos.guests import LIMIT_VARIABLE
from demos.memory.compiling import EXPLAIN_BUDGET_S, MAX_SHAPES
from demos.memory.training import SWEEP_BUDGET_S
from demos.registry import registered
from harness.browser import SINCE, new_context, run_mark, streamlit_server, wait_run

MB = 1e6  # the hosting tiers are sold in MB/GB, so the budgets are decimal
BUDGET_MB = {"alone": 690, "five": 1000, "idle": 520}
TIER_MB = {"alone": 690, "five": 1000}  # the memory limit each scenario's server runs under
IDLE_AFTER_S = 30
QUEUE_TEXT = "ahead of yours"


@dataclass(frozen=True)
class HeavyDemo:
    """A demo a visitor starts with one button: its URL (the tab named in it) and the button to press."""

    name: str
    path: str
    button: str
    budget_s: float | None = None  # the time the page says the click takes at most, if it states one


HEAVY_DEMOS = (
    HeavyDemo("Distributed: DDP, 4 ranks, 6 x 256, 32 per rank",
              "distributed?dist_world=4&dist_tab=DDP&dist_ddp_layers=6&dist_ddp_width=256&dist_ddp_per_rank=32",
              "Run DDP on 4 ranks"),
    HeavyDemo("Distributed: FSDP, 4 ranks, 6 x 256, 32 per rank",
              "distributed?dist_world=4&dist_tab=FSDP+%26+ZeRO&dist_fsdp_layers=6&dist_fsdp_width=256"
              "&dist_fsdp_per_rank=32", "Run FSDP on 4 ranks"),
    HeavyDemo("Debugging: worker seeds, 2 loaders x 2 workers", "debugging?dbg_tab=Reproducibility",
              "Start 2 workers for each loader"),
    HeavyDemo("Data loading: timeline, 4 vs 4 workers", "data-loading?dl_a_workers=4&dl_b_workers=4",
              "Run both loaders"),
    HeavyDemo("Memory: inductor compile, 1024 x 1024", "memory?mem_tab=torch.compile&mem_size=1024",
              "Compile and time"),
    # the largest MLP the tab takes: its default (64 x 2) runs when the tab opens, so a press there is a cache hit
    HeavyDemo("Saving: ONNX export + onnxruntime, 512 x 4", "saving?sv_tab=ONNX&sv_onnx_width=512&sv_onnx_depth=4",
              "Export to ONNX and run onnxruntime"),
    # the two worst in-process clicks: dynamo on the largest shapes the field takes, the sweep of the largest run
    HeavyDemo(f"Memory: explain and count, {MAX_SHAPES} shapes of about 1024^3",
              "memory?mem_tab=torch.compile&mem_shapes="
              + "%3B".join(f"{1024 - i},1024,1024" for i in range(MAX_SHAPES)), "Explain and count",
              EXPLAIN_BUDGET_S),
    HeavyDemo("Memory: batch sweep, GPT-2 XL, batch 64, sequence 2048, 3 steps",
              "memory?mem_model=GPT-2+XL+%281.5B%29&mem_batch=64&mem_seq=2048&mem_steps=3", "Run the batch sweep",
              SWEEP_BUDGET_S),
)


def tree_pss(pid: int) -> float:
    """PSS of a process and all its descendants, MB."""
    root = psutil.Process(pid)
    total = 0
    for p in [root, *root.children(recursive=True)]:
        try:
            total += p.memory_full_info().pss
        except psutil.Error:  # a child that ended between the listing and the reading
            pass
    return total / MB


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of the server process and its children that have been waited for."""
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system + t.children_user + t.children_system


class PeakSampler:
    """Samples the tree's PSS and the server process's RSS every `interval` s in a thread, from start() to stop();
    keeps the peaks, and the server's CPU seconds over the block."""

    def __init__(self, pid: int, interval: float = 0.1):
        self.pid, self.interval, self.peak, self.peak_rss, self.cpu_s = pid, interval, 0.0, 0.0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_pss(self.pid))
            self.peak_rss = max(self.peak_rss, psutil.Process(self.pid).memory_info().rss / MB)
            time.sleep(self.interval)

    def __enter__(self):
        self._cpu_start = cpu_seconds(self.pid)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.cpu_s = cpu_seconds(self.pid) - self._cpu_start


def open_demo(browser, url: str, demo: HeavyDemo):
    """A visitor's tab on the demo's URL, which opens the demo's tab (a tab click's rerun can be dropped under
    load), ready to press its button."""
    context = new_context(browser, viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.goto(f"{url}/{demo.path}")
    wait_run(page, timeout=180)
    return context, page


def press(page, demo: HeavyDemo) -> int:
    mark = run_mark(page)
    page.get_by_role("button", name=demo.button).first.click()
    return mark


def demo_alone(browser, demo: HeavyDemo) -> dict:
    """Peak PSS while one visitor runs one heavy demo on a fresh server (the page already open)."""
    with streamlit_server() as (url, proc):
        context, page = open_demo(browser, url, demo)
        before = tree_pss(proc.pid)
        start = time.perf_counter()
        with PeakSampler(proc.pid) as sampler:
            wait_run(page, press(page, demo), timeout=300)
        seconds = time.perf_counter() - start
        context.close()
    print(f"  {demo.name}: {before:.0f} -> peak {sampler.peak:.0f} MB (server RSS {sampler.peak_rss:.0f} MB) in "
          f"{seconds:.1f} s, {sampler.cpu_s:.1f} CPU-s", file=sys.stderr)
    return {"name": demo.name, "before": before, "peak": sampler.peak, "seconds": seconds,
            "peak_rss": sampler.peak_rss, "cpu_s": sampler.cpu_s, "budget_s": demo.budget_s}


def visit_every_page(browser, url: str) -> None:
    context = new_context(browser, viewport={"width": 1400, "height": 900})
    page = context.new_page()
    for topic in registered():
        page.goto(f"{url}/{topic.slug}")
        wait_run(page, timeout=180)
    context.close()


def five_at_once(browser, demos: list[HeavyDemo]) -> dict:
    """Five visitors press their heavy demos' buttons together; then the server idles."""
    with streamlit_server() as (url, proc):
        visit_every_page(browser, url)
        tabs = [open_demo(browser, url, d) for d in demos]
        told, start = set(), time.perf_counter()
        with PeakSampler(proc.pid) as sampler:
            marks = [press(page, d) for (_, page), d in zip(tabs, demos, strict=True)]
            pending = set(range(len(tabs)))
            while pending:
                for i in list(pending):
                    page = tabs[i][1]
                    if page.get_by_text(QUEUE_TEXT).count():
                        told.add(i)
                    if page.evaluate(f"m => {SINCE}(m).at(-1)?.[0] === 'notRunning'", marks[i]):
                        pending.discard(i)
                time.sleep(0.2)
                if time.perf_counter() - start > 600:
                    raise TimeoutError("the five runs did not finish within 600 s")
        seconds = time.perf_counter() - start
        for context, _ in tabs:
            context.close()
        idle = []
        for _ in range(IDLE_AFTER_S):
            time.sleep(1)
            idle.append(tree_pss(proc.pid))
    print(f"  five at once: peak {sampler.peak:.0f} MB in {seconds:.1f} s, {len(told)} told their place; "
          f"idle {idle[-1]:.0f} MB after {IDLE_AFTER_S} s", file=sys.stderr)
    return {"peak": sampler.peak, "seconds": seconds, "told": len(told), "idle": idle[-1],
            "idle_median_last5": statistics.median(idle[-5:])}


def run(browser, only: str = "") -> dict:
    """Every heavy demo alone, then the five heaviest at once; with `only`, just the demos whose name holds it."""
    os.environ[LIMIT_VARIABLE] = str(TIER_MB["alone"])
    alone = [demo_alone(browser, d) for d in HEAVY_DEMOS if only in d.name]
    if only:
        del os.environ[LIMIT_VARIABLE]
        return {"alone": alone, "five": None}
    heaviest = sorted(HEAVY_DEMOS, key=lambda d: -next(a["peak"] for a in alone if a["name"] == d.name))[:5]
    os.environ[LIMIT_VARIABLE] = str(TIER_MB["five"])
    five = five_at_once(browser, heaviest)
    del os.environ[LIMIT_VARIABLE]
    return {"alone": alone, "five": five, "five_names": [d.name for d in heaviest]}


def ok(value: float, budget: float) -> str:
    return "✅" if value <= budget else "❌"


def report(result: dict) -> str:
    b = BUDGET_MB
    lines = ["| memory (PSS, server + children) | before the run | peak | server peak RSS | run time | server CPU "
             "| budget | |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for a in result["alone"]:
        good = a["peak"] <= b["alone"] and (a["budget_s"] is None or a["seconds"] <= a["budget_s"])
        time_budget = "" if a["budget_s"] is None else f", <= {a['budget_s']:g} s"
        lines.append(f"| {a['name']}, alone on a {TIER_MB['alone']} MB tier | {a['before']:.0f} MB "
                     f"| {a['peak']:.0f} MB | {a['peak_rss']:.0f} MB | {a['seconds']:.1f} s | {a['cpu_s']:.1f} s "
                     f"| <= {b['alone']} MB{time_budget} | {'✅' if good else '❌'} |")
    five = result["five"]
    if five is None:
        return "\n".join(lines)
    queued = five["told"] >= 1
    lines.append(f"| five visitors at once on a {TIER_MB['five']} MB tier "
                 f"({', '.join(n.split(':')[0] for n in result['five_names'])}); "
                 f"{five['told']} of 5 shown their place in the queue | | {five['peak']:.0f} MB "
                 f"| {five['seconds']:.1f} s | <= {b['five']} MB | {ok(five['peak'], b['five']) if queued else '❌'} |")
    lines.append(f"| idle, {IDLE_AFTER_S} s after the last run (every page and the five demos done) | | "
                 f"{five['idle']:.0f} MB | | <= {b['idle']} MB | {ok(five['idle'], b['idle'])} |")
    return "\n".join(lines)
