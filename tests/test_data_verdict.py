"""The timeline's sentences against its own measurements: the verdict under each run says what the numbers show."""

import math
import re
from dataclasses import replace

import pytest

from demos.data.timeline import (
    DEFAULT_A,
    DEFAULT_B,
    MAIN,
    STEADY_OK,
    Comparison,
    LoaderConfig,
    LoaderRun,
    Span,
    Workload,
    compare,
    speedup_bound,
)


def synthetic_run(w: Workload, c: LoaderConfig, first: float, waits: list[float]) -> LoaderRun:
    """A main loop that waits `first` s for its first batch, then `waits[i]` before each later step."""
    spans, t = [Span(MAIN, "startup", 0.0, first / 2, ""), Span(MAIN, "wait", first / 2, first, "")], first
    for wait in [None, *waits]:
        if wait:
            spans.append(Span(MAIN, "wait", t, t + wait, ""))
            t += wait
        spans.append(Span(MAIN, "step", t, t + w.step_ms / 1000, ""))
        t += w.step_ms / 1000
    starved = sum(s.end - s.start for s in spans if s.kind != "step")
    return LoaderRun(w, c, 1, tuple(spans), (), t, starved, (first,), ())


def comparison(a: LoaderRun, b: LoaderRun, baseline: float, load: float = 0.5) -> Comparison:
    steady = baseline * a.steady_samples_per_s / a.samples_per_s  # the 0-worker run is a, or one like it
    return Comparison(a, b, {b.config.batch_size: baseline}, 0.1, 2, load, "", {b.config.batch_size: steady})


W = Workload()


def test_steady_wait_leaves_out_the_first_batch():
    run = synthetic_run(W, DEFAULT_B, 0.3, [0.004] * 9)
    assert run.first_batch_s == pytest.approx(0.3)
    assert run.steady_s == pytest.approx(run.wall_s - 0.3)
    assert run.steady_wait_fraction == pytest.approx(9 * 0.004 / (10 * 0.040 + 9 * 0.004))


def test_kept_up_verdict_names_its_own_numbers():
    a = synthetic_run(W, DEFAULT_A, 0.104, [0.104] * 9)
    b = synthetic_run(W, DEFAULT_B, 0.3, [0.004] * 9)
    r = comparison(a, b, a.samples_per_s)
    text = r.verdict(b)
    assert b.steady_wait_fraction <= STEADY_OK
    assert f"The first batch came after {1000 * b.first_batch_s:.0f} ms" in text
    assert f"{b.first_batch_s / b.wall_s:.0%} of the run" in text
    assert f"waited only {b.steady_wait_fraction:.0%} of the time" in text
    assert f"trained at {r.steady_speedup(b):.1f}x the 0-worker rate (bound {r.bound(b):.1f}x)" in text
    assert f"The whole run's {r.speedup(b):.2f}x is lower" in text  # the first batch is > 15% of this short run
    assert r.steady_speedup(b) == pytest.approx(b.steady_samples_per_s / a.steady_samples_per_s)
    starved = r.verdict(a)
    assert starved.startswith("Starved") and f"{a.starved_fraction:.0%} of the run went to loading" in starved


def test_long_run_does_not_blame_the_first_batch():
    b = synthetic_run(W, DEFAULT_B, 0.05, [0.001] * 60)
    r = comparison(b, b, 10.0)
    assert "Kept up" in r.verdict(b) and "The whole run's" not in r.verdict(b)


@pytest.mark.parametrize("w, c, why", [
    (W, LoaderConfig(num_workers=2, batch_size=4), "Each worker builds whole batches, 4 x 26 ms = 104 ms each, so "
                                                   "2 workers together deliver one batch every 52 ms against a 40 ms "
                                                   "step: about 3 workers would keep up."),
    (Workload(40, 100, 0, 10), LoaderConfig(num_workers=4, batch_size=4), "no worker count allowed here keeps up"),
    (Workload(40, 0, 20, 40), LoaderConfig(num_workers=4, batch_size=16), "The transforms need 320 ms of CPU per "
                                                                           "batch, and 2 cores give at best one batch "
                                                                           "every 160 ms against a 40 ms step: more "
                                                                           "workers than cores cannot help."),
    (W, DEFAULT_B, "By the bound the loaders should keep up"),
    (Workload(40, 25, 1, 0), DEFAULT_B, "With a 0 ms step there is nothing to hide loading behind"),
])
def test_still_starved_verdict_names_the_slowest_stage(w, c, why):
    b = synthetic_run(w, c, 0.3, [0.05] * 9)
    r = comparison(b, b, 10.0, load=3.0)
    text = r.verdict(b)
    assert b.steady_wait_fraction > STEADY_OK
    assert f"Still starved: from then on the main loop waited {b.steady_wait_fraction:.0%} of the time." in text
    assert why in text
    if "By the bound" in why:
        assert "load average 3.0 on 2 cores" in text


def test_default_pair_is_the_problem_and_the_fix():
    """The defaults by design: A loads 4 x 26 ms per 40 ms step; B's 4 workers need 26 ms per batch, under the
    step, and the CPU share is tiny, so the bound is step-limited. Then one real run: each sentence matches it."""
    load_ms = DEFAULT_B.batch_size * (W.io_ms + W.transform_ms)
    assert load_ms > W.step_ms, "without workers, loading outlasts the step"
    assert load_ms / DEFAULT_B.num_workers < W.step_ms and DEFAULT_B.batch_size * W.transform_ms / 2 < W.step_ms
    assert speedup_bound(W, DEFAULT_B, 2) == pytest.approx((load_ms + W.step_ms) / W.step_ms)
    r = compare(W, DEFAULT_A, DEFAULT_B)
    a, b = r.a, r.b
    assert a.starved_fraction > 0.5 and r.verdict(a).startswith("Starved")
    text = r.verdict(b)
    kept = b.steady_wait_fraction <= STEADY_OK
    assert ("Kept up" in text) == kept and ("Still starved" in text) == (not kept)
    assert f"{b.steady_wait_fraction:.0%} of the time" in text
    assert r.steady_speedup(b) > 1.5, "from the first batch on, 4 workers clearly beat loading in the main loop"
    numbers = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)x", text)]
    if kept:
        assert numbers[:2] == [round(r.steady_speedup(b), 1), round(r.bound(b), 1)]
    print(f"defaults on {r.cores} cores, load {r.load_average:.1f}: A starved {a.starved_fraction:.0%}; B starved "
          f"{b.starved_fraction:.0%}, first batch {1000 * b.first_batch_s:.0f} ms, steady wait "
          f"{b.steady_wait_fraction:.0%}, speedup {r.speedup(b):.2f}x, steady {r.steady_speedup(b):.2f}x, "
          f"bound {r.bound(b):.2f}x")
    assert math.isfinite(r.speedup(b))


def with_transforms(run: LoaderRun, ms: float, count: int = 9) -> LoaderRun:
    """The run with `count` measured transforms of `ms` each in worker 0 (its median_transform_ms)."""
    spans = tuple(Span("worker 0", "transform", i, i + ms / 1000, "") for i in range(count))
    return replace(run, spans=run.spans + spans)


def test_two_workers_on_two_cores_are_not_told_that_two_workers_would_keep_up():
    """The finding: 2 workers, 64% starved, told 'about 2 workers would keep up' from the nominal 20 ms while the
    run measured 48.6 ms per transform. On 2 cores the transforms need 80 ms of CPU per batch: at best one batch
    per 40 ms, the step itself; contended, they delivered one batch every 4 x 48.6 / 2 = 97 ms."""
    w, c = Workload(40, 0, 20, 40), LoaderConfig(num_workers=2, batch_size=4)
    b = with_transforms(synthetic_run(w, c, 0.3, [0.057] * 9), 48.6)
    assert b.median_transform_ms == pytest.approx(48.6)
    text = comparison(b, b, 10.0, load=3.4).verdict(b)
    assert "would keep up" not in text
    assert ("The transforms need 80 ms of CPU per batch, and 2 cores give at best one batch every 40 ms against a "
            "40 ms step, no faster than the step, with nothing to spare: more workers than cores cannot help.") in text
    assert ("Here each transform measured 48.6 ms against 20 ms on an idle core: 2 workers and the main process "
            "shared 2 cores (load average 3.4), so the workers delivered about one batch every 97 ms.") in text
    assert text.count("48.6 ms") == 1, "the slowdown clause does not say it twice"


@pytest.mark.parametrize("io_ms, nominal, measured, need", [(25, 5, 12.0, 4), (25, 5, 5.5, 4), (10, 1, 0.0, 2)])
def test_how_many_workers_would_keep_up_is_counted_from_the_measured_transform(io_ms, nominal, measured, need):
    w, c = Workload(40, io_ms, nominal, 40), LoaderConfig(num_workers=1, batch_size=4)
    b = synthetic_run(w, c, 0.3, [0.05] * 9)
    b = with_transforms(b, measured) if measured else b
    text = comparison(b, b, 10.0, load=3.0).verdict(b)
    per_sample = io_ms + (measured or nominal)
    load_ms = 4 * per_sample
    assert need == math.floor(load_ms / 40) + 1 and need > c.num_workers
    assert f"= {load_ms:.0f} ms each, so 1 workers together deliver one batch every {load_ms:.0f} ms" in text
    assert f"about {need} workers would keep up" in text
    assert ("as measured" in text) == bool(measured)
    assert ("against 5 ms on an idle core" in text) == (measured > 1.25 * nominal)


def test_a_slowdown_is_explained_from_the_runs_own_numbers():
    """Workers slower than none: the verdict says so, with the start-up share and the measured transform."""
    w, c = Workload(40, 0, 20, 10), LoaderConfig(num_workers=2, batch_size=4)
    b = synthetic_run(w, c, 0.4, [0.08] * 9)
    b = LoaderRun(w, c, 1, b.spans + (Span("worker 0", "transform", 0.0, 0.031, ""),), (), b.wall_s, b.starved_s,
                  b.epoch_startup_s, ())
    r = comparison(b, b, 1.3 * b.samples_per_s, load=3.4)
    text = r.verdict(b)
    assert r.speedup(b) < 1
    assert f"Overall {r.speedup(b):.2f}x: slower than loading in the main process" in text
    assert f"{b.first_batch_s / b.wall_s:.0%} of this run went to starting workers" in text
    assert "each transform measured 31.0 ms against 20 ms on an idle core" in text, "said once, by the bottleneck"
    assert text.count("31.0 ms") == 1
    assert "(load average 3.4)" in text
    fast = comparison(b, b, 0.5 * b.samples_per_s)
    assert "Overall" not in fast.verdict(b)
