"""Memory over time of real training steps: the op sequence runs under the storage tracker, the allocator
model turns its allocations into allocated and reserved bytes, and (with CUDA) the real allocator is read beside it.
"""

import functools
import gc
import json
import threading
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch

from demos.errors import InputError, quoted
from demos.guests import process_slot
from demos.memory.allocator import CachingAllocator, GiB, MiB, fmt_bytes, round_size
from demos.memory.autocast import SimulatedAutocast
from demos.memory.models import MODELS, build_model, loss_of, make_batch
from demos.memory.tracker import CATEGORIES, StorageTracker
from demos.shown import Script, entry, script

# cuDNN allocates a workspace inside each convolution (forward and backward) that no dispatch mode sees; its size
# depends on the algorithm cuDNN picks at run time. Estimate, fitted to one measurement: the Small CNN at batch
# 256 on an H200 (assets/gpu/memtruth.json, rows 19 and 21) peaked 11.1 MiB (fp32) and 10.6 MiB (bf16 autocast)
# above the dispatch-level count. A transient of 32.6 MiB (float32) or 23.9 MiB (16-bit) per convolution at that
# batch reproduces both peaks within 0.5% and leaves the checkpointed rows' peaks where they were (their peak is
# not in a convolution). Assumed proportional to batch: a guess for other batches and cards.
CONV_WORKSPACE_PER_SAMPLE = {4: 34_218_496 / 256, 2: 25_113_600 / 256}
CONV_WORKSPACE_SOURCE = ("estimated: fitted to the Small CNN at batch 256 on an H200 (assets/gpu/memtruth.json); "
                         "cuDNN picks its algorithm and workspace at run time")
CONV_OPS = ("convolution", "convolution_backward")

# What a card holds before a training step's first tensor, so that headroom is counted from capacity less these.
# Workspaces: cuBLAS keeps a 32 MiB workspace for each thread that runs a matmul (the step's thread and autograd's
# device thread) and cuBLASLt 1 MiB: 65 MiB, measured on an H200 with torch 2.11 (assets/gpu/probe_ws.txt, "=ws").
# They stay allocated, so the segments they sit in cannot be returned; how large those segments are depends on
# what was allocated before the workspaces were made. The probe's one measurement after a GPT-2 small step and
# empty_cache() ("=pin", "reserved at start") found them pinning two large segments (198 MiB and 148 MiB) and a
# 2 MiB one: 348 MiB, used here as an allowance for every model and card, not measured for them.
# CUDA context: an estimate, not measured in this project: the driver's per-process context and loaded kernels,
# outside memory_reserved(), typically 300 to 600 MiB with CUDA 12+ lazy module loading (nvidia-smi's per-process
# use minus memory_reserved()).
WORKSPACE_BYTES = 2 * 32 * MiB + 1 * MiB
WORKSPACE_ALLOWANCE = 364_904_448
CUDA_CONTEXT_ESTIMATE = 500 * MiB
OVERHEAD_SOURCE = ("the workspace allowance is one H200 measurement after a GPT-2 small step "
                   "(assets/gpu/probe_ws.txt), not of this model or card; the CUDA context is estimated "
                   "(typically 300 to 600 MiB with CUDA 12+ lazy loading, not measured here)")
MEMTRUTH = Path(__file__).resolve().parents[2] / "assets" / "gpu" / "memtruth_h200_after.json"

DTYPES = ("fp32", "bf16 weights", "bf16 autocast", "fp16 autocast")
OPTIMIZERS = ("SGD", "SGD momentum", "Adam")
# Cards at about the total_memory torch.cuda.get_device_properties(0) reports (a little under the label).
CARDS = {
    "T4 16 GB": 14.75 * GiB,
    "A10 24 GB": 22.06 * GiB,
    "A100 40 GB": 39.39 * GiB,
    "A100 80 GB": 79.15 * GiB,
    "H100 80 GB": 79.11 * GiB,
    "H200 141 GB": 139.72 * GiB,
}
MAX_BATCH = {"mlp": 4096, "cnn": 1024, "transformer": 64}
# Peak statistics are per process: two visitors' CUDA runs at once would read each other's peaks.
CUDA_RUN_LOCK = threading.Lock()
# A CUDA run starts only if the model's predicted reserved bytes, times this, plus FIT_SLACK fit in free memory:
# the slack covers what the model does not see (cuDNN and cuBLAS workspaces, the CUDA context's growth).
FIT_FACTOR, FIT_SLACK = 1.10, 512 * 2**20
MAX_SEQ = 2048
MAX_STEPS = 3
SWEEP_STEPS = 2  # a sweep point runs at most this many steps: from step 2 on, each step repeats step 2's peak
SWEEP_BUDGET_S = 60  # the worst sweep (GPT-2 XL, 4 variants x 2 batch sizes x 2 steps: 48 CPU-s measured) on 2 cores
SWEEP_LAYER_POINTS = 96  # a transformer sweep runs at most this many layers x batch sizes (2 or 3 sizes)
HEAVY_LAYER_STEPS = 48  # a run of at least this many layers x steps (seconds of CPU) waits for the run slot


@dataclass(frozen=True)
class RunSpec:
    model: str = "GPT-2 small (124M)"
    batch: int = 4
    seq_len: int = 256
    dtype: str = "fp32"
    optimizer: str = "Adam"
    checkpointing: bool = False
    set_to_none: bool = True
    steps: int = 2
    foreach: bool = True  # the optimizers' multi-tensor update; False is measured only to explain a peak in step()


def validate(spec: RunSpec) -> RunSpec:
    """Check every field; an InputError names the field and its limit."""
    if spec.model not in MODELS:
        raise InputError(f"Unknown model {quoted(spec.model)}; choose one of: {', '.join(MODELS)}.")
    kind = MODELS[spec.model].kind
    if not 1 <= spec.batch <= MAX_BATCH[kind]:
        raise InputError(f"Batch size must be between 1 and {MAX_BATCH[kind]} for this model; got {spec.batch}.")
    if kind == "transformer" and not 1 <= spec.seq_len <= MAX_SEQ:
        raise InputError(f"Sequence length must be between 1 and {MAX_SEQ}; got {spec.seq_len}.")
    if spec.dtype not in DTYPES:
        raise InputError(f"Unknown dtype {quoted(spec.dtype)}; choose one of: {', '.join(DTYPES)}.")
    if spec.optimizer not in OPTIMIZERS:
        raise InputError(f"Unknown optimizer {quoted(spec.optimizer)}; choose one of: {', '.join(OPTIMIZERS)}.")
    if not 1 <= spec.steps <= MAX_STEPS:
        raise InputError(f"Steps must be between 1 and {MAX_STEPS}; got {spec.steps}.")
    return spec


@dataclass(frozen=True)
class Holder:
    category: str
    op: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int

    @property
    def kind(self) -> str:
        """Shape and dtype of a tensor; a kernel's workspace is raw bytes, so it is named as one."""
        return "workspace (kernel-internal bytes)" if self.category == "workspace" else f"{self.shape} {self.dtype}"


@dataclass(frozen=True)
class Group:
    """Storages alive at the peak that share a category, the op that made them and a dtype."""

    category: str
    op: str
    dtype: str
    count: int
    nbytes: int  # allocator-rounded, as the peak counts them
    largest: tuple[int, ...]  # the shape of the largest one


@dataclass(frozen=True)
class Timeline:
    spec: RunSpec
    device: str  # "meta", "cpu" or "cuda"
    n_params: int
    param_bytes: int  # allocator-rounded
    op_index: tuple[int, ...]  # one entry per event
    by_category: dict[str, tuple[int, ...]]  # category -> bytes after each event
    total: tuple[int, ...]
    allocated: tuple[int, ...]  # allocator model
    reserved: tuple[int, ...]
    phases: tuple[tuple[str, int, int], ...]  # (name, first op, last op)
    peak_event: int
    peak_by_category: dict[str, int]
    peak_holders: tuple[Holder, ...]  # largest live storages at the peak
    peak_groups: tuple[Group, ...]  # every storage alive at the peak, grouped, largest group first
    category_peaks: dict[str, int]
    first_optimizer_state_op: int | None
    # CUDA only: (phase, op, allocated, reserved, max allocated), each minus its value when the run started
    measured: tuple[tuple[str, int, int, int, int], ...]
    code: Script
    baseline: tuple[int, int] = (0, 0)  # CUDA only: (allocated, reserved) when the run started, workspaces included

    @property
    def peak(self) -> int:
        return self.total[self.peak_event]

    @property
    def predicted_peak_allocated(self) -> int:
        return max(self.allocated) if self.allocated else 0


def _optimizer(name: str, params, foreach: bool = True):
    if name == "SGD":
        return torch.optim.SGD(params, lr=1e-3, foreach=foreach)
    if name == "SGD momentum":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=foreach)
    return torch.optim.Adam(params, lr=1e-3, foreach=foreach)


def _autocast(spec: RunSpec, device: str):
    """Real torch.autocast on CUDA; on meta/cpu the same cast policy applied by a function mode."""
    if "autocast" not in spec.dtype:
        return nullcontext()
    dtype = torch.bfloat16 if spec.dtype.startswith("bf16") else torch.float16
    if device == "cuda":
        return torch.autocast("cuda", dtype=dtype)
    return SimulatedAutocast(dtype)


def _forward(model, preset, spec, device, x, y):
    """Forward and loss; intermediate references die with this frame, so what survives is what autograd saved."""
    with _autocast(spec, device):
        return loss_of(model, preset, x, y)


def warm_cuda_workspaces() -> None:
    """Run a tiny matmul forward and backward so that cuBLAS and cuBLASLt allocate their workspaces now.

    cuBLAS keeps a 32 MiB workspace for each thread that has run a matmul (this thread, and autograd's device
    thread in backward), cuBLASLt 1 MiB; they stay allocated, so a run that made them would count them as its own.
    """
    w = torch.ones(8, 8, device="cuda", requires_grad=True)
    torch.nn.functional.linear(torch.ones(8, 8, device="cuda"), w, torch.ones(8, device="cuda")).sum().backward()
    torch.cuda.synchronize()


class _Measure:
    """Reads the real CUDA allocator at phase boundaries, relative to the start of the run (a no-op elsewhere)."""

    def __init__(self, device: str):
        self.on = device == "cuda"
        self.rows: list[tuple[str, int, int, int, int]] = []
        self.base = (0, 0)
        if self.on:
            warm_cuda_workspaces()
            gc.collect()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            self.base = (torch.cuda.memory_allocated(), torch.cuda.memory_reserved())

    def __call__(self, phase: str, op: int) -> None:
        if self.on:
            torch.cuda.synchronize()
            alloc, reserved = self.base
            self.rows.append((phase, op, torch.cuda.memory_allocated() - alloc,
                              torch.cuda.memory_reserved() - reserved, torch.cuda.max_memory_allocated() - alloc))


def conv_workspace(func, args) -> int:
    """Estimated cuDNN workspace of one convolution call (0 for other ops); see CONV_WORKSPACE_PER_SAMPLE."""
    if func.overloadpacket.__name__ not in CONV_OPS:
        return 0
    x = args[0]  # the input of a forward, grad_output of a backward: batch first either way
    per_sample = CONV_WORKSPACE_PER_SAMPLE.get(x.element_size(), CONV_WORKSPACE_PER_SAMPLE[4])
    return round(per_sample * x.shape[0])


def run_steps(spec: RunSpec, device: str = "meta", conv_workspace_estimate: bool | None = None,
              ) -> tuple[StorageTracker, list, int, _Measure]:
    """Build the model on `device` and run spec.steps real training steps under the tracker.

    The cuDNN workspace estimate is on by default for meta and CUDA runs (what a GPU would allocate), off on CPU.
    """
    preset = MODELS[spec.model]
    torch.manual_seed(0)
    estimate = device != "cpu" if conv_workspace_estimate is None else conv_workspace_estimate
    tracker = StorageTracker(device, conv_workspace if estimate else None)
    measure = _Measure(device)
    with torch.device(device):
        model = build_model(preset, spec.seq_len)
    if spec.dtype == "bf16 weights":
        model.to(torch.bfloat16)
    model.use_checkpoint = spec.checkpointing
    params = list(model.parameters())
    for p in params:
        tracker.tag(p, "parameter")
    x, y = make_batch(preset, spec.batch, spec.seq_len, device)
    if spec.dtype == "bf16 weights" and x.is_floating_point():
        x = x.to(torch.bfloat16)
    tracker.tag(x, "input")
    tracker.tag(y, "input")
    opt = _optimizer(spec.optimizer, params, spec.foreach)
    phases = []
    measure("setup", 0)
    with tracker:
        for step in range(spec.steps):
            start = tracker.op_index
            tracker.phase = f"forward {step + 1}"
            loss = _forward(model, preset, spec, device, x, y)
            tracker.tag_live("activation")
            phases.append((tracker.phase, start, tracker.op_index))
            measure(tracker.phase, tracker.op_index)
            start, tracker.phase = tracker.op_index, f"backward {step + 1}"
            loss.backward()
            del loss
            for p in params:
                if p.grad is not None:
                    tracker.tag(p.grad, "gradient")
            phases.append((tracker.phase, start, tracker.op_index))
            measure(tracker.phase, tracker.op_index)
            start, tracker.phase = tracker.op_index, f"optimizer {step + 1}"
            opt.step()
            for state in opt.state.values():
                for value in state.values():
                    if isinstance(value, torch.Tensor):
                        tracker.tag(value, "optimizer_state")
            phases.append((tracker.phase, start, tracker.op_index))
            measure(tracker.phase, tracker.op_index)
            start, tracker.phase = tracker.op_index, f"zero_grad {step + 1}"
            opt.zero_grad(set_to_none=spec.set_to_none)
            phases.append((tracker.phase, start, tracker.op_index))
            measure(tracker.phase, tracker.op_index)
    n_params = sum(p.numel() for p in params)
    del model, opt, params, x, y  # frees after the last step are not part of the timeline
    return tracker, phases, n_params, measure


def _replay(tracker: StorageTracker):
    """Walk the events: bytes per category, total, and the allocator model's allocated/reserved after each."""
    alloc = CachingAllocator()
    running = dict.fromkeys(CATEGORIES, 0)
    series = {c: [] for c in CATEGORIES}
    total, allocated, reserved, ops = [], [], [], []
    live: set[int] = set()
    best, best_i, best_live = -1, 0, set()
    for i, e in enumerate(tracker.events):
        running[tracker.category(e.sid)] += e.delta
        if e.delta > 0:
            alloc.malloc(str(e.sid), tracker.storages[e.sid].nbytes)
            live.add(e.sid)
        else:
            alloc.free(str(e.sid))
            live.discard(e.sid)
        for c in CATEGORIES:
            series[c].append(running[c])
        now = sum(running.values())
        total.append(now)
        allocated.append(alloc.allocated)
        reserved.append(alloc.reserved)
        ops.append(e.op_index)
        if now > best:
            best, best_i, best_live = now, i, set(live)
    return series, total, allocated, reserved, ops, best_i, best_live


def _holders(tracker: StorageTracker, sids: set[int], top: int = 8) -> tuple[Holder, ...]:
    rows = [tracker.storages[s] for s in sids]
    rows.sort(key=lambda s: (-s.nbytes, s.sid))
    return tuple(Holder(tracker.category(s.sid), s.op, s.shape, s.dtype, s.nbytes) for s in rows[:top])


def _groups(tracker: StorageTracker, sids: set[int]) -> tuple[Group, ...]:
    groups: dict[tuple[str, str, str], list] = {}
    for sid in sids:
        st = tracker.storages[sid]
        key = (tracker.category(sid), st.op.removesuffix(".default"), st.dtype)
        entry = groups.setdefault(key, [0, 0, (), -1])
        size = round_size(st.nbytes)
        entry[0] += 1
        entry[1] += size
        if size > entry[3]:
            entry[2], entry[3] = st.shape, size
    rows = [Group(*key, n, nbytes, shape) for key, (n, nbytes, shape, _) in groups.items()]
    return tuple(sorted(rows, key=lambda g: (-g.nbytes, g.category, g.op, g.dtype)))


def peak_phase(t: "Timeline") -> str:
    """The phase (forward 1, backward 2, optimizer 1, ...) that holds the peak."""
    op = t.op_index[t.peak_event]
    return next((name for name, first, last in t.phases if first < op <= last), "setup")


@entry(RunSpec(model="MLP (4 x 2048)", batch=16, steps=1), "meta", entries=16)  # a timeline holds megabytes
def simulate(spec: RunSpec, device: str = "meta", conv_workspace_estimate: bool | None = None) -> Timeline:
    """Run the steps on `device` ("meta": no memory used; "cpu"/"cuda": real tensors) and build the timeline."""
    validate(spec)
    with process_slot() if is_heavy(spec) else nullcontext(), CUDA_RUN_LOCK if device == "cuda" else nullcontext():
        tracker, phases, n_params, measure = run_steps(spec, device, conv_workspace_estimate)
    series, total, allocated, reserved, ops, peak_i, peak_live = _replay(tracker)
    param_bytes = sum(
        e.delta for e in tracker.events if e.delta > 0 and tracker.category(e.sid) == "parameter"
    )
    first_state = next(
        (e.op_index for e in tracker.events if e.delta > 0 and tracker.category(e.sid) == "optimizer_state"), None
    )
    return Timeline(
        spec=spec, device=device, n_params=n_params, param_bytes=param_bytes, op_index=tuple(ops),
        by_category={c: tuple(v) for c, v in series.items()}, total=tuple(total), allocated=tuple(allocated),
        reserved=tuple(reserved), phases=tuple(phases), peak_event=peak_i,
        peak_by_category={c: series[c][peak_i] for c in CATEGORIES},
        peak_holders=_holders(tracker, peak_live), peak_groups=_groups(tracker, peak_live),
        category_peaks={c: max(series[c], default=0) for c in CATEGORIES},
        first_optimizer_state_op=first_state, measured=tuple(measure.rows), code=snippet(spec),
        baseline=measure.base,
    )


def is_heavy(spec: RunSpec) -> bool:
    """Whether a run costs seconds of CPU (a tracked op costs the same on meta at any batch size, so the cost
    follows layers x steps): it then takes the server's run slot, one heavy run at a time."""
    return MODELS[spec.model].layers * spec.steps >= HEAVY_LAYER_STEPS


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "meta"


def gpu_fit(predicted: Timeline) -> str | None:
    """None if the steps predicted on meta fit the GPU's free memory with a margin; else the sentence why not."""
    free, total = torch.cuda.mem_get_info()
    need = int(max(predicted.reserved, default=0) * FIT_FACTOR) + FIT_SLACK
    if need <= free:
        return None
    return (f"These steps would need about {fmt_bytes(need)} on the GPU (predicted reserved plus "
            f"{round(100 * (FIT_FACTOR - 1))}% and {fmt_bytes(FIT_SLACK)} for workspaces), but only "
            f"{fmt_bytes(free)} of its {fmt_bytes(total)} are free, so they ran on meta tensors instead.")


def usable(capacity: float) -> float:
    """What a card leaves for the allocator's segments: capacity less the CUDA context estimate and the workspace
    allowance."""
    return capacity - CUDA_CONTEXT_ESTIMATE - WORKSPACE_ALLOWANCE


def headroom_sentence(t: "Timeline", card: str) -> str:
    """Where the timeline's headroom on `card` comes from, in the numbers the figure used, each named for what it
    is: a card's capacity, an estimate, an allowance from one measurement, and the allocator model's peak."""
    capacity, peak = CARDS[card], max(t.reserved)
    room = usable(capacity) - peak
    return (f"Headroom on the {card}: {fmt_bytes(capacity)} less the CUDA context (≈ "
            f"{fmt_bytes(CUDA_CONTEXT_ESTIMATE)}, an estimate), an allowance of {fmt_bytes(WORKSPACE_ALLOWANCE)} for "
            f"the segments holding the cuBLAS workspaces and the peak reserved (model) {fmt_bytes(peak)} leaves ≈ "
            f"{fmt_bytes(room)}" + (" (negative: OOM)" if room < 0 else "") + ". "
            f"The workspaces themselves are {fmt_bytes(WORKSPACE_BYTES)} on an H200 (32 MiB for each of the two "
            "threads that run matmuls, 1 MiB for cuBLASLt), but the segments they sit in stay reserved while they "
            "live, and how large those are depends on what was allocated before: the allowance is what they pinned "
            "in one H200 process after a GPT-2 small step (assets/gpu/probe_ws.txt), not measured for this model "
            "or card.")


@dataclass(frozen=True)
class ModelError:
    low_pct: float  # (predicted - measured) / measured, the lowest over the rows
    high_pct: float
    rows: int
    scope: str  # the model's name, or "all models" when none of the rows ran it


@functools.cache
def reserved_model_error(model: str) -> ModelError:
    """How far the allocator model's peak reserved was from max_memory_reserved() on an H200 (MEMTRUTH's rows):
    this model's rows, or every row where none ran it."""
    rows = json.loads(MEMTRUTH.read_text())["rows"]
    mine = [r for r in rows if r["spec"]["model"] == model]
    errs = [100 * (r["meta_pred_reserved"] - r["cuda_max_reserved"]) / r["cuda_max_reserved"] for r in mine or rows]
    return ModelError(min(errs), max(errs), len(errs), model if mine else "all models")


def sweep_variants(spec: RunSpec) -> dict[str, tuple[bool, str]]:
    """The sweep's four variants of spec, name -> (checkpointing, dtype): as chosen, +ckpt, +autocast, +both."""
    autocast = spec.dtype if "autocast" in spec.dtype else "bf16 autocast"
    plain = "fp32" if "autocast" in spec.dtype else spec.dtype
    return {
        plain: (False, plain),
        f"{plain} + checkpointing": (True, plain),
        autocast: (False, autocast),
        f"{autocast} + checkpointing": (True, autocast),
    }


def variant_spec(spec: RunSpec, name: str, batch: int) -> RunSpec:
    """The RunSpec one sweep point runs: variant `name` of spec at `batch`."""
    ckpt, dtype = sweep_variants(spec)[name]
    return RunSpec(spec.model, batch, spec.seq_len, dtype, spec.optimizer, ckpt, spec.set_to_none,
                   min(spec.steps, SWEEP_STEPS))


def sweep_point(spec: RunSpec, batch: int, run=simulate) -> tuple[int, ...]:
    """Peak reserved bytes (allocator model) of each of the sweep's four variants of spec at one batch size, in
    sweep_variants' order. Reserved, not allocated: segments are what fills the card. Holds the server's run slot.

    A page computes one point per batch size, so its progress bar follows the sweep and each point is kept."""
    validate(spec)
    with process_slot():
        return tuple(max(run(variant_spec(spec, name, batch), "meta").reserved) for name in sweep_variants(spec))


def peaks_by_variant(spec: RunSpec, points: tuple[tuple[int, ...], ...]) -> dict[str, tuple[int, ...]]:
    """The sweep's points (one per batch size, as sweep_point returns them) as one line per variant."""
    return {name: tuple(point[i] for point in points) for i, name in enumerate(sweep_variants(spec))}


def batch_sweep(spec: RunSpec, batches: tuple[int, ...], run=simulate,
                progress=lambda done: None) -> dict[str, tuple[int, ...]]:
    """Peak reserved bytes (allocator model) per batch size for four variants of spec: as chosen, +checkpointing,
    +autocast, +both: sweep_point at each size, progress(batch sizes done) after each. The whole sweep holds the
    server's run slot."""
    validate(spec)
    points = []
    with process_slot():
        for done, b in enumerate(batches, 1):
            points.append(sweep_point(spec, b, run))
            progress(done)
    return peaks_by_variant(spec, tuple(points))


def sweep_batches(spec: RunSpec) -> tuple[int, ...]:
    """Powers of two up to the model's batch limit, the largest few (two or three for transformers, whose
    tracked steps cost time in proportion to their layers)."""
    preset = MODELS[spec.model]
    kind = preset.kind
    points = max(2, min(3, SWEEP_LAYER_POINTS // preset.layers)) if kind == "transformer" else 7
    limit = MAX_BATCH[kind]
    sizes = [2**i for i in range(limit.bit_length()) if 2**i <= limit]
    return tuple(sizes[-points:]) if len(sizes) > points else tuple(sizes)


def largest_fitting(batches: tuple[int, ...], peaks: tuple[int, ...], capacity: float) -> float | None:
    """The largest batch under `capacity`, interpolating linearly between swept sizes (peak is affine in batch)."""
    fits = [i for i, p in enumerate(peaks) if p <= capacity]
    if not fits:
        return None
    i = fits[-1]
    if i == len(peaks) - 1:
        return float("inf")  # every swept size fits
    b0, b1, p0, p1 = batches[i], batches[i + 1], peaks[i], peaks[i + 1]
    return b0 + (capacity - p0) * (b1 - b0) / (p1 - p0)


def snippet(spec: RunSpec, card: str = next(iter(CARDS))) -> Script:
    """The training steps that made the timeline, run under the same tracker on meta tensors (CUDA where present),
    then the allocator model's replay and the headroom the peak leaves on `card`."""
    return script(run_steps, _replay, imports=TIMELINE_IMPORTS, settings={"spec": spec, "card": card},
                  run=TIMELINE_RUN)


def timeline_code(t: Timeline, card: str) -> Script:
    """The snippet of the run `t`, with the headroom read on `card`: the code that ran (simulate's own snippet, its
    entry point's), one setting changed."""
    code = snippet(t.spec, card)
    code.entry = t.code.entry
    return code


TIMELINE_IMPORTS = """# Run from the repository root: it uses this app's storage tracker and allocator model.
import torch

from demos.memory.allocator import CachingAllocator, fmt_bytes
from demos.memory.models import MODELS, build_model, make_batch
from demos.memory.tracker import CATEGORIES, StorageTracker
from demos.memory.training import CARDS, RunSpec, _forward, _Measure, _optimizer, conv_workspace, usable"""

TIMELINE_RUN = """device = "cuda" if torch.cuda.is_available() else "meta"  # meta tensors: no memory is used
tracker, phases, n_params, measure = run_steps(spec, device)
series, total, allocated, reserved, ops, peak, live = _replay(tracker)
print(f"{n_params / 1e6:,.1f} M parameters, peak (tracked tensors) {fmt_bytes(total[peak])} at op {ops[peak]}")
for category in CATEGORIES:
    print(f"  {category:16s} {series[category][peak] / 2**20:10.1f} MiB")
print(f"allocator model: peak allocated {fmt_bytes(max(allocated))}, peak reserved {fmt_bytes(max(reserved))}")
print(f"headroom on the {card}: {fmt_bytes(usable(CARDS[card]) - max(reserved))}")
for phase, _op, alloc, reserv, _peak in measure.rows:  # CUDA only: the real allocator at each phase's end
    print(f"  measured after {phase}: allocated {fmt_bytes(alloc)}, reserved {fmt_bytes(reserv)}")"""


@dataclass(frozen=True)
class LoggingTrap:
    kept_graph: tuple[int, ...]  # bytes the loop keeps after each batch: validation with grad on, summing loss tensors
    no_grad: tuple[int, ...]  # the same loop under torch.no_grad()
    parameter_bytes: int  # what both loops only read, left out of the counts: the model's parameters...
    batch_bytes: int  # ...and the batch (inputs and targets)
    model_name: str
    batch: int
    code: str


READ_ONLY = ("parameter", "input")  # what a validation loop reads but does not make: not counted as kept


def live_after_batches(model_name: str, batch: int, batches: int, grad: bool) -> dict:
    """Bytes (allocator-rounded) a validation loop that keeps summing loss tensors holds after each batch, besides
    the parameters and the batch it reads; and those two, counted once (every storage tagged before the loop)."""
    preset = MODELS[model_name]
    torch.manual_seed(0)
    tracker = StorageTracker("meta")
    with torch.device("meta"):
        model = build_model(preset, 64)
    x, y = make_batch(preset, batch, 64, "meta")
    for p in model.parameters():
        tracker.tag(p, "parameter")
    for t in (x, y):
        tracker.tag(t, "input")
    kept = []
    with tracker, torch.set_grad_enabled(grad):
        total = torch.zeros((), device="meta")
        for _ in range(batches):
            total = total + loss_of(model, preset, x, y)  # no backward: the graph stays attached to total
            kept.append(sum(round_size(tracker.storages[s].nbytes) for s in tracker.live_sids()
                            if tracker.category(s) not in READ_ONLY))
    read = {c: sum(round_size(tracker.storages[s].nbytes) for s in tracker.live_sids() if tracker.category(s) == c)
            for c in READ_ONLY}
    return {"kept": tuple(kept), "parameter_bytes": read["parameter"], "batch_bytes": read["input"]}


@entry("MLP (4 x 2048)", 32, 2)
def logging_trap(model_name: str = "MLP (4 x 2048)", batch: int = 256, batches: int = 3) -> LoggingTrap:
    """A validation loop that sums loss tensors with grad on keeps every batch's graph; under no_grad it does not."""
    validate(RunSpec(model=model_name, batch=batch))
    code = script(live_after_batches, imports=TRAP_IMPORTS,
                  settings={"model_name": model_name, "batch": batch, "batches": batches}, run=TRAP_RUN)
    trap, correct = (live_after_batches(model_name, batch, batches, grad) for grad in (True, False))
    return LoggingTrap(trap["kept"], correct["kept"], trap["parameter_bytes"], trap["batch_bytes"], model_name, batch,
                       code)


def trap_caption(trap: LoggingTrap) -> str:
    """What the trap's two metrics count, and what they leave out, in the trap's own numbers."""
    graph = trap.kept_graph[0] - trap.no_grad[0]  # one batch's graph: what the trap keeps beyond the total
    return (f"Both loops ran just now on meta tensors ({trap.model_name}, batch {trap.batch}) under the same tracker. "
            f"Kept = every storage alive after the batch except what both loops only read: the model's parameters "
            f"({fmt_bytes(trap.parameter_bytes)}, weights and biases) and the batch ({fmt_bytes(trap.batch_bytes)}). "
            f"The correct loop keeps only its running total ({fmt_bytes(trap.no_grad[-1])}: one scalar in the "
            f"allocator's smallest block); in the trap each kept loss tensor holds its whole graph, with every "
            f"activation it saved: {fmt_bytes(graph)} more per batch.")


TRAP_IMPORTS = """# Run from the repository root: it uses this app's storage tracker on meta tensors.
import torch

from demos.memory.allocator import fmt_bytes, round_size
from demos.memory.models import MODELS, build_model, loss_of, make_batch
from demos.memory.tracker import StorageTracker
from demos.memory.training import READ_ONLY"""

TRAP_RUN = """for name, grad in (("trap: grad on, total = total + loss", True), ("correct: torch.no_grad()", False)):
    live = live_after_batches(model_name, batch, batches, grad)
    kept = live["kept"]
    print(f"{name}: kept after {len(kept)} batches {fmt_bytes(kept[-1])}, +{fmt_bytes(kept[-1] - kept[0])}")
print(f"not counted, read by both: parameters {fmt_bytes(live['parameter_bytes'])}, "
      f"batch {fmt_bytes(live['batch_bytes'])}")"""


BENCH_CASES = {
    "default view timeline (GPT-2 small, B=4, T=256, Adam, 2 steps)": lambda: simulate(RunSpec()),
    "GPT-2 small step (B=8, T=1024, Adam, 1 step)": lambda: simulate(RunSpec(batch=8, seq_len=1024, steps=1)),
    "GPT-2 XL 1.5B step (B=1, T=1024, Adam, 1 step)": lambda: simulate(
        RunSpec(model="GPT-2 XL (1.5B)", batch=1, seq_len=1024, steps=1)),
    "one sweep point, 4 variants (GPT-2 small, B=8, T=256)": lambda: batch_sweep(RunSpec(), (8,)),
}
