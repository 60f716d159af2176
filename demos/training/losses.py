"""Loss functions executed: cross-entropy on logits, BCE at large logits, robust regression losses, reductions."""

import math
from dataclasses import dataclass

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import nn

from demos.errors import InputError
from demos.parsing import parse_numbers
from demos.shown import Script, entry, script
from demos.style import COLORS, REFERENCE, SERIES, base_layout
from demos.threads import single_threaded
from demos.training.common import IMPORTS, check_int, check_range

MAX_LOGIT = 1000.0


@dataclass(frozen=True)
class CrossEntropyResult:
    logits: tuple[float, ...]
    target: int
    smoothing: float
    probs: tuple[float, ...]
    loss: float  # nn.CrossEntropyLoss(label_smoothing=...)
    loss_by_hand: float  # (1 − ε)·(−log p_t) + ε/C·Σ −log p_j
    loss_on_probs: float  # the trap: CrossEntropyLoss fed softmax outputs
    batch_targets: tuple[int, ...]  # the ignore_index demo: a batch of 4 rows, one target = ignore_index
    batch_loss: float
    batch_loss_by_hand: float  # mean over the rows that are not ignored
    ignored_row_grad: float  # max |grad| of the ignored row's logits
    code: Script


@dataclass(frozen=True)
class BceResult:
    logit: float
    target: int
    manual: tuple[float, float]  # (loss, d loss / d logit) for −[y·log σ + (1−y)·log(1−σ)]
    bce: tuple[float, float]  # nn.BCELoss on sigmoid outputs
    with_logits: tuple[float, float]  # nn.BCEWithLogitsLoss
    sweep_x: tuple[float, ...]
    sweep: dict  # name -> losses over sweep_x (None where not finite)
    code: Script


@dataclass(frozen=True)
class RobustResult:
    x: tuple[float, ...]
    y: tuple[float, ...]
    outlier: tuple[bool, ...]
    fits: dict  # loss name -> (slope, intercept)
    residuals: tuple[float, ...]
    grads: dict  # loss name -> d loss / d prediction over residuals
    code: Script


@dataclass(frozen=True)
class ReductionResult:
    batch_sizes: tuple[int, ...]
    grad_mean: tuple[float, ...]
    grad_sum: tuple[float, ...]
    code: Script


def parse_logits(text: str) -> tuple[float, ...]:
    """2 to 10 logits, each of size at most MAX_LOGIT."""
    logits = parse_numbers(text, "Logits", min_count=2, max_count=10)
    for i, v in enumerate(logits):
        if abs(v) > MAX_LOGIT:
            raise InputError(f"Logits, entry {i + 1}: {v:g} is out of range; each logit must be from "
                             f"-{MAX_LOGIT:g} to {MAX_LOGIT:g}.")
    return logits


@entry("2, -1, 0.5", 2, 0.1, 4)
@single_threaded
def cross_entropy(logits_text: str = "2, 1, 0.1", target: int = 0, smoothing: float = 0.0,
                  seed: int = 0) -> CrossEntropyResult:
    """nn.CrossEntropyLoss on one row of logits and a class index, beside the formula; then ignore_index."""
    logits = parse_logits(logits_text)
    c = len(logits)
    check_int(target, "Target class", 0, c - 1)
    check_range(smoothing, "Label smoothing", 0.0, 0.9)
    loss, by_hand, on_probs, probs = ce_one_row(logits, target, smoothing)
    batch_loss, batch_by_hand, targets, grad = ce_ignore_index(logits, target, seed)
    return CrossEntropyResult(logits, target, smoothing, tuple(probs.tolist()), loss, by_hand, on_probs,
                              tuple(targets.tolist()), batch_loss, batch_by_hand, grad[3].abs().max().item(),
                              ce_script(logits, target, smoothing, seed))


def ce_one_row(logits, target, smoothing):
    """nn.CrossEntropyLoss on one row, the formula by hand, and the trap of feeding it probabilities."""
    z = torch.tensor([logits])  # raw scores, NOT probabilities
    t = torch.tensor([target])  # a class index, NOT one-hot
    loss = nn.CrossEntropyLoss(label_smoothing=smoothing)(z, t)
    logp = torch.log_softmax(z, dim=1)[0]
    by_hand = (1 - smoothing) * -logp[target] + smoothing / len(logits) * -logp.sum()
    on_probs = nn.CrossEntropyLoss()(z.softmax(dim=1), t)  # the trap: softmax fed in
    return loss.item(), by_hand.item(), on_probs.item(), logp.exp()


def ce_ignore_index(logits, target, seed):
    """A batch of 4 rows whose last target is ignore_index: the loss is the mean over the 3 kept rows (checked by
    hand), and the ignored row gets zero gradient."""
    c = len(logits)
    g = torch.Generator().manual_seed(seed)
    batch = torch.cat([torch.tensor([logits]), torch.randn(3, c, generator=g) * 2]).requires_grad_()
    targets = torch.tensor([target, *torch.randint(0, c, (2,), generator=g).tolist(), -100])
    loss = nn.CrossEntropyLoss(ignore_index=-100)(batch, targets)
    loss.backward()
    kept = targets != -100
    by_hand = -torch.log_softmax(batch.detach(), dim=1)[kept, targets[kept]].mean()
    return loss.item(), by_hand.item(), targets, batch.grad


def ce_script(logits, target, smoothing, seed) -> Script:
    return script(ce_one_row, ce_ignore_index, imports=IMPORTS,
                  settings={"logits": logits, "target": target, "smoothing": smoothing, "seed": seed}, run="""
loss, by_hand, on_probs, probs = ce_one_row(logits, target, smoothing)
print(loss, by_hand)
print("trap, softmax fed in:", on_probs)
batch_loss, batch_by_hand, targets, grad = ce_ignore_index(logits, target, seed)
print(batch_loss, batch_by_hand, grad[3].abs().max().item())  # the ignored row: zero gradient""")


def value_and_grad(fn, logit: float, target: int) -> tuple[float, float]:
    """The loss fn gives at one float32 logit, and its gradient with respect to that logit."""
    x = torch.tensor([logit], requires_grad=True)
    loss = fn(x, torch.tensor([float(target)]))
    loss.backward()
    return loss.item(), x.grad.item()


def bce_by_hand(x, y):
    p = torch.sigmoid(x)  # rounds to exactly 1.0 (or 0.0) for large |x|
    return -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()


def bce_on_sigmoid(x, y):
    return nn.BCELoss()(torch.sigmoid(x), y)  # clamps log(.) at -100


def bce_with_logits(x, y):
    return nn.BCEWithLogitsLoss()(x, y)  # log-sum-exp form: stable


BCE_WAYS = {"−log(1 − sigmoid(x)) by hand": bce_by_hand, "sigmoid + BCELoss": bce_on_sigmoid,
            "BCEWithLogitsLoss": bce_with_logits}


@entry(90.0, 1)
@single_threaded
def bce_compare(logit: float = 100.0, target: int = 0) -> BceResult:
    """The same binary cross-entropy three ways, in float32, at one logit and over a sweep of logits."""
    check_range(logit, "Logit", -MAX_LOGIT, MAX_LOGIT)
    check_int(target, "Target", 0, 1)
    sign = 1 if target == 0 else -1  # sweep towards the confidently wrong side
    xs = torch.linspace(0, max(abs(logit), 20.0), 121) * sign
    y = torch.full_like(xs, float(target))
    sweep = {}
    with torch.no_grad():
        for name, fn in BCE_WAYS.items():
            vals = [fn(xs[i : i + 1], y[i : i + 1]).item() for i in range(len(xs))]
            sweep[name] = tuple(v if math.isfinite(v) else None for v in vals)
    return BceResult(logit, target, value_and_grad(bce_by_hand, logit, target),
                     value_and_grad(bce_on_sigmoid, logit, target), value_and_grad(bce_with_logits, logit, target),
                     tuple(xs.tolist()), sweep, bce_script(logit, target))


def bce_script(logit: float, target: int) -> Script:
    return script(value_and_grad, bce_by_hand, bce_on_sigmoid, bce_with_logits,
                  imports="import torch\nfrom torch import nn", settings={"logit": logit, "target": target}, run="""
for fn in (bce_by_hand, bce_on_sigmoid, bce_with_logits):
    print(fn.__name__, *value_and_grad(fn, logit, target))  # loss, d loss / d logit""")


ROBUST = ("MSELoss", "L1Loss", "HuberLoss")


def loss_module(name: str):
    return {"MSELoss": nn.MSELoss(), "L1Loss": nn.L1Loss(), "HuberLoss": nn.HuberLoss(delta=1.0)}[name]


def outlier_data(n_outliers, outlier_size, seed):
    """40 points on y = 2x + 1 with noise, `n_outliers` of them shifted up by `outlier_size`."""
    g = torch.Generator().manual_seed(seed)
    x = torch.linspace(-3, 3, 40)
    y = 2 * x + 1 + 0.3 * torch.randn(40, generator=g)
    out = torch.zeros(40, dtype=torch.bool)
    out[torch.randperm(40, generator=g)[:n_outliers]] = True
    return x, torch.where(out, y + outlier_size, y), out


def fit_line(loss_fn, x, y, steps):
    """Fit y = a·x + b by Adam under loss_fn; (a, b)."""
    w = torch.zeros(2, requires_grad=True)
    opt = torch.optim.Adam([w], lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(w[0] * x + w[1], y).backward()
        opt.step()
    return w[0].item(), w[1].item()


@entry(3, 10.0, 2, 40)
@single_threaded
def robust_fit(n_outliers: int = 4, outlier_size: float = 15.0, seed: int = 0, steps: int = 300) -> RobustResult:
    """Fit y = a·x + b with MSE, L1 and Huber by Adam on data with outliers; the gradient each sends back."""
    check_int(n_outliers, "Outliers", 0, 20)
    check_range(outlier_size, "Outlier size", 0.0, 100.0)
    check_int(seed, "Seed", 0, 10_000)
    check_int(steps, "Fit steps", 10, 1000)
    x, y, out = outlier_data(n_outliers, outlier_size, seed)
    fits = {name: fit_line(loss_module(name), x, y, steps) for name in ROBUST}
    r = torch.linspace(-4, 4, 161)
    grads = {}
    for name in ROBUST:
        pred = r.clone().requires_grad_()
        loss_module(name)(pred, torch.zeros_like(r)).backward()
        grads[name] = tuple((pred.grad * len(r)).tolist())  # per-element gradient (undo the mean)
    return RobustResult(tuple(x.tolist()), tuple(y.tolist()), tuple(out.tolist()), fits, tuple(r.tolist()), grads,
                        robust_script(n_outliers, outlier_size, seed, steps))


def robust_script(n_outliers, outlier_size, seed, steps) -> Script:
    return script(loss_module, outlier_data, fit_line, imports="import torch\nfrom torch import nn",
                  settings={"ROBUST": ROBUST, "n_outliers": n_outliers, "outlier_size": outlier_size, "seed": seed,
                            "steps": steps}, run="""
x, y, outlier = outlier_data(n_outliers, outlier_size, seed)
for name in ROBUST:
    print(name, "slope, intercept", *fit_line(loss_module(name), x, y, steps))""")


@entry(16, 1)
@single_threaded
def reduction_scaling(max_batch: int = 256, seed: int = 0) -> ReductionResult:
    """Gradient norm of a linear model's weight under reduction='mean' and 'sum', for growing batches."""
    check_int(max_batch, "Largest batch", 2, 4096)
    check_int(seed, "Seed", 0, 10_000)
    sizes, norms = weight_grad_norms(max_batch, seed)
    return ReductionResult(tuple(sizes), tuple(norms["mean"]), tuple(norms["sum"]), reduction_script(max_batch, seed))


def weight_grad_norms(max_batch, seed):
    """‖grad‖ of a Linear's weight under MSELoss with reduction "mean" and "sum", for batches 1, 2, 4, … max_batch."""
    sizes = [2**k for k in range(int(math.log2(max_batch)) + 1)]
    torch.manual_seed(seed)  # the Linear's initial weights
    g = torch.Generator().manual_seed(seed)
    model = nn.Linear(8, 1)
    x = torch.randn(sizes[-1], 8, generator=g)
    y = torch.randn(sizes[-1], 1, generator=g)
    norms = {"mean": [], "sum": []}
    for b in sizes:
        for reduction in norms:
            model.zero_grad()
            nn.MSELoss(reduction=reduction)(model(x[:b]), y[:b]).backward()
            norms[reduction].append(model.weight.grad.norm().item())
    return sizes, norms


def reduction_script(max_batch, seed) -> Script:
    return script(weight_grad_norms, imports=IMPORTS, settings={"max_batch": max_batch, "seed": seed}, run="""
sizes, norms = weight_grad_norms(max_batch, seed)
for b, mean, total in zip(sizes, norms["mean"], norms["sum"]):
    print(b, mean, total)  # sum = b × mean: rescale the learning rate accordingly""")


def ce_figure(r: CrossEntropyResult) -> go.Figure:
    """softmax probabilities of the row; the target class highlighted."""
    colors = [COLORS["activation"] if i == r.target else COLORS["idle"] for i in range(len(r.logits))]
    fig = go.Figure(go.Bar(x=[f"class {i}<br>logit {v:g}" for i, v in enumerate(r.logits)], y=r.probs,
                           marker_color=colors, text=[f"{p:.3f}" for p in r.probs], textposition="outside"))
    fig.update_yaxes(title="softmax probability", range=[0, 1.15])
    return base_layout(fig, height=300)


def bce_figure(r: BceResult) -> go.Figure:
    """Loss vs logit for the three ways; a gap is where the value was inf or NaN."""
    fig = go.Figure()
    for i, (name, values) in enumerate(r.sweep.items()):
        fig.add_scatter(x=r.sweep_x, y=values, mode="lines", name=name, connectgaps=False,
                        line=dict(color=(COLORS["error"], COLORS["optimizer_state"], COLORS["parameter"])[i],
                                  width=4 - i, dash=("solid", "dash", "solid")[i]))
    fig.add_vline(x=r.logit, line_dash="dot", annotation_text=f"logit {r.logit:g}")
    fig.update_xaxes(title=f"logit (target {r.target})")
    fig.update_yaxes(title="loss (float32)")
    return base_layout(fig, height=340)


def robust_figure(r: RobustResult) -> go.Figure:
    """Left: the data, outliers in red, and each loss's fitted line. Right: gradient per residual."""
    fig = make_subplots(rows=1, cols=2, column_widths=[0.62, 0.38],
                        subplot_titles=("fitted lines", "gradient sent back per residual"))
    colors = [COLORS["error"] if o else COLORS["data"] for o in r.outlier]
    fig.add_scatter(x=r.x, y=r.y, mode="markers", marker=dict(color=colors, size=7), name="data (red: outlier)",
                    row=1, col=1)
    xs = [min(r.x), max(r.x)]
    fig.add_scatter(x=xs, y=[2 * v + 1 for v in xs], mode="lines", name="true line y = 2x + 1",
                    line=dict(color=REFERENCE, dash="dot", width=2.5), row=1, col=1)
    for i, (name, (a, b)) in enumerate(r.fits.items()):
        fig.add_scatter(x=xs, y=[a * v + b for v in xs], mode="lines", name=f"{name}: {a:.2f}x + {b:.2f}",
                        line=dict(color=SERIES[i], width=2.5), row=1, col=1)
        fig.add_scatter(x=r.residuals, y=r.grads[name], mode="lines", showlegend=False,
                        line=dict(color=SERIES[i], width=2.5), row=1, col=2)
    fig.update_xaxes(title="residual", row=1, col=2)
    base_layout(fig, height=420)
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, xanchor="left", x=0))
    return fig


def reduction_figure(r: ReductionResult) -> go.Figure:
    """Weight-gradient norm vs batch size for mean and sum (log-log)."""
    fig = go.Figure()
    fig.add_scatter(x=r.batch_sizes, y=r.grad_mean, mode="lines+markers", name='reduction="mean"',
                    line=dict(color=COLORS["gradient"]))
    fig.add_scatter(x=r.batch_sizes, y=r.grad_sum, mode="lines+markers", name='reduction="sum"',
                    line=dict(color=COLORS["error"]))
    fig.update_xaxes(type="log", title="batch size")
    fig.update_yaxes(type="log", title="‖grad of weight‖")
    return base_layout(fig, height=320)
