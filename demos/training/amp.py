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
from demos.shown import Script, entry, script
from demos.style import COLORS, base_layout
from demos.threads import single_threaded
from demos.training.common import IMPORTS, SpiralNet, check_int, spiral

# Ops that only move or view data; the table keeps the ones that compute (and the casts autocast inserts).
QUIET_OPS = ("detach", "t", "view", "lift_fresh", "alias", "_unsafe_view", "expand", "transpose", "unsqueeze",
             "squeeze", "reshape", "as_strided", "permute")
MAX_SCALE_EXP = 40
MAX_AMP_STEPS = 200
MAX_HIDDEN, MAX_BATCH, MAX_REPS = 1024, 512, 6  # the largest measurement stays under 1 s on 2 cores


def amp_device() -> tuple[str, torch.dtype]:
    """float16 on CUDA when there is one; bfloat16 on CPU otherwise."""
    if torch.cuda.is_available():
        return "cuda", torch.float16
    return "cpu", torch.bfloat16


class OpRecorder(TorchDispatchMode):
    """Records each aten op as it runs: name, input dtypes, output dtype."""

    def __init__(self):
        super().__init__()
        self.ops = []
        self.phase = "forward"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.__name__.split(".")[0]
        if name not in QUIET_OPS:
            ins = sorted({str(a.dtype).replace("torch.", "") for a in args if torch.is_tensor(a)})
            first = out[0] if isinstance(out, (tuple, list)) and out else out
            dtype = str(first.dtype).replace("torch.", "") if torch.is_tensor(first) else "—"
            self.ops.append((self.phase, name, ", ".join(ins), dtype))
        return out


def mlp(hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(hidden, hidden), nn.LayerNorm(hidden), nn.GELU(), nn.Linear(hidden, 10))


@dataclass(frozen=True)
class OpsResult:
    device: str
    dtype: str
    ops: tuple[tuple[str, str, str, str], ...]  # (phase, op, input dtypes, output dtype) in the order they ran
    code: Script


@entry(8, 2)
@single_threaded
def autocast_ops(hidden: int = 32, batch: int = 8) -> OpsResult:
    """Run forward + loss + backward under autocast and record every computing op's dtypes while it runs."""
    check_int(hidden, "Hidden size", 4, 256)
    check_int(batch, "Batch", 1, 256)
    device, dtype = amp_device()
    ops, *_ = recorded_step(hidden, batch, device, dtype)
    return OpsResult(device, str(dtype).replace("torch.", ""), tuple(ops), ops_script(hidden, batch))


def recorded_step(hidden: int, batch: int, device: str, dtype: torch.dtype):
    """Forward + loss under autocast, then backward, recording every computing op's dtypes as it runs; the ops, and
    the dtypes of the output, the loss and a weight's gradient."""
    torch.manual_seed(0)
    model = mlp(hidden).to(device)
    x = torch.randn(batch, hidden, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    with OpRecorder() as rec:
        with torch.autocast(device, dtype=dtype):
            out = model(x)  # linear layers run in the autocast dtype
            loss = nn.functional.cross_entropy(out, y)
        rec.phase = "backward"
        loss.backward()  # backward runs each op in its forward dtype
    return rec.ops, out.dtype, loss.dtype, model[0].weight.grad.dtype


OPS_IMPORTS = "import torch\nfrom torch import nn\nfrom torch.utils._python_dispatch import TorchDispatchMode"


def ops_script(hidden: int, batch: int) -> Script:
    return script(amp_device, OpRecorder, mlp, recorded_step, imports=OPS_IMPORTS,
                  settings={"QUIET_OPS": QUIET_OPS, "hidden": hidden, "batch": batch}, run="""
device, dtype = amp_device()
ops, out_dtype, loss_dtype, grad_dtype = recorded_step(hidden, batch, device, dtype)
for phase, op, inputs, output in ops:
    print(phase, op, inputs, "->", output)
print(out_dtype, loss_dtype, grad_dtype)  # parameters and their grads stay float32""")


@dataclass(frozen=True)
class SpeedResult:
    device: str
    dtype: str
    hidden: int
    batch: int
    ms: dict  # "float32" / "autocast <dtype>" -> median milliseconds of forward + backward
    saved_bytes: dict  # same keys -> bytes autograd saved for backward
    code: Script


def saved_bytes(model, x, y, device, dtype) -> int:
    """Bytes autograd saves for backward of one forward + loss (each storage once); dtype None is float32."""
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


def once_ms(model, x, y, device, dtype) -> float:
    """Milliseconds of one forward + loss + backward; dtype None is float32."""
    model.zero_grad(set_to_none=True)
    start = time.perf_counter()
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1000


@entry(16, 4, 1)
@single_threaded
@process_slot()  # seconds of CPU: one heavy run at a time on the server (demos.guests)
def measure(hidden: int = 512, batch: int = 256, reps: int = 5) -> SpeedResult:
    """Median forward + backward time and bytes saved for backward, float32 vs autocast, same model and data."""
    check_int(hidden, "Hidden size", 16, MAX_HIDDEN)
    check_int(batch, "Batch", 1, MAX_BATCH)
    check_int(reps, "Repeats", 1, MAX_REPS)
    device, dtype = amp_device()
    ms, saved = float32_vs_autocast(hidden, batch, reps, device, dtype)
    return SpeedResult(device, str(dtype), hidden, batch, ms, saved, measure_script(hidden, batch, reps))


def float32_vs_autocast(hidden: int, batch: int, reps: int, device: str, dtype: torch.dtype):
    """Median milliseconds of forward + backward, and bytes saved for backward, float32 vs autocast."""
    torch.manual_seed(0)
    model = nn.Sequential(mlp(hidden)[:3], nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, 10)).to(device)
    x = torch.randn(batch, hidden, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    label = f"autocast {str(dtype).replace('torch.', '')}"
    times = {"float32": [], label: []}
    for rep in range(reps + 1):  # interleaved so both see the same machine load; rep 0 warms up
        for name, dt in (("float32", None), (label, dtype)):
            ms = once_ms(model, x, y, device, dt)
            if rep:
                times[name].append(ms)
    ms = {name: statistics.median(t) for name, t in times.items()}
    saved = {"float32": saved_bytes(model, x, y, device, None), label: saved_bytes(model, x, y, device, dtype)}
    return ms, saved


def measure_script(hidden: int, batch: int, reps: int) -> Script:
    return script(amp_device, mlp, once_ms, saved_bytes, float32_vs_autocast,
                  imports="import statistics\nimport time\n\nimport torch\nfrom torch import nn",
                  settings={"hidden": hidden, "batch": batch, "reps": reps}, run="""
ms, saved = float32_vs_autocast(hidden, batch, reps, *amp_device())
for name in ms:
    print(name, f"{ms[name]:.2f} ms", f"saved for backward {saved[name] / 2**20:.2f} MiB")""")


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
    code: Script


def parse_spikes(text: str, steps: int) -> tuple[int, ...]:
    """Steps at which the loss spikes (×1e9), e.g. '25, 60'; empty text means none."""
    if not str(text).strip():
        return ()
    values = parse_numbers(text, "Loss spike steps", min_count=1, max_count=10)
    return tuple(sorted({whole_in_range(v, f"Loss spike steps, entry {i + 1}", 0, steps - 1)
                         for i, v in enumerate(values)}))


def spiral_setup(seed: int):
    """The spiral data, classifier and SGD optimizer, from the seed."""
    torch.manual_seed(seed)
    x, y = spiral(256, seed)
    model = SpiralNet(16)
    return x, y, model, torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)


@entry(12, 20, 3, "5", 1)
@single_threaded
def scaler_run(steps: int = 80, scale_exp: int = 24, growth_interval: int = 10, spikes_text: str = "40",
               seed: int = 0) -> ScalerResult:
    """Train under float16 autocast with a GradScaler; record its scale, skipped steps and growth."""
    check_int(steps, "Steps", 10, MAX_AMP_STEPS)
    check_int(scale_exp, "Initial scale exponent", 0, MAX_SCALE_EXP)
    check_int(growth_interval, "Growth interval", 1, 100)
    check_int(seed, "Seed", 0, 10_000)
    spikes = parse_spikes(spikes_text, steps)
    history = train_with_scaler(steps, scale_exp, growth_interval, spikes, seed)
    before, after, skipped, losses = zip(*history, strict=True)
    bf16_losses, finite = bf16_run(steps, spikes, seed)
    code = scaler_script(steps, scale_exp, growth_interval, spikes, seed)
    return ScalerResult(steps, 2.0**scale_exp, growth_interval, spikes, before, after, skipped, losses, bf16_losses,
                        finite, code)


def train_with_scaler(steps: int, scale_exp: int, growth_interval: int, spikes, seed: int):
    """Float16 autocast training with a GradScaler, the loss multiplied by 1e9 at the `spikes` steps (a bad batch);
    per step: the scale before and after, whether optimizer.step() was skipped, and the loss."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x, y, model, opt = spiral_setup(seed)
    model.to(device)
    x, y = x.to(device), y.to(device)
    scaler = torch.amp.GradScaler(device, init_scale=2.0**scale_exp, growth_interval=growth_interval)
    history = []
    for step in range(steps):
        opt.zero_grad()
        with torch.autocast(device, dtype=torch.float16):
            loss = nn.functional.cross_entropy(model(x), y)
        logged = loss.item()
        if step in spikes:
            loss = loss * 1e9  # provoke an overflow: the scaled gradient cannot fit in float16
        old = [p.detach().clone() for p in model.parameters()]
        scale = scaler.get_scale()
        scaler.scale(loss).backward()  # backward of loss × scale: small grads survive float16
        scaler.step(opt)  # unscale; skip the step if any grad is inf/NaN
        scaler.update()  # halve on overflow; double after growth_interval clean steps
        skipped = all(torch.equal(o, p) for o, p in zip(old, model.parameters(), strict=True))
        history.append((scale, scaler.get_scale(), skipped, logged))
    return history


def bf16_run(steps: int, spikes, seed: int) -> tuple[tuple[float, ...], bool]:
    """The same loop in bfloat16 without a scaler (spikes included): its range is float32's."""
    x, y, model, opt = spiral_setup(seed)
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


def scaler_contrast(r: ScalerResult) -> str:
    """The demo's scaler settings beside torch's defaults, and what this run's scale did with them."""
    init, growth = scaler_defaults()
    return (f"Defaults: `GradScaler()` starts at init_scale {init:,.0f} (2^{math.log2(init):.0f}) and doubles only "
            f"after growth_interval {growth:,} clean steps. This demo starts at 2^{math.log2(r.init_scale):.0f} and "
            f"doubles after every {r.growth_interval} clean steps in a row: in these {r.steps} steps "
            f"{_halvings(r)} and {_doublings(r)}.")


def _halvings(r: ScalerResult) -> str:
    n = sum(after < before for before, after in zip(r.scale_before, r.scale_after, strict=True))
    return "no step overflowed, so the scale was never halved" if n == 0 else \
        f"the scale was halved {n} time{'s' if n > 1 else ''} (each on an overflow, its step skipped)"


def _doublings(r: ScalerResult) -> str:
    n = sum(after > before for before, after in zip(r.scale_before, r.scale_after, strict=True))
    return f"never doubled: no {r.growth_interval} clean steps came in a row" if n == 0 else \
        f"doubled {n} time{'s' if n > 1 else ''}"


def scaler_script(steps, scale_exp, growth_interval, spikes, seed) -> Script:
    return script(spiral, SpiralNet, spiral_setup, train_with_scaler, bf16_run, imports=IMPORTS,
                  settings={"steps": steps, "scale_exp": scale_exp, "growth_interval": growth_interval,
                            "spikes": spikes, "seed": seed}, run="""
history = train_with_scaler(steps, scale_exp, growth_interval, spikes, seed)
for step, (before, after, skipped, loss) in enumerate(history):
    print(step, f"scale 2^{math.log2(before):g} -> 2^{math.log2(after):g}", "skipped" if skipped else "", loss)
bf16_losses, finite = bf16_run(steps, spikes, seed)
print("bfloat16 without a scaler: every gradient finite:", finite)""")


@dataclass(frozen=True)
class RangeResult:
    rows: tuple[dict, ...]  # one per dtype: max, smallest normal, eps, and what some values become
    values: tuple[float, ...]
    bf16: tuple[float, ...] = ()  # each value cast to bfloat16 (and back to float64)
    f32: tuple[float, ...] = ()  # each value cast to float32


FLOAT32_MAX = torch.finfo(torch.float32).max


@single_threaded
def dtype_ranges(values_text: str = "1e-8, 3e-5, 1.001, 7e4") -> RangeResult:
    """torch.finfo of float16, bfloat16, float32, and what each chosen value becomes when cast."""
    values = parse_numbers(values_text, "Values to cast", min_count=1, max_count=6)
    for i, v in enumerate(values):
        if abs(v) > FLOAT32_MAX:
            raise InputError(f"Values to cast, entry {i + 1}: {v:g} is outside float32's range (±{FLOAT32_MAX:.4g}).")
    rows, casts = [], {}
    src = torch.tensor(values, dtype=torch.float64)
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        info = torch.finfo(dtype)
        row = {"dtype": str(dtype).replace("torch.", ""), "max": f"{info.max:.4g}",
               "smallest normal": f"{info.tiny:.4g}", "eps (step at 1.0)": f"{info.eps:.4g}"}
        cast = casts[dtype] = src.to(dtype).to(torch.float64).tolist()
        for v, c in zip(values, cast, strict=True):
            row[f"{v:g} →"] = f"{c:.6g}"
        rows.append(row)
    return RangeResult(tuple(rows), values, tuple(casts[torch.bfloat16]), tuple(casts[torch.float32]))


def range_edges(dtype: torch.dtype) -> tuple[float, float, float, float]:
    """(largest finite value, the smallest value that rounds to inf, smallest subnormal, the largest value that
    rounds to 0): round to nearest sends anything within half a gap of the largest value back to it, the half-gap
    point itself (a tie whose even neighbour is the overflow) to inf, and at most half the smallest subnormal to 0."""
    info = torch.finfo(dtype)
    top_gap = 2.0 ** math.floor(math.log2(info.max)) * info.eps
    subnormal = info.tiny * info.eps
    return info.max, info.max + top_gap / 2, subnormal, subnormal / 2


def ranges_caption(r: RangeResult) -> str:
    """Why float16 needs loss scaling and bfloat16 does not, with the edges where bfloat16 still differs from
    float32, and which of the visitor's values fall there."""
    f16_max, f16_inf, _, f16_zero = range_edges(torch.float16)
    bf_max, bf_inf, bf_sub, bf_zero = range_edges(torch.bfloat16)
    f32_sub = range_edges(torch.float32)[2]
    said = (f"float16 has 5 exponent bits: gradients of at most {_rounded(f16_zero, up=False)} underflow to 0, "
            "values below "
            f"{f16_inf:.0f} round to at most {f16_max:.0f} and values from {f16_inf:.0f} up become inf, hence loss "
            f"scaling. bfloat16 keeps float32's 8 exponent bits (fewer mantissa bits): every value from float32's "
            f"smallest normal, {torch.finfo(torch.float32).tiny:.3g}, up to {bf_max:.4g} keeps its magnitude, so "
            f"gradients need no scaling. Only the edges differ: float32 values from {_rounded(bf_inf, up=True)} up "
            f"(float32 goes to {FLOAT32_MAX:.4g}) become inf in bfloat16, and subnormals of at most "
            f"{_rounded(bf_zero, up=False)} become 0 "
            f"(bfloat16's smallest is {bf_sub:.2g}, float32's {f32_sub:.2g}).")
    return said + _edge_values(r)


def _rounded(value: float, up: bool, digits: int = 4) -> str:
    """A positive threshold to `digits` significant digits, rounded away from the side the sentence puts it on: a
    value 'from X up' rounds up, 'at most X' down, so the shown X is still on the right side of the threshold."""
    step = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    return f"{(math.ceil if up else math.floor)(value / step) * step:.{digits}g}"


def _edge_values(r: RangeResult) -> str:
    """Which typed values bfloat16 turns into 0 or inf while float32 keeps them ('' when none)."""
    lost = [f"{v:g} becomes {'0' if b == 0 else 'inf'}" for v, b, f in zip(r.values, r.bf16, r.f32, strict=True)
            if (b == 0 or math.isinf(b)) and f != 0 and not math.isinf(f)]
    return f" Here: {', '.join(lost)} in bfloat16, and not in float32." if lost else ""


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
