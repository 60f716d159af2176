"""Section 5: .grad accumulates, micro-batches with loss / k, backward through a freed graph, second-order grads."""

from dataclasses import dataclass

import plotly.graph_objects as go
import torch

from demos.errors import InputError
from demos.style import COLORS, SERIES, base_layout

MAX_BATCH, MAX_K = 256, 16
FEATURES = 4


@dataclass(frozen=True)
class RepeatResult:
    x: tuple[float, ...]
    accumulated: tuple[tuple[float, ...], ...]  # .grad after call 1, 2, 3 without zeroing
    zeroed: tuple[tuple[float, ...], ...]  # .grad after each call when zeroed before it
    code: str


def repeated_backward(calls: int = 3) -> RepeatResult:
    """loss = (w * x).sum(): each backward adds x into w.grad unless it is zeroed first."""
    x = torch.tensor([0.5, -1.0, 2.0])
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    accumulated, zeroed = [], []
    for _ in range(calls):
        (w * x).sum().backward()
        accumulated.append(tuple(w.grad.tolist()))
    w.grad = None
    for _ in range(calls):
        w.grad = None  # what optimizer.zero_grad() does by default (set_to_none=True)
        (w * x).sum().backward()
        zeroed.append(tuple(w.grad.tolist()))
    return RepeatResult(tuple(x.tolist()), tuple(accumulated), tuple(zeroed), REPEAT_CODE)


REPEAT_CODE = """import torch

x = torch.tensor([0.5, -1.0, 2.0])
w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
for call in range(1, 4):
    (w * x).sum().backward()      # a fresh graph each time; .grad is ADDED to
    print(call, w.grad)           # x, 2x, 3x
w.grad = None                     # optimizer.zero_grad() (set_to_none=True)
(w * x).sum().backward()
print(w.grad)                     # x again
"""


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
    code: str


def micro_batch_choices(batch: int) -> tuple[int, ...]:
    """The k that split a batch into equal micro-batches: its divisors up to MAX_K."""
    return tuple(k for k in range(1, MAX_K + 1) if batch % k == 0)


def default_micro_batches(batch: int, wanted: int = 4) -> int:
    """The largest valid k not above `wanted` (1 always divides)."""
    return max(k for k in micro_batch_choices(batch) if k <= wanted)


def micro_batches(batch: int, k: int) -> MicroBatchResult:
    """Mean-MSE gradient (float64) of one batch vs k micro-batches accumulating loss / k, and forgetting / k."""
    if not 2 <= batch <= MAX_BATCH:
        raise InputError(f"Batch size: {batch} is out of range; it must be from 2 to {MAX_BATCH}.")
    if k not in micro_batch_choices(batch):
        raise InputError(f"Micro-batches k: a batch of {batch} does not split into {k} equal micro-batches; k must "
                         f"be one of {', '.join(map(str, micro_batch_choices(batch)))}.")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, FEATURES, generator=gen, dtype=torch.float64)
    y = torch.randn(batch, 1, generator=gen, dtype=torch.float64)
    w = torch.randn(FEATURES, 1, generator=gen, dtype=torch.float64, requires_grad=True)

    torch.nn.functional.mse_loss(x @ w, y).backward()
    full, w.grad = w.grad.clone(), None
    for xb, yb in zip(x.chunk(k), y.chunk(k), strict=True):
        (torch.nn.functional.mse_loss(xb @ w, yb) / k).backward()
    accumulated, w.grad = w.grad.clone(), None
    for xb, yb in zip(x.chunk(k), y.chunk(k), strict=True):
        torch.nn.functional.mse_loss(xb @ w, yb).backward()  # the trap: no / k
    forgot = w.grad.clone()
    return MicroBatchResult(
        batch, k, tuple(full.flatten().tolist()), tuple(accumulated.flatten().tolist()),
        tuple(forgot.flatten().tolist()), float((full - accumulated).abs().max()),
        float((full - forgot).abs().max()), float((forgot / full).mean()), micro_code(batch, k),
    )


def micro_code(batch: int, k: int) -> str:
    return f"""import torch
import torch.nn.functional as F

gen = torch.Generator().manual_seed(0)
x = torch.randn({batch}, {FEATURES}, generator=gen, dtype=torch.float64)
y = torch.randn({batch}, 1, generator=gen, dtype=torch.float64)
w = torch.randn({FEATURES}, 1, generator=gen, dtype=torch.float64, requires_grad=True)

F.mse_loss(x @ w, y).backward()           # one large batch
full, w.grad = w.grad.clone(), None
for xb, yb in zip(x.chunk({k}), y.chunk({k})):
    (F.mse_loss(xb @ w, yb) / {k}).backward()   # k micro-batches, each loss / k
print((full - w.grad).abs().max())        # ~1e-16: only rounding
w.grad = None
for xb, yb in zip(x.chunk({k}), y.chunk({k})):
    F.mse_loss(xb @ w, yb).backward()     # forgot / k
print(w.grad / full)                      # k times too large
"""


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
    code: str


def freed_graph() -> FreedGraphResult:
    """A second backward through the same graph fails once its saved tensors are freed; retain_graph keeps them."""
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x * x).sum()  # MulBackward0 saves x twice
    y.backward()
    first = tuple(x.grad.tolist())
    try:
        y.backward()
        error = "no error"
    except RuntimeError as err:
        error = str(err).split(". ")[0] + "."
    x2 = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y2 = (x2 * x2).sum()
    y2.backward(retain_graph=True)
    after_one = tuple(x2.grad.tolist())
    y2.backward()
    return FreedGraphResult(first, error, (after_one, tuple(x2.grad.tolist())), FREED_CODE)


FREED_CODE = """import torch

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = (x * x).sum()
y.backward()                 # frees the saved tensors of the graph
try:
    y.backward()
except RuntimeError as err:
    print(err)               # Trying to backward through the graph a second time ...

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = (x * x).sum()
y.backward(retain_graph=True)
y.backward()                 # works; .grad accumulates: 2x + 2x
print(x.grad)
"""


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
    code: str


def gradient_penalty() -> SecondOrderResult:
    """create_graph=True makes the gradient differentiable: d/dx sum((dy/dx)^2) for y = sum(x^3) is 36 x^3."""
    x = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
    y = (x**3).sum()
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    penalty = (g**2).sum()
    penalty.backward()
    analytic = 36 * x.detach() ** 3
    xd = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64, requires_grad=True)
    ok = torch.autograd.gradgradcheck(lambda t: (t**3).sum(), (xd,))
    x2 = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
    (g2,) = torch.autograd.grad((x2**3).sum(), x2)  # no create_graph: g2 is a constant
    try:
        (g2**2).sum().backward()
        error = "no error"
    except RuntimeError as err:
        error = str(err).splitlines()[0]
    return SecondOrderResult(
        tuple(x.tolist()), tuple(g.detach().tolist()), penalty.item(), tuple(x.grad.tolist()),
        tuple(analytic.tolist()), float((x.grad - analytic).abs().max()), bool(ok), error, PENALTY_CODE,
    )


PENALTY_CODE = """import torch

x = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
y = (x ** 3).sum()
(g,) = torch.autograd.grad(y, x, create_graph=True)  # g = 3x^2, itself a graph
penalty = (g ** 2).sum()                             # sum 9x^4
penalty.backward()
print(x.grad, 36 * x.detach() ** 3)                  # equal

xd = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64, requires_grad=True)
print(torch.autograd.gradgradcheck(lambda t: (t ** 3).sum(), (xd,)))  # True
"""
