"""Section 5: .grad accumulates, micro-batches with loss / k, backward through a freed graph, second-order grads."""

from dataclasses import dataclass

import plotly.graph_objects as go
import torch

from demos.errors import InputError
from demos.shown import Script, entry, script
from demos.style import COLORS, SERIES, base_layout

MAX_BATCH, MAX_K = 256, 16
FEATURES = 4


@dataclass(frozen=True)
class RepeatResult:
    x: tuple[float, ...]
    accumulated: tuple[tuple[float, ...], ...]  # .grad after call 1, 2, 3 without zeroing
    zeroed: tuple[tuple[float, ...], ...]  # .grad after each call when zeroed before it
    code: Script


@entry(3)
def repeated_backward(calls: int = 3) -> RepeatResult:
    """loss = (w * x).sum(): each backward adds x into w.grad unless it is zeroed first."""
    x, accumulated, zeroed = backward_again_and_again(calls)
    return RepeatResult(tuple(x), tuple(map(tuple, accumulated)), tuple(map(tuple, zeroed)),
                        script(backward_again_and_again, settings={"calls": calls}, run="""
x, accumulated, zeroed = backward_again_and_again(calls)
print("not zeroed:", accumulated)  # x, 2x, 3x
print("zeroed first:", zeroed)  # x every time"""))


def backward_again_and_again(calls: int):
    """Backward through (w * x).sum() `calls` times without zeroing, then `calls` times zeroing first; w.grad after
    each call."""
    x = torch.tensor([0.5, -1.0, 2.0])
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    accumulated, zeroed = [], []
    for _ in range(calls):
        (w * x).sum().backward()  # a fresh graph each time; .grad is ADDED to
        accumulated.append(w.grad.tolist())
    for _ in range(calls):
        w.grad = None  # what optimizer.zero_grad() does by default (set_to_none=True)
        (w * x).sum().backward()
        zeroed.append(w.grad.tolist())
    return x.tolist(), accumulated, zeroed


def repeat_figure(r: RepeatResult) -> go.Figure:
    """Grouped bars: w.grad per element after 1, 2, 3 backward calls without zeroing, and with zeroing."""
    fig = go.Figure()
    labels = [f"w[{i}]" for i in range(len(r.x))]
    for k, grad in enumerate(r.accumulated, 1):
        fig.add_bar(x=labels, y=grad, name=f"after {k} call{'s' if k > 1 else ''}, no zeroing",
                    marker_color=SERIES[k - 1])
    fig.add_scatter(x=labels, y=r.zeroed[-1], name="zeroed before each call", mode="markers",
                    marker=dict(color=COLORS["idle"], size=14, symbol="diamond"))
    fig.update_yaxes(title="w.grad")
    return base_layout(fig, height=340)


@dataclass(frozen=True)
class MicroBatchResult:
    batch: int
    k: int
    full: tuple[float, ...]
    accumulated: tuple[float, ...]
    forgot: tuple[float, ...]
    max_diff: float
    forgot_diff: float
    forgot_ratio: float  # forgot / full, the same for every weight
    code: Script


def micro_batch_choices(batch: int) -> tuple[int, ...]:
    """The k that split a batch into equal micro-batches: its divisors up to MAX_K."""
    return tuple(k for k in range(1, MAX_K + 1) if batch % k == 0)


def default_micro_batches(batch: int, wanted: int = 4) -> int:
    """The largest valid k not above `wanted` (1 always divides)."""
    return max(k for k in micro_batch_choices(batch) if k <= wanted)


@entry(12, 3)
def micro_batches(batch: int, k: int) -> MicroBatchResult:
    """Mean-MSE gradient (float64) of one batch vs k micro-batches accumulating loss / k, and forgetting / k."""
    if not 2 <= batch <= MAX_BATCH:
        raise InputError(f"Batch size: {batch} is out of range; it must be from 2 to {MAX_BATCH}.")
    if k not in micro_batch_choices(batch):
        raise InputError(f"Micro-batches k: a batch of {batch} does not split into {k} equal micro-batches; k must "
                         f"be one of {', '.join(map(str, micro_batch_choices(batch)))}.")
    full, accumulated, forgot = micro_batch_grads(batch, k)
    return MicroBatchResult(
        batch, k, tuple(full.flatten().tolist()), tuple(accumulated.flatten().tolist()),
        tuple(forgot.flatten().tolist()), float((full - accumulated).abs().max()),
        float((full - forgot).abs().max()), float((forgot / full).mean()),
        script(micro_batch_grads, settings={"FEATURES": FEATURES, "batch": batch, "k": k}, run="""
full, accumulated, forgot = micro_batch_grads(batch, k)
print((full - accumulated).abs().max().item())  # ~1e-16: only rounding
print((forgot / full).flatten().tolist())  # k times too large"""),
    )


def micro_batch_grads(batch: int, k: int):
    """The mean-MSE gradient (float64) of one batch, of k micro-batches accumulating loss / k, and of k micro-batches
    that forgot the / k."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, FEATURES, generator=gen, dtype=torch.float64)
    y = torch.randn(batch, 1, generator=gen, dtype=torch.float64)
    w = torch.randn(FEATURES, 1, generator=gen, dtype=torch.float64, requires_grad=True)
    torch.nn.functional.mse_loss(x @ w, y).backward()  # one large batch
    full, w.grad = w.grad.clone(), None
    for xb, yb in zip(x.chunk(k), y.chunk(k), strict=True):
        (torch.nn.functional.mse_loss(xb @ w, yb) / k).backward()  # k micro-batches, each loss / k
    accumulated, w.grad = w.grad.clone(), None
    for xb, yb in zip(x.chunk(k), y.chunk(k), strict=True):
        torch.nn.functional.mse_loss(xb @ w, yb).backward()  # the trap: no / k
    return full, accumulated, w.grad.clone()


def micro_figure(r: MicroBatchResult) -> go.Figure:
    """Bars per weight: the large batch, k micro-batches with / k, and without / k."""
    labels = [f"w[{i}]" for i in range(len(r.full))]
    fig = go.Figure()
    fig.add_bar(x=labels, y=r.full, name=f"one batch of {r.batch}", marker_color=COLORS["gradient"])
    fig.add_bar(x=labels, y=r.accumulated, name=f"{r.k} micro-batches, loss / {r.k}", marker_color=COLORS["activation"])
    fig.add_bar(x=labels, y=r.forgot, name=f"{r.k} micro-batches, forgot / {r.k}", marker_color=COLORS["error"])
    fig.update_yaxes(title="w.grad")
    return base_layout(fig, height=340)


@dataclass(frozen=True)
class FreedGraphResult:
    first_grad: tuple[float, ...]
    second_error: str
    retained_grads: tuple[tuple[float, ...], ...]
    code: Script


@entry()
def freed_graph() -> FreedGraphResult:
    """A second backward through the same graph fails once its saved tensors are freed; retain_graph keeps them."""
    first, error, retained = backward_through_freed_graph()
    return FreedGraphResult(tuple(first), error.split(". ")[0] + ".", tuple(map(tuple, retained)),
                            script(backward_through_freed_graph, run="""
first, error, retained = backward_through_freed_graph()
print(first)
print(error)  # Trying to backward through the graph a second time ...
print(retained)  # 2x, then 2x + 2x"""))


def backward_through_freed_graph():
    """A second backward through y = (x * x).sum() after the first freed its saved tensors: x.grad after the first,
    the error the second raises; then with retain_graph=True, x.grad after each of two backward calls."""
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x * x).sum()  # MulBackward0 saves x twice
    y.backward()  # frees the saved tensors of the graph
    first = x.grad.tolist()
    try:
        y.backward()
        error = "no error"
    except RuntimeError as err:
        error = str(err)
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    retained = [x.grad.tolist()]
    y.backward()  # works; .grad accumulates: 2x + 2x
    return first, error, [*retained, x.grad.tolist()]


@dataclass(frozen=True)
class SecondOrderResult:
    x: tuple[float, ...]
    first: tuple[float, ...]  # dy/dx = 3x^2
    penalty: float  # sum(g^2)
    second: tuple[float, ...]  # d penalty / dx by autograd
    analytic: tuple[float, ...]  # 36 x^3
    max_diff: float
    gradgradcheck_ok: bool
    no_create_graph_error: str
    code: Script


@entry()
def gradient_penalty() -> SecondOrderResult:
    """create_graph=True makes the gradient differentiable: d/dx sum((dy/dx)^2) for y = sum(x^3) is 36 x^3."""
    x, g, penalty, second, ok, error = second_order()
    analytic = 36 * x**3
    return SecondOrderResult(
        tuple(x.tolist()), tuple(g.tolist()), penalty, tuple(second.tolist()), tuple(analytic.tolist()),
        float((second - analytic).abs().max()), ok, error.splitlines()[0],
        script(second_order, run="""
x, g, penalty, second, ok, error = second_order()
print(second.tolist(), (36 * x**3).tolist())  # equal
print("gradgradcheck:", ok)
print(error.splitlines()[0])"""),
    )


def second_order():
    """y = sum(x^3); with create_graph=True the gradient g = 3x^2 is itself a graph, so the penalty sum(g^2) can be
    differentiated (36 x^3). Returns x, g, the penalty, its gradient, gradgradcheck's verdict, and the error the
    same penalty raises without create_graph."""
    x = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
    y = (x**3).sum()
    (g,) = torch.autograd.grad(y, x, create_graph=True)  # g = 3x^2, itself a graph
    penalty = (g**2).sum()  # sum 9x^4
    penalty.backward()
    xd = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64, requires_grad=True)
    ok = torch.autograd.gradgradcheck(lambda t: (t**3).sum(), (xd,))
    x2 = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
    (g2,) = torch.autograd.grad((x2**3).sum(), x2)  # no create_graph: g2 is a constant
    try:
        (g2**2).sum().backward()
        error = "no error"
    except RuntimeError as err:
        error = str(err)
    return x.detach(), g.detach(), penalty.item(), x.grad, bool(ok), error
