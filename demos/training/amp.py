"""Mixed precision executed: which ops autocast ran in which dtype, time and memory vs float32, GradScaler."""

import math
import statistics
import time
from dataclasses import dataclass

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from demos.errors import InputError
from demos.guests import process_slot
from demos.parsing import parse_numbers, whole_in_range
from demos.style import COLORS, base_layout
from demos.training.common import HEADER, SPIRAL_SOURCE, SpiralNet, check_int, single_threaded, spiral

# Ops that only move or view data; the table keeps the ones that compute (and the casts autocast inserts).
_QUIET = {"detach", "t", "view", "lift_fresh", "alias", "_unsafe_view", "expand", "transpose", "unsqueeze",
          "squeeze", "reshape", "as_strided", "permute"}
MAX_SCALE_EXP = 40
MAX_AMP_STEPS = 200
MAX_HIDDEN, MAX_BATCH, MAX_REPS = 1024, 512, 6  # the largest measurement stays under 1 s on 2 cores


def amp_device() -> tuple[str, torch.dtype]:
    """float16 on CUDA when there is one; bfloat16 on CPU otherwise."""
    if torch.cuda.is_available():
        return "cuda", torch.float16
    return "cpu", torch.bfloat16


class _OpRecorder(TorchDispatchMode):
    """Records each aten op as it runs: name, input dtypes, output dtype."""

    def __init__(self):
        super().__init__()
        self.ops = []
        self.phase = "forward"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.__name__.split(".")[0]
        if name not in _QUIET:
            ins = sorted({str(a.dtype).replace("torch.", "") for a in args if torch.is_tensor(a)})
            first = out[0] if isinstance(out, (tuple, list)) and out else out
            dtype = str(first.dtype).replace("torch.", "") if torch.is_tensor(first) else "—"
            self.ops.append((self.phase, name, ", ".join(ins), dtype))
        return out


def _mlp(hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(hidden, hidden), nn.LayerNorm(hidden), nn.GELU(), nn.Linear(hidden, 10))


@dataclass(frozen=True)
class OpsResult:
    device: str
    dtype: str
    ops: tuple[tuple[str, str, str, str], ...]  # (phase, op, input dtypes, output dtype) in the order they ran
    code: str


@single_threaded
def autocast_ops(hidden: int = 32, batch: int = 8) -> OpsResult:
    """Run forward + loss + backward under autocast and record every computing op's dtypes while it runs."""
    check_int(hidden, "Hidden size", 4, 256)
    check_int(batch, "Batch", 1, 256)
    device, dtype = amp_device()
    torch.manual_seed(0)
    model = _mlp(hidden).to(device)
    x = torch.randn(batch, hidden, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    with _OpRecorder() as rec:
        with torch.autocast(device, dtype=dtype):
            out = model(x)
            loss = nn.functional.cross_entropy(out, y)
        rec.phase = "backward"
        loss.backward()
    ops = tuple(rec.ops)
    return OpsResult(device, str(dtype).replace("torch.", ""), ops, ops_code(device, dtype, hidden, batch,
                                                                             loss_dtypes(ops)))


def loss_dtypes(ops) -> str:
    """What cross_entropy's two ops wrote in the recorded forward: CPU autocast runs log_softmax in float32; CUDA
    autocast has no rule for cross_entropy, so its log_softmax keeps the autocast dtype and only nll_loss is
    float32."""
    forward = {op: out for phase, op, _, out in ops if phase == "forward"}
    return f"log_softmax ran in {forward.get('_log_softmax', 'no recorded dtype')}, " \
           f"nll_loss in {forward.get('nll_loss_forward', 'no recorded dtype')}"


def ops_code(device, dtype, hidden, batch, loss_note: str) -> str:
    return f"""import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode


class Recorder(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {{}}))
        first = out[0] if isinstance(out, (tuple, list)) else out
        print(func.__name__, [a.dtype for a in args if torch.is_tensor(a)], "->", getattr(first, "dtype", None))
        return out


torch.manual_seed(0)
model = nn.Sequential(nn.Linear({hidden}, {hidden}), nn.LayerNorm({hidden}), nn.GELU(), nn.Linear({hidden}, 10))
model = model.to("{device}")
x, y = torch.randn({batch}, {hidden}, device="{device}"), torch.randint(0, 10, ({batch},), device="{device}")
with Recorder():
    with torch.autocast("{device}", dtype={dtype}):
        out = model(x)                                  # linear layers run in {str(dtype).replace('torch.', '')}
        loss = nn.functional.cross_entropy(out, y)      # {loss_note}
    loss.backward()                                     # backward runs each op in its forward dtype
print(out.dtype, loss.dtype, model[0].weight.grad.dtype)   # parameters and their grads stay float32
"""


@dataclass(frozen=True)
class SpeedResult:
    device: str
    dtype: str
    hidden: int
    batch: int
    ms: dict  # "float32" / "autocast <dtype>" -> median milliseconds of forward + backward
    saved_bytes: dict  # same keys -> bytes autograd saved for backward
    code: str


def _saved_bytes(model, x, y, device, dtype) -> int:
    seen, total = set(), 0

    def pack(t):
        nonlocal total
        key = (t.untyped_storage().data_ptr(), t.dtype)
        if key not in seen:
            seen.add(key)
            total += t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
            loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return total


def _once_ms(model, x, y, device, dtype) -> float:
    model.zero_grad(set_to_none=True)
    start = time.perf_counter()
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1000


@single_threaded
@process_slot()  # seconds of CPU: one heavy run at a time on the server (demos.guests)
def measure(hidden: int = 512, batch: int = 256, reps: int = 5) -> SpeedResult:
    """Median forward + backward time and bytes saved for backward, float32 vs autocast, same model and data."""
    check_int(hidden, "Hidden size", 16, MAX_HIDDEN)
    check_int(batch, "Batch", 1, MAX_BATCH)
    check_int(reps, "Repeats", 1, MAX_REPS)
    device, dtype = amp_device()
    torch.manual_seed(0)
    model = nn.Sequential(_mlp(hidden)[:3], nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, 10)).to(device)
    x = torch.randn(batch, hidden, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    label = f"autocast {str(dtype).replace('torch.', '')}"
    times = {"float32": [], label: []}
    for rep in range(reps + 1):  # interleaved so both see the same machine load; rep 0 warms up
        for name, dt in (("float32", None), (label, dtype)):
            ms = _once_ms(model, x, y, device, dt)
            if rep:
                times[name].append(ms)
    ms = {name: statistics.median(t) for name, t in times.items()}
    saved = {"float32": _saved_bytes(model, x, y, device, None), label: _saved_bytes(model, x, y, device, dtype)}
    return SpeedResult(device, str(dtype), hidden, batch, ms, saved, measure_code(device, dtype, hidden, batch, reps))


def measure_code(device, dtype, hidden, batch, reps) -> str:
    return f"""import statistics, time
import torch
from torch import nn

torch.manual_seed(0)
h = {hidden}
model = nn.Sequential(nn.Linear(h, h), nn.LayerNorm(h), nn.GELU(), nn.Linear(h, h), nn.GELU(), nn.Linear(h, 10))
model = model.to("{device}")
x, y = torch.randn({batch}, h, device="{device}"), torch.randint(0, 10, ({batch},), device="{device}")
for name, dtype in (("float32", None), ("autocast", {dtype})):
    times = []
    for _ in range({reps} + 1):
        start = time.perf_counter()
        with torch.autocast("{device}", dtype=dtype, enabled=dtype is not None):
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        times.append((time.perf_counter() - start) * 1000)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        with torch.autocast("{device}", dtype=dtype, enabled=dtype is not None):
            nn.functional.cross_entropy(model(x), y)
    mib = sum({{t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in saved}}.values()) / 2**20
    print(name, f"{{statistics.median(times[1:]):.2f}} ms", f"saved for backward {{mib:.2f}} MiB")
"""


@dataclass(frozen=True)
class ScalerResult:
    steps: int
    init_scale: float
    growth_interval: int
    spikes: tuple[int, ...]
    scale_before: tuple[float, ...]
    scale_after: tuple[float, ...]
    skipped: tuple[bool, ...]  # optimizer.step() did not change the parameters
    losses: tuple[float, ...]
    bf16_losses: tuple[float, ...]  # the same loop under bfloat16 autocast with no scaler
    bf16_finite: bool  # every bfloat16 gradient was finite
    code: str


def parse_spikes(text: str, steps: int) -> tuple[int, ...]:
    """Steps at which the loss spikes (×1e9), e.g. '25, 60'; empty text means none."""
    if not str(text).strip():
        return ()
    values = parse_numbers(text, "Loss spike steps", min_count=1, max_count=10)
    return tuple(sorted({whole_in_range(v, f"Loss spike steps, entry {i + 1}", 0, steps - 1)
                         for i, v in enumerate(values)}))


def _spiral_setup(seed: int):
    torch.manual_seed(seed)
    x, y = spiral(256, seed)
    model = SpiralNet(16)
    return x, y, model, torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)


@single_threaded
def scaler_run(steps: int = 80, scale_exp: int = 24, growth_interval: int = 10, spikes_text: str = "40",
               seed: int = 0) -> ScalerResult:
    """Train under float16 autocast with a GradScaler; record its scale, skipped steps and growth."""
    check_int(steps, "Steps", 10, MAX_AMP_STEPS)
    check_int(scale_exp, "Initial scale exponent", 0, MAX_SCALE_EXP)
    check_int(growth_interval, "Growth interval", 1, 100)
    check_int(seed, "Seed", 0, 10_000)
    spikes = parse_spikes(spikes_text, steps)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x, y, model, opt = _spiral_setup(seed)
    model.to(device)
    x, y = x.to(device), y.to(device)
    scaler = torch.amp.GradScaler(device, init_scale=2.0**scale_exp, growth_interval=growth_interval)
    before, after, skipped, losses = [], [], [], []
    for step in range(steps):
        opt.zero_grad()
        with torch.autocast(device, dtype=torch.float16):
            loss = nn.functional.cross_entropy(model(x), y)
        if step in spikes:
            loss = loss * 1e9  # a bad batch: the scaled gradient cannot fit in float16
        old = [p.detach().clone() for p in model.parameters()]
        before.append(scaler.get_scale())
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        after.append(scaler.get_scale())
        skipped.append(all(torch.equal(o, p) for o, p in zip(old, model.parameters(), strict=True)))
        losses.append(loss.item() / (1e9 if step in spikes else 1))
    bf16_losses, finite = _bf16_run(steps, spikes, seed)
    code = scaler_code(steps, scale_exp, growth_interval, spikes, seed)
    return ScalerResult(steps, 2.0**scale_exp, growth_interval, spikes, tuple(before), tuple(after), tuple(skipped),
                        tuple(losses), bf16_losses, finite, code)


def _bf16_run(steps: int, spikes, seed: int) -> tuple[tuple[float, ...], bool]:
    """The same loop in bfloat16 without a scaler (spikes included): its range is float32's."""
    x, y, model, opt = _spiral_setup(seed)
    losses, finite = [], True
    for step in range(steps):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x), y)
        (loss * (1e9 if step in spikes else 1.0)).backward()
        finite &= all(torch.isfinite(p.grad).all().item() for p in model.parameters())
        if step not in spikes:  # a real loop would skip or clip a spike; here it is only checked for overflow
            opt.step()
        losses.append(loss.item())
    return tuple(losses), finite


def scaler_defaults() -> tuple[float, int]:
    """(init_scale, growth_interval) of a GradScaler built with no arguments, read from torch."""
    scaler = torch.amp.GradScaler("cpu")
    return scaler.get_scale(), scaler.get_growth_interval()


def scaler_contrast(scale_exp: int, growth_interval: int, steps: int) -> str:
    """The demo's scaler settings beside torch's defaults, and why they differ."""
    init, growth = scaler_defaults()
    return (f"Defaults: `GradScaler()` starts at init_scale {init:,.0f} (2^{math.log2(init):.0f}) and doubles only "
            f"after growth_interval {growth:,} clean steps. This demo starts at 2^{scale_exp} and grows every "
            f"{growth_interval} steps so that {steps} steps show both the halving on overflow and the growth back.")


def scaler_code(steps, scale_exp, growth_interval, spikes, seed) -> str:
    return HEADER + SPIRAL_SOURCE + f"""

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed({seed})
x, y = spiral(256, {seed})
model = SpiralNet(16).to(device)
x, y = x.to(device), y.to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
scaler = torch.amp.GradScaler(device, init_scale=2.0**{scale_exp}, growth_interval={growth_interval})
for step in range({steps}):
    opt.zero_grad()
    with torch.autocast(device, dtype=torch.float16):
        loss = nn.functional.cross_entropy(model(x), y)
    logged = loss.item()
    if step in {set(spikes) or "set()"}:
        loss = loss * 1e9                     # provoke an overflow on purpose
    scale = scaler.get_scale()
    scaler.scale(loss).backward()             # backward of loss × scale: small grads survive float16
    scaler.step(opt)                          # unscale; skip the step if any grad is inf/NaN
    scaler.update()                           # halve on overflow; double after {growth_interval} clean steps
    print(step, f"scale 2^{{math.log2(scale):g}} -> 2^{{math.log2(scaler.get_scale()):g}}", f"loss {{logged:.4g}}")
"""


@dataclass(frozen=True)
class RangeResult:
    rows: tuple[dict, ...]  # one per dtype: max, smallest normal, eps, and what some values become
    values: tuple[float, ...]


@single_threaded
def dtype_ranges(values_text: str = "1e-8, 3e-5, 1.001, 7e4") -> RangeResult:
    """torch.finfo of float16, bfloat16, float32, and what each chosen value becomes when cast."""
    values = parse_numbers(values_text, "Values to cast", min_count=1, max_count=6)
    for i, v in enumerate(values):
        if abs(v) > 1e38:
            raise InputError(f"Values to cast, entry {i + 1}: {v:g} is outside ±1e38 (about float32's range).")
    rows = []
    src = torch.tensor(values, dtype=torch.float64)
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        info = torch.finfo(dtype)
        row = {"dtype": str(dtype).replace("torch.", ""), "max": f"{info.max:.4g}",
               "smallest normal": f"{info.tiny:.4g}", "eps (step at 1.0)": f"{info.eps:.4g}"}
        cast = src.to(dtype).to(torch.float64).tolist()
        for v, c in zip(values, cast, strict=True):
            row[f"{v:g} →"] = f"{c:.6g}"
        rows.append(row)
    return RangeResult(tuple(rows), values)


# CUDA autocast runs these in float32 (torch.amp docs, "CUDA Ops that can autocast to float32"); CPU autocast does not
CUDA_FLOAT32_OPS = ("native_layer_norm", "layer_norm", "_softmax", "softmax", "exp", "sum", "pow", "norm")


def ops_caption(result: OpsResult) -> str:
    """What the recording shows: which computing ops ran low precision, which float32, and which list it was."""
    low = _op_names(result, result.dtype)
    high = _op_names(result, "float32")
    said = (f"Recorded while running by a TorchDispatchMode: every aten op with its input and output dtypes. In "
            f"{result.dtype}: {', '.join(low) or 'none'}. In float32: {', '.join(high) or 'none'}. `_to_copy` rows "
            "are the casts autocast inserted; parameters stay float32.")
    if result.device != "cpu":
        return said
    differ = [op for op in _op_names(result, result.dtype, phase="forward") if op in CUDA_FLOAT32_OPS]
    said += (" These are CPU autocast's op lists: CUDA autocast has its own (float16 by default), and they differ")
    if differ:
        return said + (f": on CUDA the forward {', '.join(differ)} would run in float32, not {result.dtype} as here "
                       "(autocast chooses forward ops only; backward follows the forward's dtypes).")
    return said + " (CUDA runs layer_norm, softmax, exp and sum in float32, for example)."


def _op_names(result: OpsResult, dtype: str, phase: str | None = None) -> list[str]:
    """Computing ops (casts and fills left out) whose output had this dtype, each named once, in order."""
    skip = ("_to_copy", "ones_like", "t", "view", "detach")
    return list(dict.fromkeys(op for ph, op, _, out in result.ops
                              if out == dtype and op not in skip and phase in (None, ph)))


def ops_table(result: OpsResult) -> list[dict]:
    """One row per recorded op, in the order it ran."""
    return [{"#": i, "phase": phase, "op (aten)": op, "inputs": ins, "output dtype": out}
            for i, (phase, op, ins, out) in enumerate(result.ops)]


def ops_figure(result: OpsResult) -> go.Figure:
    """How many computing ops produced each dtype, forward and backward side by side."""
    colors = {"float32": COLORS["parameter"], "bfloat16": COLORS["activation"], "float16": COLORS["activation"]}
    fig = go.Figure()
    dtypes = sorted({out for *_, out in result.ops})
    for dtype in dtypes:
        counts = [sum(1 for ph, _, _, out in result.ops if ph == phase and out == dtype)
                  for phase in ("forward", "backward")]
        fig.add_bar(x=["forward", "backward"], y=counts, name=dtype, text=counts, textposition="auto",
                    marker_color=colors.get(dtype, COLORS["idle"]))
    fig.update_yaxes(title="ops recorded")
    fig.update_layout(barmode="group")
    return base_layout(fig, height=280)


def scaler_figure(r: ScalerResult) -> go.Figure:
    """Top: the scale (log2) per step, skipped steps marked. Bottom: loss, float16 + scaler vs bfloat16."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.55, 0.45], vertical_spacing=0.08)
    steps = list(range(r.steps))
    fig.add_scatter(x=steps, y=[math.log2(s) for s in r.scale_before], mode="lines", line=dict(shape="hv", width=3,
                    color=COLORS["optimizer_state"]), name="log2(scale) used", row=1, col=1)
    skip = [i for i, s in enumerate(r.skipped) if s]
    fig.add_scatter(x=skip, y=[math.log2(r.scale_before[i]) for i in skip], mode="markers", name="step skipped",
                    marker=dict(color=COLORS["error"], size=10, symbol="x"), row=1, col=1)
    fig.add_scatter(x=steps, y=r.losses, mode="lines", name="loss (float16 + GradScaler)",
                    line=dict(color=COLORS["gradient"]), row=2, col=1)
    fig.add_scatter(x=steps, y=r.bf16_losses, mode="lines", name="loss (bfloat16, no scaler)",
                    line=dict(color=COLORS["activation"], dash="dash"), row=2, col=1)
    fig.update_yaxes(title="log2(scale)", row=1, col=1)
    fig.update_yaxes(title="loss", row=2, col=1)
    fig.update_xaxes(title="step", row=2, col=1)
    return base_layout(fig, height=440)


def speed_figure(r: SpeedResult) -> go.Figure:
    """Time and saved-for-backward memory, float32 vs autocast."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("forward + backward (median ms)", "saved for backward (MiB)"))
    names = list(r.ms)
    colors = [COLORS["parameter"], COLORS["activation"]]
    fig.add_bar(x=names, y=[r.ms[n] for n in names], marker_color=colors, showlegend=False,
                text=[f"{r.ms[n]:.2f}" for n in names], textposition="auto", row=1, col=1)
    fig.add_bar(x=names, y=[r.saved_bytes[n] / 2**20 for n in names], marker_color=colors, showlegend=False,
                text=[f"{r.saved_bytes[n] / 2**20:.2f}" for n in names], textposition="auto", row=1, col=2)
    return base_layout(fig, height=300)
