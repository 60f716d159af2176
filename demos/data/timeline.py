"""A real DataLoader run, timed from inside its workers and its main loop, drawn as a Gantt chart."""

import math
import os
import time
import warnings
from dataclasses import dataclass, field, replace
from functools import cache

from demos.data.workers import TimedDataset, transform
from demos.errors import InputError
from demos.shown import Script, entry, script
from demos.worker_runs import RunTimeout, worker_run

MAX_WORKERS = 4
MAX_BATCH = 16
MAX_PREFETCH = 4
MAX_SAMPLES = 64
MAX_IO_MS = 100
MAX_TRANSFORM_MS = 20
MAX_STEP_MS = 200
MAX_SETUP_MS = 500
SERIAL_BUDGET_MS = 1500  # the 0-worker run of a workload must fit in this
COMPARE_LIMIT_S = 15.0
STEADY_OK = 0.15  # a main loop that waits at most this share of the time after its first batch keeps up
MAIN = "main process"
MAIN_LOADING = "main (loading itself)"


@dataclass(frozen=True)
class Workload:
    """What one sample costs to load and what one training step costs in the main process."""

    # The page's defaults: a read-bound sample (25 ms of I/O, 1 ms of CPU) and a 40 ms step. Without workers the
    # main loop loads 4 x 26 ms per 40 ms step; 4 workers deliver a batch every 26 ms, under the step with room for
    # passing batches between processes even on a busy 2-core host (measured: 9-11% wait after the first batch).
    samples: int = 40
    io_ms: float = 25.0
    transform_ms: float = 1.0
    step_ms: float = 40.0
    setup_ms: float = 0.0  # once per process that loads samples (opening files, connecting to storage)


@dataclass(frozen=True)
class LoaderConfig:
    """The DataLoader settings being compared."""

    num_workers: int = 0
    batch_size: int = 4
    prefetch_factor: int = 2
    persistent_workers: bool = False
    pin_memory: bool = False

    @property
    def label(self) -> str:
        extra = f", prefetch {self.prefetch_factor}" if self.num_workers else ""
        extra += ", persistent" if self.persistent_workers and self.num_workers else ""
        extra += ", pin_memory" if self.pin_memory else ""
        return f"{self.num_workers} workers, batch {self.batch_size}{extra}"


DEFAULT_A = LoaderConfig(num_workers=0, batch_size=4)  # the page's default pair: the problem...
DEFAULT_B = LoaderConfig(num_workers=4, batch_size=4, prefetch_factor=2)  # ...and the fix
EPOCH_DEFAULT = LoaderConfig(num_workers=2, batch_size=4, prefetch_factor=2)  # the epoch-boundary section's loader
EPOCH_SETUP_MS = 300  # its per-worker setup: well above a worker's start-up from the warm fork server


@dataclass(frozen=True)
class Span:
    """One bar of the Gantt chart; times in seconds from the start of the run."""

    row: str
    kind: str  # startup, wait, step, io, transform
    start: float
    end: float
    text: str


@dataclass(frozen=True)
class LoaderRun:
    workload: Workload
    config: LoaderConfig
    epochs: int
    spans: tuple[Span, ...]
    loaded: tuple[tuple[int, int, int, int], ...]  # (epoch, sample index, worker id, pid) in arrival order
    wall_s: float
    starved_s: float
    epoch_startup_s: tuple[float, ...]  # iter(loader) to first batch, per epoch
    warnings: tuple[str, ...]

    @property
    def samples_per_s(self) -> float:
        return self.epochs * self.workload.samples / self.wall_s

    @property
    def starved_fraction(self) -> float:
        return self.starved_s / self.wall_s

    @property
    def first_batch_s(self) -> float:
        """iter(loader) to the first batch, over all epochs: worker start-up plus filling the pipeline."""
        return sum(self.epoch_startup_s)

    @property
    def steady_s(self) -> float:
        """The run from each epoch's first batch on."""
        return max(self.wall_s - self.first_batch_s, 1e-9)

    @property
    def steady_samples_per_s(self) -> float:
        """Samples per second from each epoch's first batch on, that batch's samples left out of the count too."""
        first = min(self.config.batch_size, self.workload.samples)
        return self.epochs * (self.workload.samples - first) / self.steady_s

    @property
    def steady_wait_fraction(self) -> float:
        """Share of the steady part the main loop waited for data (each epoch's first wait left out)."""
        waits, seen = 0.0, False
        for s in self.spans:
            if s.row != MAIN:
                continue
            if s.kind == "startup":
                seen = False
            elif s.kind == "wait":
                waits += (s.end - s.start) if seen else 0.0
                seen = True
        return waits / self.steady_s

    @property
    def median_transform_ms(self) -> float:
        ms = sorted(1000 * (s.end - s.start) for s in self.spans if s.kind == "transform")
        return ms[len(ms) // 2] if ms else 0.0


@dataclass(frozen=True)
class Comparison:
    a: LoaderRun
    b: LoaderRun
    baseline_samples_per_s: dict  # batch size -> samples/s of the same workload with 0 workers
    fork_server_s: float
    cores: int
    load_average: float  # 1-minute load average of the host right after the runs
    code: str
    baseline_steady_per_s: dict = field(default_factory=dict)  # batch size -> the 0-worker steady_samples_per_s

    def speedup(self, run: LoaderRun) -> float:
        return run.samples_per_s / self.baseline_samples_per_s[run.config.batch_size]

    def bound(self, run: LoaderRun) -> float:
        return speedup_bound(run.workload, run.config, self.cores)

    def steady_speedup(self, run: LoaderRun) -> float:
        """The run's rate from its first batch on, over the 0-worker run's rate measured the same way."""
        return run.steady_samples_per_s / self.baseline_steady_per_s[run.config.batch_size]

    def verdict(self, run: LoaderRun) -> str:
        """What this run's measurement shows, and why: a sentence built from its own numbers."""
        w, c, starved = run.workload, run.config, run.starved_fraction
        if c.num_workers == 0:
            return (f"Starved: without workers the main process loads every sample itself, so {starved:.0%} of "
                    f"the run went to loading (red) and {1 - starved:.0%} to training steps.")
        first_ms, steady = 1000 * run.first_batch_s, run.steady_wait_fraction
        fill = run.first_batch_s / run.wall_s
        opening = (f"The first batch came after {first_ms:.0f} ms (starting {c.num_workers} "
                   f"{'worker' if c.num_workers == 1 else 'workers'} and loading one batch), {fill:.0%} of the run.")
        if steady <= STEADY_OK:
            rest = (f" Kept up: from then on the main loop waited only {steady:.0%} of the time and trained at "
                    f"{self.steady_speedup(run):.1f}x the 0-worker rate (bound {self.bound(run):.1f}x).")
            if fill > STEADY_OK:
                rest += (f" The whole run's {self.speedup(run):.2f}x is lower because the first batch's wait is a "
                         "large share of this short run; an epoch of thousands of batches pays it once.")
                return opening + rest
            return opening + rest + self.slowdown(run)
        return (opening + f" Still starved: from then on the main loop waited {steady:.0%} of the time. "
                + bottleneck(w, c, self.cores, self.load_average, run.median_transform_ms)
                + self.slowdown(run, transform_said=contended(w, run.median_transform_ms)))

    def slowdown(self, run: LoaderRun, transform_said: bool = False) -> str:
        """Why a run with workers was slower than no workers at all, from its measurements ('' when it was not);
        the measured transform is left out when the sentence before already gave it."""
        speedup = self.speedup(run)
        if run.config.num_workers == 0 or speedup >= 1:
            return ""
        nominal, measured = run.workload.transform_ms, run.median_transform_ms
        text = (f" Overall {speedup:.2f}x: slower than loading in the main process, which pays no worker start-up "
                f"({run.first_batch_s / run.wall_s:.0%} of this run went to starting workers and the first batch)")
        if contended(run.workload, measured) and not transform_said:
            text += (f", and each transform took {measured:.1f} ms in the workers against {nominal:g} ms on an idle "
                     f"core: {run.config.num_workers} workers and the main process shared {self.cores} cores "
                     f"(load average {self.load_average:.1f})")
        return text + "; every batch also crosses from a worker to the main process."


def cores() -> int:
    """CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@cache
def ms_per_rep() -> float:
    """Milliseconds one transform repetition takes on one core here (best of three, measured once)."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        transform(200, 0)
        best = min(best, (time.perf_counter() - t0) * 1000 / 200)
    return best


def reps_for(transform_ms: float) -> int:
    return round(transform_ms / ms_per_rep()) if transform_ms > 0 else 0


def validate(workload: Workload, config: LoaderConfig, budget_ms: float = SERIAL_BUDGET_MS) -> None:
    """Raise InputError naming the first setting outside its limit."""
    _check_range("Samples", workload.samples, 4, MAX_SAMPLES)
    _check_range("I/O latency (ms)", workload.io_ms, 0, MAX_IO_MS)
    _check_range("CPU transform (ms)", workload.transform_ms, 0, MAX_TRANSFORM_MS)
    _check_range("Training step (ms)", workload.step_ms, 0, MAX_STEP_MS)
    _check_range("Per-worker setup (ms)", workload.setup_ms, 0, MAX_SETUP_MS)
    _check_range("num_workers", config.num_workers, 0, MAX_WORKERS)
    _check_range("batch_size", config.batch_size, 1, MAX_BATCH)
    _check_range("prefetch_factor", config.prefetch_factor, 1, MAX_PREFETCH)
    serial_ms = serial_estimate_ms(workload, config.batch_size)
    if serial_ms > budget_ms:
        raise InputError(
            f"These settings take about {serial_ms / 1000:.1f} s without workers; keep samples x (latency + "
            f"transform) + batches x step under {budget_ms / 1000:g} s."
        )


def _check_range(name: str, value, low, high) -> None:
    if not low <= value <= high:
        raise InputError(f"{name}: {value} is out of range; it must be from {low} to {high}.")


def sample_choices(io_ms: float, transform_ms: float, step_ms: float, batch_size: int) -> tuple[int, ...]:
    """The sample counts (multiples of 4) whose run without workers fits SERIAL_BUDGET_MS at this batch size.

    4 samples always fit (4 x (100 + 20) + 4 x 200 = 1280 ms at the limits), so the tuple is never empty.
    """
    return tuple(n for n in range(4, MAX_SAMPLES + 1, 4)
                 if serial_estimate_ms(Workload(n, io_ms, transform_ms, step_ms), batch_size) <= SERIAL_BUDGET_MS)


def default_samples(choices: tuple[int, ...], wanted: int = Workload.samples) -> int:
    """The wanted count if it fits, else the largest that does (choices run from 4 up in steps of 4)."""
    return min(wanted, choices[-1])


def default_workload() -> Workload:
    """The page's workload when nothing was moved: the default Workload, with as many of its samples as fit at the
    smallest default batch size."""
    w = Workload()
    smallest = min(DEFAULT_A.batch_size, DEFAULT_B.batch_size, EPOCH_DEFAULT.batch_size)
    return replace(w, samples=default_samples(sample_choices(w.io_ms, w.transform_ms, w.step_ms, smallest)))


def default_cases() -> tuple[tuple[Workload, LoaderConfig, LoaderConfig], tuple[Workload, LoaderConfig]]:
    """The arguments of the Workers tab's two default runs: compare(*first) and epoch_boundaries(*second)."""
    w = default_workload()
    return (w, DEFAULT_A, DEFAULT_B), (replace(w, setup_ms=float(EPOCH_SETUP_MS)), EPOCH_DEFAULT)


def serial_estimate_ms(w: Workload, batch_size: int) -> float:
    batches = -(-w.samples // batch_size)
    return w.samples * (w.io_ms + w.transform_ms) + batches * w.step_ms  # setup_ms: once, at most 0.5 s


def speedup_bound(w: Workload, c: LoaderConfig, n_cores: int) -> float:
    """Best steady-state speedup over 0 workers, capped by the step, the workers and the cores."""
    if c.num_workers == 0:
        return 1.0
    load_ms = c.batch_size * (w.io_ms + w.transform_ms)
    serial = load_ms + w.step_ms
    parallel = max(w.step_ms, load_ms / c.num_workers, c.batch_size * w.transform_ms / n_cores, 1e-9)
    return serial / parallel


def bottleneck(w: Workload, c: LoaderConfig, n_cores: int, load_average: float, measured_ms: float = 0.0) -> str:
    """Why a loader with workers still starves the step: the slowest stage, in numbers. `measured_ms` is the run's
    median transform per sample (0: not measured, the nominal cost stands in); a transform slower than nominal
    means the processes shared the cores, and the counts below use what was measured."""
    shared = f" Here {shared_cores(w, c, n_cores, load_average, measured_ms)}." if contended(w, measured_ms) else ""
    if w.step_ms == 0:
        return "With a 0 ms step there is nothing to hide loading behind: every batch is waited for." + shared
    cpu = c.batch_size * w.transform_ms / n_cores
    if cpu >= w.step_ms and cpu > 0:
        return cpu_bound(w, c, n_cores, load_average, measured_ms)
    transform = measured_ms or w.transform_ms
    load_ms = c.batch_size * (w.io_ms + transform)
    per_worker = load_ms / c.num_workers
    if per_worker >= w.step_ms and per_worker > 0:
        return too_few_workers(w, c, n_cores, load_average, measured_ms)
    busy = f" (load average {load_average:.1f} on {n_cores} cores)" if load_average > n_cores else ""
    return ("By the bound the loaders should keep up, so the waits are costs the bound leaves out: passing batches "
            f"between processes{', pinning them' if c.pin_memory else ''} and a busy host{busy}." + shared)


def contended(w: Workload, measured_ms: float) -> bool:
    """Whether the transform measured clearly slower than its cost on an idle core (the cores were shared)."""
    return w.transform_ms >= 1 and measured_ms > 1.25 * w.transform_ms


def shared_cores(w: Workload, c: LoaderConfig, n_cores: int, load_average: float, measured_ms: float) -> str:
    return (f"each transform measured {measured_ms:.1f} ms against {w.transform_ms:g} ms on an idle core: "
            f"{c.num_workers} {'worker' if c.num_workers == 1 else 'workers'} and the main process shared {n_cores} "
            f"cores (load average {load_average:.1f})")


def cpu_bound(w: Workload, c: LoaderConfig, n_cores: int, load_average: float, measured_ms: float) -> str:
    """The transforms alone need more CPU per batch than the cores give in one step."""
    cpu = c.batch_size * w.transform_ms / n_cores
    text = (f"The transforms need {c.batch_size * w.transform_ms:g} ms of CPU per batch, and {n_cores} cores give "
            f"at best one batch every {cpu:.0f} ms against a {w.step_ms:g} ms step"
            + (", no faster than the step, with nothing to spare" if cpu == w.step_ms else "")
            + ": more workers than cores cannot help.")
    if contended(w, measured_ms):
        lanes = min(c.num_workers, n_cores)
        text += (f" Here {shared_cores(w, c, n_cores, load_average, measured_ms)}, so the workers delivered about one "
                 f"batch every {c.batch_size * (w.io_ms + measured_ms) / lanes:.0f} ms.")
    return text


def too_few_workers(w: Workload, c: LoaderConfig, n_cores: int, load_average: float, measured_ms: float) -> str:
    """Each worker takes longer per batch than the step; how many would keep up, from the measured sample cost."""
    transform = measured_ms or w.transform_ms
    load_ms = c.batch_size * (w.io_ms + transform)
    need = math.floor(load_ms / w.step_ms) + 1  # strictly faster than the step
    more = (f"about {need} workers would keep up" + (" at the measured speed" if measured_ms else "")
            if need <= MAX_WORKERS else "no worker count allowed here keeps up; a longer step or cheaper samples would")
    cost = (f"({w.io_ms:g} ms read + {transform:.1f} ms transform, as measured)" if measured_ms
            else f"{w.io_ms + w.transform_ms:g} ms")
    text = (f"Each worker builds whole batches, {c.batch_size} x {cost} = {load_ms:.0f} ms each, so {c.num_workers} "
            f"workers together deliver one batch every {load_ms / c.num_workers:.0f} ms against a {w.step_ms:g} ms "
            f"step: {more}.")
    if contended(w, measured_ms):
        text += f" Here {shared_cores(w, c, n_cores, load_average, measured_ms)}."
    return text


def _loader_kwargs(c: LoaderConfig) -> dict:
    kwargs = dict(batch_size=c.batch_size, num_workers=c.num_workers, pin_memory=c.pin_memory)
    if c.num_workers:
        kwargs.update(prefetch_factor=c.prefetch_factor, persistent_workers=c.persistent_workers)
    return kwargs


def _record(run, w: Workload, c: LoaderConfig, epochs: int, fail_at: int = -1, hang_at: int = -1) -> LoaderRun:
    """Iterate a real DataLoader for `epochs`; main-loop spans timed here, sample spans timed in the workers."""
    dataset = TimedDataset(w.samples, w.io_ms, reps_for(w.transform_ms), fail_at=fail_at, hang_at=hang_at,
                           setup_ms=w.setup_ms)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loader = run.loader(dataset, **_loader_kwargs(c))
        spans, loaded, startups = [], [], []
        origin = time.perf_counter()
        for epoch in range(epochs):
            t_iter = time.perf_counter()
            it = run.iterate(loader)
            t_ready = time.perf_counter()
            spans.append(Span(MAIN, "startup", t_iter, t_ready, f"epoch {epoch}: iter(loader) starts workers"))
            first = True
            while True:
                t0 = time.perf_counter()
                try:
                    batch = next(it)
                except StopIteration:
                    break
                except Exception as err:  # a worker's exception arrives here re-raised with its own type
                    raise _loader_error(err, run.time_limit_s) from None
                t1 = time.perf_counter()
                if first:
                    startups.append(t1 - t_iter)
                    first = False
                spans.append(Span(MAIN, "wait", t0, t1, f"waiting for batch ({1000 * (t1 - t0):.1f} ms)"))
                time.sleep(w.step_ms / 1000)  # stands in for a GPU step: the CPU is free meanwhile
                t2 = time.perf_counter()
                spans.append(Span(MAIN, "step", t1, t2, f"training step ({1000 * (t2 - t1):.1f} ms)"))
                _add_sample_spans(batch, epoch, spans, loaded)
                run.check_deadline()
        end = time.perf_counter()
    shifted = tuple(replace(s, start=s.start - origin, end=s.end - origin) for s in spans)
    starved = sum(s.end - s.start for s in shifted if s.kind in ("startup", "wait"))
    notes = tuple(dict.fromkeys(str(m.message) for m in caught if "worker number rationality" not in str(m.message)))
    return LoaderRun(w, c, epochs, shifted, tuple(loaded), end - origin, starved, tuple(startups), notes)


def _add_sample_spans(batch: dict, epoch: int, spans: list, loaded: list) -> None:
    for index, worker, pid, (t0, t1, t2, s0, s1) in zip(
        batch["index"].tolist(), batch["worker"].tolist(), batch["pid"].tolist(), batch["t"].tolist(), strict=True
    ):
        row = MAIN_LOADING if worker < 0 else f"worker {worker}"
        if s1 > s0:
            spans.append(Span(row, "setup", s0, s1, f"epoch {epoch}: setup in this process "
                              f"({1000 * (s1 - s0):.0f} ms)"))
        spans.append(Span(row, "io", t0, t1, f"sample {index}: read ({1000 * (t1 - t0):.1f} ms)"))
        spans.append(Span(row, "transform", t1, t2, f"sample {index}: transform ({1000 * (t2 - t1):.1f} ms)"))
        loaded.append((epoch, index, worker, pid))


def _loader_error(err: Exception, limit_s: float) -> InputError:
    """A worker's failure or a batch that never came, as one sentence."""
    text = str(err).strip().splitlines()
    if "timed out" in str(err):
        return RunTimeout(f"A worker did not deliver a batch within the {limit_s:g} s limit; the run was stopped.")
    last = text[-1] if text else type(err).__name__  # the worker's own exception line
    return InputError(f"A DataLoader worker failed with {last.rstrip('.')}.")


def measure_loaders(w: Workload, configs: tuple[LoaderConfig, ...], epochs: int,
            time_limit_s: float) -> tuple[list[LoaderRun], float]:
    """Each configuration for `epochs` epochs, one after the other in one worker run (the server's process slot, a
    fork server with torch imported, a deadline, every worker stopped afterwards); and the fork server's start-up
    seconds, which no run's clock counts."""
    with worker_run(time_limit_s) as run:
        return [_record(run, w, c, epochs) for c in configs], run.startup_s


def record_run(w: Workload, c: LoaderConfig, epochs: int = 1, time_limit_s: float = 10.0,
               fail_at: int = -1, hang_at: int = -1) -> LoaderRun:
    """One validated DataLoader run under the process rules (slot, fork server, deadline, cleanup)."""
    validate(w, c)
    with worker_run(time_limit_s) as run:
        return _record(run, w, c, epochs, fail_at=fail_at, hang_at=hang_at)


@entry(Workload(samples=8, io_ms=5, transform_ms=1, step_ms=5), LoaderConfig(), LoaderConfig(num_workers=2),
       entries=16)
def compare(w: Workload, a: LoaderConfig, b: LoaderConfig, time_limit_s: float = COMPARE_LIMIT_S,
            budget_ms: float = SERIAL_BUDGET_MS) -> Comparison:
    """Two configurations on one workload, plus the 0-worker baseline each speedup is measured against."""
    validate(w, a, budget_ms)
    validate(w, b, budget_ms)
    (run_a, run_b), fork_server_s = measure_loaders(w, (a, b), 1, time_limit_s)
    zero = [r for r in (run_a, run_b) if r.config.num_workers == 0]
    sizes = sorted({a.batch_size, b.batch_size} - {r.config.batch_size for r in zero})
    if sizes:  # no workers: no fork server to start
        runs, _ = measure_loaders(w, tuple(LoaderConfig(batch_size=size) for size in sizes), 1, time_limit_s)
        zero += runs
    return Comparison(run_a, run_b, {r.config.batch_size: r.samples_per_s for r in zero}, fork_server_s, cores(),
                      os.getloadavg()[0], timeline_code(w, (a, b), 1, time_limit_s),
                      {r.config.batch_size: r.steady_samples_per_s for r in zero})


@dataclass(frozen=True)
class EpochRuns:
    off: LoaderRun  # persistent_workers=False
    on: LoaderRun  # persistent_workers=True
    code: str

    def setups(self, run: LoaderRun, epoch: int) -> int:
        """How many processes ran the dataset's setup in one epoch (measured: the setup spans of that epoch)."""
        return sum(1 for s in run.spans if s.kind == "setup" and s.text.startswith(f"epoch {epoch}:"))

    def sentence(self) -> str:
        """What the boundary cost each way, from the two runs' own numbers."""
        off_ms, on_ms = 1000 * self.off.epoch_startup_s[1], 1000 * self.on.epoch_startup_s[1]
        setup = self.off.workload.setup_ms
        text = (f"Epoch 1's first batch came after {off_ms:.0f} ms with persistent_workers=False: "
                f"{self.setups(self.off, 1)} new workers started and ran the dataset's {setup:g} ms setup again "
                f"before loading. With persistent_workers=True it came after {on_ms:.0f} ms: the epoch-0 workers "
                f"carried on (setups in epoch 1: {self.setups(self.on, 1)}) and only loaded a batch.")
        if on_ms < off_ms:
            return text + f" Persistent workers saved {off_ms - on_ms:.0f} ms at this boundary, every epoch."
        return text + (" Here persistent workers saved nothing measurable: with a setup this cheap, starting "
                       "workers from a warm fork server costs little, and the difference is noise.")


@entry(Workload(samples=8, io_ms=5, transform_ms=1, step_ms=5, setup_ms=50), LoaderConfig(num_workers=2), entries=16)
def epoch_boundaries(w: Workload, c: LoaderConfig, time_limit_s: float = COMPARE_LIMIT_S) -> EpochRuns:
    """Two epochs with persistent_workers off, then on: the start-up gap at the epoch boundary."""
    if c.num_workers == 0:
        raise InputError("persistent_workers needs num_workers of at least 1; choose 1 to 4 workers.")
    configs = replace(c, persistent_workers=False), replace(c, persistent_workers=True)
    validate(w, c)
    runs, _ = measure_loaders(w, configs, 2, time_limit_s)
    return EpochRuns(*runs, timeline_code(w, configs, 2, time_limit_s))


def timeline_code(w: Workload, configs: tuple[LoaderConfig, ...], epochs: int, time_limit_s: float) -> Script:
    """The code of measure_loaders for these settings: each configuration's samples/s, starved share, first batch."""
    return script(_loader_kwargs, _add_sample_spans, _record, measure_loaders, imports=TIMELINE_IMPORTS,
                  settings={"workload": w, "configs": configs, "epochs": epochs, "time_limit_s": time_limit_s},
                  run=TIMELINE_RUN)


TIMELINE_IMPORTS = """# Run from the repository root: it uses this app's worker run and timed dataset.
import time
import warnings
from dataclasses import replace

from demos.data.timeline import MAIN, MAIN_LOADING, LoaderConfig, LoaderRun, Span, Workload, _loader_error, reps_for
from demos.data.workers import TimedDataset
from demos.worker_runs import worker_run"""

TIMELINE_RUN = """if __name__ == "__main__":
    runs, fork_server_s = measure_loaders(workload, configs, epochs, time_limit_s)
    for r in runs:
        print(f"{r.config.label}: {len(r.loaded)} samples in {r.wall_s:.2f} s, {r.samples_per_s:.1f} samples/s, "
              f"starved {r.starved_fraction:.0%}, first batch after {1000 * r.first_batch_s:.0f} ms")"""


def io_bound_speedup(workers: int = 4) -> tuple[float, float]:
    """Benchmark helper: samples/s of an I/O-bound workload with `workers` workers and with 0 (in that order).

    Longer than the page allows (3.2 s without workers), so worker start-up does not dominate the ratio.
    """
    w = Workload(samples=64, io_ms=50.0, transform_ms=0.0, step_ms=0.0)
    result = compare(w, LoaderConfig(num_workers=workers, batch_size=4, prefetch_factor=2), LoaderConfig(batch_size=4),
                     time_limit_s=30.0, budget_ms=3500)
    return result.a.samples_per_s, result.b.samples_per_s

