"""Section 3: one computation under grad mode, no_grad, detach, inference_mode and requires_grad_(False)."""

import time
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from demos.errors import InputError
from demos.shown import Script, entry, script
from demos.style import COLORS, base_layout

MIN_N, MAX_N = 16, 512
MODES = ("grad enabled", "torch.no_grad()", "W.detach()", "torch.inference_mode()", "W.requires_grad_(False)")


@dataclass(frozen=True)
class ModesResult:
    n: int
    table: pd.DataFrame
    saved_bytes: tuple[int, ...]
    forward_ms: tuple[float, ...]
    code: Script


@dataclass(frozen=True)
class SharingResult:
    before: float
    detached_after: float
    original_after: float
    same_storage: bool
    version_before: int
    version_after: int
    clone_original_after: float
    code: Script


@dataclass(frozen=True)
class VersionResult:
    version_before: int
    version_after: int
    trap_error: str
    correct_grad: tuple[float, ...]
    code: Script


def forward(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w).mean()


def run_mode(mode: str, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The same forward under one of the five ways of not recording (or recording) a graph."""
    if mode == "grad enabled":
        return forward(x, w)
    if mode == "torch.no_grad()":
        with torch.no_grad():
            return forward(x, w)
    if mode == "W.detach()":
        return forward(x, w.detach())
    if mode == "torch.inference_mode()":
        with torch.inference_mode():
            return forward(x, w)
    frozen = w.detach().clone().requires_grad_(False)  # a frozen copy, so the shared W stays trainable
    return forward(x, frozen)


def saved_bytes(mode: str, x, w) -> int:
    """Bytes of tensors autograd saved for backward during the forward, counted by saved_tensors_hooks."""
    total = [0]

    def pack(t):
        total[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        run_mode(mode, x, w)
    return total[0]


def time_ms(mode: str, x, w, repeats: int = 5) -> float:
    """Best of `repeats` (the runs before it warmed up): the least disturbed by other work on a shared host."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run_mode(mode, x, w)
        times.append((time.perf_counter() - start) * 1000)
    return min(times)


def later_use(out: torch.Tensor, w: torch.Tensor) -> str:
    """Use the result in a new autograd computation with W; report what happened (torch's error, if any)."""
    try:
        (out * w).sum().backward()
    except RuntimeError as err:
        return "RuntimeError: " + str(err).splitlines()[0]
    grad = w.grad
    w.grad = None
    path = "also through out's own graph" if out.requires_grad else "out is a constant there"
    return f"works ({path}); W.grad sum {float(grad.sum()):.4g}"


def mode_facts(mode: str, x: torch.Tensor, w: torch.Tensor) -> dict:
    """What the forward under one mode returns and records, and what a later autograd use of its result does."""
    out = run_mode(mode, x, w)
    return {"grad_fn": type(out.grad_fn).__name__ if out.grad_fn is not None else "None",
            "requires_grad": out.requires_grad, "is_inference": out.is_inference(),
            "saved_bytes": saved_bytes(mode, x, w), "later": later_use(out, w)}


@entry(16)
def compare_modes(n: int) -> ModesResult:
    """Per mode: grad_fn, requires_grad, is_inference, a later autograd use, saved bytes and forward time."""
    if not MIN_N <= n <= MAX_N:
        raise InputError(f"The size n must be between {MIN_N} and {MAX_N}; got {n}.")
    torch.manual_seed(0)
    x = torch.randn(n, n)
    w = torch.randn(n, n, requires_grad=True)
    rows, saved, times = [], [], []
    for mode in MODES:
        facts = mode_facts(mode, x, w)
        saved.append(facts["saved_bytes"])
        times.append(time_ms(mode, x, w))
        rows.append({
            "mode": mode,
            "out.grad_fn": facts["grad_fn"],
            "out.requires_grad": facts["requires_grad"],
            "out.is_inference()": facts["is_inference"],
            "graph recorded": facts["grad_fn"] != "None",
            "saved for backward": _fmt_bytes(saved[-1]),
            "forward (ms, best of 5)": round(times[-1], 3),
            "later: (out * W).sum().backward()": facts["later"],
        })
    code = script(forward, run_mode, saved_bytes, later_use, mode_facts, time_ms,
                  imports="import time\n\nimport torch", settings={"MODES": MODES, "n": n}, run="""
torch.manual_seed(0)
x = torch.randn(n, n)
W = torch.randn(n, n, requires_grad=True)
for mode in MODES:
    print(mode, mode_facts(mode, x, W))
    print(mode, "forward ms, best of 5:", time_ms(mode, x, W))""")
    return ModesResult(n, pd.DataFrame(rows), tuple(saved), tuple(times), code)


def _fmt_bytes(b: int) -> str:
    return f"{b:,} B ({b / 2**20:.2f} MiB)" if b else "0 B"


@entry()
def detach_shares_storage() -> SharingResult:
    """d = W.detach() shares W's storage and version counter: writing d changes W; clone() does not."""
    facts = write_through_detach()
    return SharingResult(*facts, script(write_through_detach, run="print(write_through_detach())"))


def write_through_detach():
    """W[0, 0] before; d[0, 0] and W[0, 0] after writing 100 into d = W.detach(); whether they share storage; W's
    version before and after; W[1, 1] after writing -100 into a clone."""
    torch.manual_seed(0)
    w = torch.randn(3, 3, requires_grad=True)
    d = w.detach()  # no copy: same storage, same version counter
    before = w.detach()[0, 0].item()
    version_before = w._version
    d[0, 0] = 100.0
    c = w.detach().clone()  # a real copy
    c[1, 1] = -100.0
    return (before, d[0, 0].item(), w.detach()[0, 0].item(), d.data_ptr() == w.data_ptr(), version_before,
            w._version, w.detach()[1, 1].item())


@entry()
def version_counter_trap() -> VersionResult:
    """An in-place change to a tensor sigmoid saved for backward, and torch's error when backward needs it."""
    before, after, error, grad = inplace_on_saved_output()
    return VersionResult(before, after, error.split(". Hint")[0], tuple(grad), script(inplace_on_saved_output, run="""
before, after, error, grad = inplace_on_saved_output()
print("version", before, "->", after)
print(error)  # ... modified by an inplace operation ...
print(grad)"""))


def inplace_on_saved_output():
    """a = sigmoid(x) is saved for backward; a.mul_(2) bumps its version, so backward refuses. The version before
    and after, torch's error, and x.grad when the product is taken out of place instead."""
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    a = torch.sigmoid(x)  # SigmoidBackward0 saves its output a
    before = a._version
    a.mul_(2)  # in-place write to a saved tensor: bumps a._version
    after = a._version
    try:
        a.sum().backward()  # backward checks the version it saved: 0 != 1
        error = "no error"
    except RuntimeError as err:
        error = str(err)
    x2 = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    b = torch.sigmoid(x2) * 2  # out of place: the saved output is untouched
    b.sum().backward()
    return before, after, error, x2.grad.tolist()


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
