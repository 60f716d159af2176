"""Section 3: one computation under grad mode, no_grad, detach, inference_mode and requires_grad_(False)."""

import time
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from demos.errors import InputError
from demos.style import COLORS, base_layout

MIN_N, MAX_N = 16, 512
MODES = ("grad enabled", "torch.no_grad()", "W.detach()", "torch.inference_mode()", "W.requires_grad_(False)")


@dataclass(frozen=True)
class ModesResult:
    n: int
    table: pd.DataFrame
    saved_bytes: tuple[int, ...]
    forward_ms: tuple[float, ...]
    code: str


@dataclass(frozen=True)
class SharingResult:
    before: float
    detached_after: float
    original_after: float
    same_storage: bool
    version_before: int
    version_after: int
    clone_original_after: float
    code: str


@dataclass(frozen=True)
class VersionResult:
    version_before: int
    version_after: int
    trap_error: str
    correct_grad: tuple[float, ...]
    code: str


def _forward(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w).mean()


def _run_mode(mode: str, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The same forward under one of the five ways of not recording (or recording) a graph."""
    if mode == "grad enabled":
        return _forward(x, w)
    if mode == "torch.no_grad()":
        with torch.no_grad():
            return _forward(x, w)
    if mode == "W.detach()":
        return _forward(x, w.detach())
    if mode == "torch.inference_mode()":
        with torch.inference_mode():
            return _forward(x, w)
    frozen = w.detach().clone().requires_grad_(False)  # a frozen copy, so the shared W stays trainable
    return _forward(x, frozen)


def _saved_bytes(mode: str, x, w) -> int:
    """Bytes of tensors autograd saved for backward during the forward, counted by saved_tensors_hooks."""
    total = [0]

    def pack(t):
        total[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        _run_mode(mode, x, w)
    return total[0]


def _time_ms(mode: str, x, w, repeats: int = 5) -> float:
    """Best of `repeats` (the runs before it warmed up): the least disturbed by other work on a shared host."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        _run_mode(mode, x, w)
        times.append((time.perf_counter() - start) * 1000)
    return min(times)


def _later_use(out: torch.Tensor, w: torch.Tensor) -> str:
    """Use the result in a new autograd computation with W; report what happened (torch's error, if any)."""
    try:
        (out * w).sum().backward()
    except RuntimeError as err:
        return "RuntimeError: " + str(err).splitlines()[0]
    grad = w.grad
    w.grad = None
    path = "also through out's own graph" if out.requires_grad else "out is a constant there"
    return f"works ({path}); W.grad sum {float(grad.sum()):.4g}"


def compare_modes(n: int) -> ModesResult:
    """Per mode: grad_fn, requires_grad, is_inference, a later autograd use, saved bytes and forward time."""
    if not MIN_N <= n <= MAX_N:
        raise InputError(f"The size n must be between {MIN_N} and {MAX_N}; got {n}.")
    torch.manual_seed(0)
    x = torch.randn(n, n)
    w = torch.randn(n, n, requires_grad=True)
    rows, saved, times = [], [], []
    for mode in MODES:
        out = _run_mode(mode, x, w)
        saved.append(_saved_bytes(mode, x, w))
        times.append(_time_ms(mode, x, w))
        rows.append({
            "mode": mode,
            "out.grad_fn": type(out.grad_fn).__name__ if out.grad_fn is not None else "None",
            "out.requires_grad": out.requires_grad,
            "out.is_inference()": out.is_inference(),
            "graph recorded": out.grad_fn is not None,
            "saved for backward": _fmt_bytes(saved[-1]),
            "forward (ms, best of 5)": round(times[-1], 3),
            "later: (out * W).sum().backward()": _later_use(out, w),
        })
    return ModesResult(n, pd.DataFrame(rows), tuple(saved), tuple(times), modes_code(n))


def _fmt_bytes(b: int) -> str:
    return f"{b:,} B ({b / 2**20:.2f} MiB)" if b else "0 B"


def modes_code(n: int) -> str:
    return f"""import torch

torch.manual_seed(0)
x = torch.randn({n}, {n})
W = torch.randn({n}, {n}, requires_grad=True)

out = torch.relu(x @ W).mean()
print("grad enabled:", out.grad_fn)                  # MeanBackward0: a graph was recorded
with torch.no_grad():
    out = torch.relu(x @ W).mean()
print("no_grad:", out.grad_fn, out.requires_grad)   # None False
out = torch.relu(x @ W.detach()).mean()
print("detach:", out.grad_fn)                        # None: W.detach() is a leaf that needs no grad
with torch.inference_mode():
    out_inf = torch.relu(x @ W).mean()
print("inference_mode:", out_inf.is_inference())     # True
try:
    (out_inf * W).sum().backward()
except RuntimeError as err:
    print(err)                                       # inference tensors cannot be saved for backward

saved = []
with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.nbytes) or t, lambda t: t):
    torch.relu(x @ W).mean()
print("bytes saved for backward:", sum(saved))
"""


def detach_shares_storage() -> SharingResult:
    """d = W.detach() shares W's storage and version counter: writing d changes W; clone() does not."""
    torch.manual_seed(0)
    w = torch.randn(3, 3, requires_grad=True)
    d = w.detach()
    before = w.detach()[0, 0].item()
    version_before = w._version
    d[0, 0] = 100.0
    c = w.detach().clone()
    c[1, 1] = -100.0
    return SharingResult(before, d[0, 0].item(), w.detach()[0, 0].item(), d.data_ptr() == w.data_ptr(),
                         version_before, w._version, w.detach()[1, 1].item(), SHARING_CODE)


SHARING_CODE = """import torch

torch.manual_seed(0)
W = torch.randn(3, 3, requires_grad=True)
d = W.detach()                      # no copy: same storage, same version counter
print(d.data_ptr() == W.data_ptr())  # True
d[0, 0] = 100.0
print(W[0, 0], W._version)          # 100.0 and version 1: W changed too
c = W.detach().clone()              # a real copy
c[1, 1] = -100.0
print(W[1, 1])                      # unchanged
"""


def version_counter_trap() -> VersionResult:
    """An in-place change to a tensor sigmoid saved for backward, and torch's error when backward needs it."""
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    a = torch.sigmoid(x)  # sigmoid saves its output a for backward
    before = a._version
    a.mul_(2)  # in-place: bumps a._version
    after = a._version
    try:
        a.sum().backward()
        error = "no error"
    except RuntimeError as err:
        error = str(err).split(". Hint")[0]
    x2 = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    b = torch.sigmoid(x2)
    b = b * 2  # out of place: the saved output is untouched
    b.sum().backward()
    return VersionResult(before, after, error, tuple(x2.grad.tolist()), VERSION_CODE)


VERSION_CODE = """import torch

x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
a = torch.sigmoid(x)    # SigmoidBackward0 saves its output a
print(a._version)       # 0
a.mul_(2)               # in-place write to a saved tensor
print(a._version)       # 1
try:
    a.sum().backward()  # backward checks the version it saved: 0 != 1
except RuntimeError as err:
    print(err)          # ... modified by an inplace operation ...

x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
b = torch.sigmoid(x) * 2  # out of place: fine
b.sum().backward()
print(x.grad)
"""


def modes_figure(r: ModesResult) -> go.Figure:
    """Two panels over the five modes: bytes saved for backward, and forward time."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("saved for backward (MiB)", "forward time (ms, best of 5)"))
    labels = list(MODES)
    colors = [COLORS["activation"] if b else COLORS["idle"] for b in r.saved_bytes]
    fig.add_bar(x=labels, y=[b / 2**20 for b in r.saved_bytes], marker_color=colors, showlegend=False, row=1, col=1,
                hovertemplate="%{x}: %{y:.3f} MiB<extra></extra>")
    fig.add_bar(x=labels, y=list(r.forward_ms), marker_color=COLORS["data"], showlegend=False, row=1, col=2,
                hovertemplate="%{x}: %{y:.3f} ms<extra></extra>")
    fig.update_xaxes(tickangle=-25)
    return base_layout(fig, height=360)
