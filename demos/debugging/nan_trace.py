"""NaN tracing: a planted NaN source, found by detect_anomaly (backward) and by forward hooks (forward).

Each planted op and its fix is a function of its own, so the page shows their source: the lines that ran."""

import math
import re
import threading
import traceback
import warnings
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from demos.errors import InputError, quoted
from demos.shown import entry, print_each, script
from demos.shown import source as shown_source

SOURCES = ("log_zero", "div_zero", "sqrt_negative", "fp16_overflow")
SOURCE_LABELS = {
    "log_zero": "log of zero (h · log h)",
    "div_zero": "division by zero (row sum)",
    "sqrt_negative": "sqrt of a negative",
    "fp16_overflow": "fp16 overflow (exp)",
}
EXPECTED_NODE = {"log_zero": "LogBackward0", "div_zero": "DivBackward0", "sqrt_negative": "SqrtBackward0",
                 "fp16_overflow": "DivBackward0"}
THIS_FILE = globals().get("__file__", "<string>")  # the file whose lines the traces name (`python -c` has none)
_ANOMALY_LOCK = threading.Lock()  # anomaly mode is process-wide: one traced run at a time


def log_zero(h):
    return h * torch.log(h)


def log_zero_fixed(h):
    return h * torch.log(h.clamp_min(1e-12))  # log never sees 0


def div_zero(h):
    return h / h.sum(dim=1, keepdim=True)


def div_zero_fixed(h):
    return h / h.sum(dim=1, keepdim=True).clamp_min(1e-12)


def sqrt_negative(h):
    return torch.sqrt(h - h.mean(dim=1, keepdim=True))


def sqrt_negative_fixed(h):
    return torch.sqrt((h - h.mean(dim=1, keepdim=True)).clamp_min(0) + 1e-12)


def fp16_overflow(h):
    e = torch.exp(h.half() * 100)  # float16 tops out at 65504
    return (e / e.sum(dim=1, keepdim=True)).float()


def fp16_overflow_fixed(h):
    return torch.softmax(h.float() * 100, dim=1)  # subtracts the max first, in float32


PLANTED = {  # source -> (the planted op, its fix): the page shows the source of both
    "log_zero": (log_zero, log_zero_fixed),
    "div_zero": (div_zero, div_zero_fixed),
    "sqrt_negative": (sqrt_negative, sqrt_negative_fixed),
    "fp16_overflow": (fp16_overflow, fp16_overflow_fixed),
}


def planted_sources(source: str) -> tuple[str, str]:
    """The source of the planted op and of its fix, as they run inside Planted.forward."""
    return tuple(shown_source(fn) for fn in PLANTED[source])


class Planted(nn.Module):
    """The op under suspicion; `fixed` swaps in the safe version of the same computation."""

    def __init__(self, source: str, fixed: bool = False):
        super().__init__()
        self.source, self.fixed = source, fixed

    def forward(self, h):
        planted, safe = PLANTED[self.source]
        return safe(h) if self.fixed else planted(h)


class NaNNet(nn.Module):
    """encoder -> relu -> planted; the loss is the mean of the planted output."""

    def __init__(self, source: str, fixed: bool = False):
        super().__init__()
        self.encoder = nn.Linear(8, 16, bias=False)
        self.act = nn.ReLU()
        self.planted = Planted(source, fixed)

    def forward(self, x):
        return self.planted(self.act(self.encoder(x)))


@dataclass(frozen=True)
class HookRow:
    module: str
    kind: str
    finite: bool
    nonfinite: int  # entries that are nan or inf
    numel: int


@dataclass(frozen=True)
class OpRow:
    op: str  # the aten op, e.g. aten.exp.default
    nonfinite: int  # entries of its output that are nan or inf
    nan: int  # of those, the nan entries (the rest are inf)
    numel: int
    inputs_nonfinite: int  # non-finite entries among its inputs: 0 means this op made them
    line: str  # the source line in this file that called it


@dataclass(frozen=True)
class NaNTrace:
    source: str
    loss: float
    node: str  # the backward node anomaly mode named, '' if none
    error: str  # the RuntimeError text
    traceback: str  # the forward traceback anomaly mode printed, paths shortened
    hook_rows: tuple[HookRow, ...]  # every module in call order, up to and including the first non-finite
    first_bad: str  # module name the forward-hook tracer names, '' if all finite
    origin: OpRow | None  # the first op whose output is not finite, from the op-level forward tracer
    fixed_loss: float
    fixed_grads_finite: bool
    code: str


def make_batch(seed: int = 0) -> torch.Tensor:
    """A seeded batch whose first row is all zeros, like a padded row."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(6, 8, generator=g)
    x[0] = 0
    return x


def build(source: str, fixed: bool = False, seed: int = 0) -> NaNNet:
    torch.manual_seed(seed)
    return NaNNet(source, fixed)


def hook_trace(model: nn.Module, x: torch.Tensor) -> tuple[list[HookRow], str]:
    """Forward hooks on every submodule: record each output, and name the first that is not finite."""
    rows: list[HookRow] = []

    def record(name):
        def hook(module, args, output):
            bad = int((~torch.isfinite(output)).sum())
            rows.append(HookRow(name, type(module).__name__, bad == 0, bad, output.numel()))
        return hook

    handles = [m.register_forward_hook(record(n)) for n, m in model.named_modules() if n]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()  # hooks left behind pile up on every later call
    first = next((r.module for r in rows if not r.finite), "")
    shown = rows[: next((i + 1 for i, r in enumerate(rows) if not r.finite), len(rows))]
    return shown, first


class _FirstNonFinite(TorchDispatchMode):
    """Checks every op's output as it runs and keeps the first one that is not finite (with its source line)."""

    def __init__(self):
        super().__init__()
        self.first: OpRow | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.first is None:
            outs = [t for t in (out if isinstance(out, tuple | list) else (out,))
                    if isinstance(t, torch.Tensor) and t.is_floating_point()]
            bad = sum(int((~torch.isfinite(t)).sum()) for t in outs)
            if bad:
                ins = [a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
                frames = [f for f in traceback.extract_stack()  # the innermost line of this file that ran the op
                          if f.filename == THIS_FILE and f.name != "__torch_dispatch__"]
                nan = sum(int(t.isnan().sum()) for t in outs)
                self.first = OpRow(str(func), bad, nan, sum(t.numel() for t in outs),
                                   sum(int((~torch.isfinite(a)).sum()) for a in ins),
                                   (frames[-1].line or "").split("#")[0].strip() if frames else "")
        return out


def op_trace(model: nn.Module, x: torch.Tensor) -> OpRow | None:
    """The forward op that first produced a non-finite value: the origin, which anomaly mode does not name."""
    with torch.no_grad(), _FirstNonFinite() as mode:
        model(x)
    return mode.first


def op_name(op: str) -> str:
    """`aten.exp.default` -> `exp`; `DivBackward0` -> `div`: the op both tracers talk about."""
    if op.endswith(tuple(f"Backward{i}" for i in range(10))):
        return re.sub(r"Backward\d+$", "", op).lower()
    return op.split(".")[1] if op.startswith("aten.") else op


def anomaly_vs_origin(r: "NaNTrace") -> str:
    """Why anomaly mode named the node it named, from this run: compare it with the op-level tracer's origin."""
    if not r.node or r.origin is None:
        return ""
    o = r.origin
    kinds = ", ".join(f"{k} {w}" for k, w in ((o.nonfinite - o.nan, "infinite"), (o.nan, "NaN")) if k)
    made = ("from finite inputs, so it is where the first non-finite value appeared" if o.inputs_nonfinite == 0
            else f"but {o.inputs_nonfinite} of its inputs were already non-finite")
    origin = (f"The op-level forward tracer (a `TorchDispatchMode` checking every op's output) finds the first "
              f"non-finite output at `{o.op}` (`{o.line}`): {kinds} of its {o.numel} values, {made}.")
    if op_name(r.node) == op_name(o.op):
        return (f"`detect_anomaly` names `{r.node}`, the first backward node that returned NaN. {origin} Here both "
                f"point at the same op, `{op_name(o.op)}`.")
    only_inf = " It produced infinities, not NaN, and anomaly mode only checks for NaN." if o.nan == 0 else ""
    return (f"`detect_anomaly` names `{r.node}`: the first backward node that returned NaN, not where the bad values "
            f"began. {origin}{only_inf} So the NaN that stopped the backward at `{r.node}` grew from "
            f"`{op_name(o.op)}`'s output: fix the origin, not the node anomaly mode names.")


def _short_traceback(text: str) -> str:
    """The forward traceback from anomaly mode, frames only, paths relative to the project."""
    body = text.split("Traceback of forward call that caused the error:", 1)[-1]
    body = body.split("(Triggered internally", 1)[0]
    root = THIS_FILE.rsplit("/demos/", 1)[0] + "/"
    lines = [ln.replace(root, "") for ln in body.strip("\n").splitlines() if ln.strip()]
    start = next((i for i, ln in enumerate(lines) if ln.rstrip().endswith("in forward")), 0)
    lines = lines[start:]
    keep = []
    for i, ln in enumerate(lines):  # keep only frames from this project: the library's own are noise here
        if ln.strip().startswith("File ") and "site-packages" not in ln and "/lib/python" not in ln:
            keep.append(ln.strip())
            if i + 1 < len(lines) and not lines[i + 1].strip().startswith("File "):
                keep.append("    " + lines[i + 1].strip())
    return "\n".join(keep)


def anomaly_run(model: nn.Module, x: torch.Tensor) -> tuple[float, str, str, str]:
    """Forward and backward under detect_anomaly; returns loss, node name, error text, forward traceback."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autograd.detect_anomaly():
                loss = model(x).mean()
                loss.backward()
        except RuntimeError as err:
            message = str(err)
            node = re.search(r"Function '(\w+)' returned nan", message)
            trace = next((str(w.message) for w in caught if "Traceback of forward call" in str(w.message)), "")
            return loss.item(), node.group(1) if node else "", message, _short_traceback(trace)
    return loss.item(), "", "", ""


def find_nan(source: str) -> dict:
    """Plant a NaN source, find it three ways (anomaly mode, forward hooks, an op-level tracer), then run the fix."""
    model = build(source)
    x = make_batch()
    loss, node, error, tb = anomaly_run(model, x)
    rows, first = hook_trace(model, x)
    origin = op_trace(model, x)
    fixed = build(source, fixed=True)
    fixed_loss = fixed(x).mean()
    fixed_loss.backward()
    h = fixed.act(fixed.encoder(x)).detach().requires_grad_()  # also check the op's own input gradient:
    fixed.planted(h).mean().backward()  # the ReLU before it would otherwise mask a nan at the zeros
    grads_ok = torch.isfinite(h.grad).all().item() and all(torch.isfinite(p.grad).all().item()
                                                            for p in fixed.parameters())
    return {"source": source, "loss": loss, "node": node, "error": error, "traceback": tb,
            "hook_rows": tuple(rows), "first_bad": first, "origin": origin, "fixed_loss": fixed_loss.item(),
            "fixed_grads_finite": grads_ok and math.isfinite(fixed_loss.item())}


@entry("fp16_overflow")
def trace_nan(source: str) -> NaNTrace:
    """find_nan for one planted source, with the code that ran."""
    if source not in SOURCES:
        raise InputError(f"The NaN source must be one of {', '.join(SOURCES)}; got {quoted(source)}.")
    planted, fixed = PLANTED[source]
    code = script(planted, fixed, Planted, NaNNet, HookRow, OpRow, make_batch, build, hook_trace, _FirstNonFinite,
                  op_trace, _short_traceback, anomaly_run, find_nan, imports=IMPORTS, settings={"source": source},
                  run=f"PLANTED = {{source: ({planted.__name__}, {fixed.__name__})}}  # the planted op and its fix\n\n"
                  + print_each("find_nan(source)"))
    with _ANOMALY_LOCK:  # anomaly mode is process-wide
        return NaNTrace(**find_nan(source), code=code)


IMPORTS = """import math
import re
import traceback
import warnings
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

THIS_FILE = globals().get("__file__", "<string>")  # the file whose lines the traces name (`python -c` has none)"""
