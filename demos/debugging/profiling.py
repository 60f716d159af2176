"""torch.profiler on one training step: top ops by self time, the op timeline, and the Chrome trace."""

import os
import tempfile
import threading
from dataclasses import dataclass

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from demos.errors import InputError
from demos.shown import entry, script

PHASES = ("forward", "backward", "optimizer")
MAX_WIDTH, MAX_BATCH, TOP = 1024, 512, 12
_PROFILER_LOCK = threading.Lock()  # one profiler session per process


@dataclass(frozen=True)
class OpRow:
    name: str
    self_us: float
    total_us: float
    calls: int


@dataclass(frozen=True)
class Span:
    name: str
    start_us: float  # from the start of the step
    end_us: float
    depth: int  # nesting level on its thread: 0 = phase label
    phase: str  # which record_function label it ran under ('' outside them)


@dataclass(frozen=True)
class ProfileResult:
    width: int
    batch: int
    top_ops: tuple[OpRow, ...]
    spans: tuple[Span, ...]
    phase_us: dict  # phase -> duration in microseconds
    trace_json: bytes  # Chrome-trace JSON: open in https://ui.perfetto.dev or chrome://tracing
    code: str


def train_step(model, opt, x, y) -> None:
    """One step with a record_function label per phase: the labels appear in the table and the trace."""
    with record_function("forward"):
        loss = nn.functional.cross_entropy(model(x), y)
    with record_function("backward"):
        opt.zero_grad()
        loss.backward()
    with record_function("optimizer"):
        opt.step()


def _spans(events) -> list[Span]:
    """Events of the profiling thread as nested spans, each tagged with the phase it falls in."""
    main = [e for e in events if e.time_range.end > e.time_range.start]
    if not main:
        return []
    thread = next((e.thread for e in main if e.name in PHASES), main[0].thread)
    main = sorted((e for e in main if e.thread == thread), key=lambda e: (e.time_range.start, -e.time_range.end))
    t0 = min(e.time_range.start for e in main)
    phases = [(e.time_range.start, e.time_range.end, e.name) for e in main if e.name in PHASES]
    spans, stack = [], []
    for e in main:
        start, end = e.time_range.start, e.time_range.end
        while stack and stack[-1] <= start:
            stack.pop()
        phase = next((p for s, t, p in phases if s <= start and end <= t), "")
        spans.append(Span(e.name, start - t0, end - t0, len(stack), phase))
        stack.append(end)
    return spans


def profile_one_step(width: int, batch: int) -> dict:
    """Warm up once, then profile one training step of a 3-layer MLP on CPU."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                          nn.Linear(width, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(batch, width), torch.randint(0, 10, (batch,))
    train_step(model, opt, x, y)  # warm-up: the first step pays for lazy initialization
    with profile(activities=[ProfilerActivity.CPU]) as prof:  # add ProfilerActivity.CUDA on a GPU
        train_step(model, opt, x, y)
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)  # open in https://ui.perfetto.dev
        with open(path, "rb") as f:
            trace = f.read()
    finally:
        os.remove(path)
    rows = sorted(prof.key_averages(), key=lambda a: a.self_cpu_time_total, reverse=True)[:TOP]
    spans = _spans(list(prof.events()))
    return {"top_ops": tuple(OpRow(a.key, a.self_cpu_time_total, a.cpu_time_total, a.count) for a in rows),
            "spans": tuple(spans),
            "phase_us": {s.name: s.end_us - s.start_us for s in spans if s.name in PHASES and s.depth == 0},
            "trace_json": trace}


@entry(16, 8, entries=8)
def profile_step(width: int, batch: int) -> ProfileResult:
    """profile_one_step at the visitor's size, with the code that ran."""
    if not isinstance(width, int) or not 8 <= width <= MAX_WIDTH:
        raise InputError(f"Width must be between 8 and {MAX_WIDTH}; got {width}.")
    if not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
        raise InputError(f"Batch size must be between 1 and {MAX_BATCH}; got {batch}.")
    code = script(OpRow, Span, train_step, _spans, profile_one_step, imports=IMPORTS,
                  settings={"width": width, "batch": batch, "PHASES": PHASES, "TOP": TOP}, run=RUN)
    with _PROFILER_LOCK:
        try:
            return ProfileResult(width, batch, **profile_one_step(width, batch), code=code)
        except RuntimeError as err:  # another page's profiler session is running in this process
            raise InputError("The profiler is busy with another run on this server; try again in a moment.") from err


IMPORTS = """import os
import tempfile
from dataclasses import dataclass

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function"""

RUN = """step = profile_one_step(width, batch)
for op in step["top_ops"]:
    print(op)
print("phase_us:", step["phase_us"])"""


# Heavy cases for `python -m bench`: the largest step the widgets allow.
BENCH_CASES = {"profile one step: width 1024, batch 512": lambda: profile_step(MAX_WIDTH, MAX_BATCH)}
