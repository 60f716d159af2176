"""Real torch.optim steps on 2-D loss surfaces: trajectories, and Adam's L2 penalty vs AdamW's decoupled decay."""

import math
from dataclasses import dataclass

import plotly.graph_objects as go
import torch

from demos.shown import Script, entry, script
from demos.style import REFERENCE, SERIES, base_layout
from demos.threads import single_threaded
from demos.training.common import check_choice, check_int, check_range

SURFACES = {
    "ravine": {"formula": "0.05·x² + 2·y²", "start": (-4.5, 1.0), "x": (-5.0, 5.0), "y": (-1.6, 1.6),
               "minimum": (0.0, 0.0), "sgd_lr": 0.45, "adam_lr": 0.2},
    "rosenbrock": {"formula": "(1 − x)² + 100·(y − x²)²", "start": (-1.5, 2.0), "x": (-2.0, 2.0), "y": (-1.0, 3.0),
                   "minimum": (1.0, 1.0), "sgd_lr": 0.001, "adam_lr": 0.05},
}
EXTRA = ("RMSprop", "Adagrad", "NAdam", "RAdam", "Adamax", "Adadelta")
LR_OPTIONS = (1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.2, 0.45, 0.5, 1.0)
MAX_STEPS = 500


def surface_fn(name: str, p: torch.Tensor) -> torch.Tensor:
    """The loss at p = (x, y); works on a (2,) tensor or on stacked grids."""
    x, y = p[0], p[1]
    if name == "ravine":
        return 0.05 * x**2 + 2 * y**2
    return (1 - x) ** 2 + 100 * (y - x**2) ** 2


@dataclass(frozen=True)
class Trajectory:
    name: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    losses: tuple[float, ...]
    diverged_at: int | None  # first step whose point was not finite


@dataclass(frozen=True)
class SurfaceResult:
    surface: str
    steps: int
    grid_x: tuple[float, ...]
    grid_y: tuple[float, ...]
    grid_z: tuple[tuple[float, ...], ...]
    runs: tuple[Trajectory, ...]
    code: Script


@dataclass(frozen=True)
class DecayResult:
    """Adam with weight_decay (an L2 term in the gradient) vs AdamW (decoupled decay), same start and lr."""

    surface: str
    runs: tuple[Trajectory, ...]  # Adam no decay, Adam L2, AdamW
    first_step: dict  # name -> (x, y) after one step, from torch
    first_step_formula: dict  # name -> (x, y) from the written-out update rule
    final_gap: float  # |θ_Adam-L2 − θ_AdamW| at the end
    code: Script


def make_optimizer(name: str, params, sgd_lr, momentum, adam_lr, beta1, beta2, weight_decay):
    """The optimizer called `name`, with the page's hyperparameters."""
    betas = (beta1, beta2)
    return {
        "SGD": lambda: torch.optim.SGD(params, lr=sgd_lr),
        "SGD + momentum": lambda: torch.optim.SGD(params, lr=sgd_lr, momentum=momentum),
        "Adam": lambda: torch.optim.Adam(params, lr=adam_lr, betas=betas),
        "Adam (L2 weight_decay)": lambda: torch.optim.Adam(params, lr=adam_lr, betas=betas, weight_decay=weight_decay),
        "AdamW": lambda: torch.optim.AdamW(params, lr=adam_lr, betas=betas, weight_decay=weight_decay),
        "RMSprop": lambda: torch.optim.RMSprop(params, lr=adam_lr * 0.1),
        "Adagrad": lambda: torch.optim.Adagrad(params, lr=adam_lr * 10),
        "NAdam": lambda: torch.optim.NAdam(params, lr=adam_lr, betas=betas),
        "RAdam": lambda: torch.optim.RAdam(params, lr=adam_lr, betas=betas),
        "Adamax": lambda: torch.optim.Adamax(params, lr=adam_lr, betas=betas),
        "Adadelta": lambda: torch.optim.Adadelta(params, lr=adam_lr * 20),
    }[name]()


def descend(surface: str, start, name: str, steps: int, hyper: dict):
    """Step one optimizer from `start`; the points and losses, and the step at which it diverged (None if it did
    not: recording stops at the first non-finite point)."""
    p = torch.tensor(start, dtype=torch.float64, requires_grad=True)
    opt = make_optimizer(name, [p], **hyper)
    points, losses = [p.tolist()], [surface_fn(surface, p).item()]
    for step in range(1, steps + 1):
        opt.zero_grad()
        surface_fn(surface, p).backward()
        opt.step()
        if not torch.isfinite(p).all() or p.abs().max() > 1e6:
            return points, losses, step
        points.append(p.tolist())
        losses.append(surface_fn(surface, p.detach()).item())
    return points, losses, None


def trajectory(surface: str, name: str, steps: int, **hyper) -> Trajectory:
    """One optimizer's path from the surface's start."""
    points, losses, diverged = descend(surface, SURFACES[surface]["start"], name, steps, hyper)
    xs, ys = zip(*points, strict=True)
    return Trajectory(name, xs, ys, tuple(losses), diverged)


def validate(surface, steps, sgd_lr, momentum, adam_lr, beta1, beta2, weight_decay, extra="RMSprop") -> None:
    check_choice(surface, "Surface", tuple(SURFACES))
    check_int(steps, "Steps", 1, MAX_STEPS)
    check_range(sgd_lr, "SGD learning rate", 1e-5, 1.0)
    check_range(adam_lr, "Adam learning rate", 1e-5, 1.0)
    check_range(momentum, "Momentum", 0.0, 0.99)
    check_range(beta1, "beta1", 0.0, 0.99)
    check_range(beta2, "beta2", 0.5, 0.9999)
    check_range(weight_decay, "Weight decay", 0.0, 2.0)
    check_choice(extra, "Extra optimizer", EXTRA)


def _grid(surface: str, n: int = 80):
    s = SURFACES[surface]
    gx = torch.linspace(*s["x"], n, dtype=torch.float64)
    gy = torch.linspace(*s["y"], n, dtype=torch.float64)
    yy, xx = torch.meshgrid(gy, gx, indexing="ij")
    z = torch.log10(1 + surface_fn(surface, torch.stack([xx, yy])))
    return tuple(gx.tolist()), tuple(gy.tolist()), tuple(tuple(r) for r in z.tolist())


@entry("rosenbrock", 30, 0.01, 0.9, 0.05, 0.9, 0.999, 0.1, "NAdam")
@single_threaded
def race(surface: str = "ravine", steps: int = 150, sgd_lr: float | None = None, momentum: float = 0.9,
         adam_lr: float | None = None, beta1: float = 0.9, beta2: float = 0.999, weight_decay: float = 0.1,
         extra: str = "RMSprop") -> SurfaceResult:
    """SGD, SGD + momentum, Adam, AdamW and one extra optimizer from the same start on one surface."""
    check_choice(surface, "Surface", tuple(SURFACES))
    sgd_lr = SURFACES[surface]["sgd_lr"] if sgd_lr is None else sgd_lr
    adam_lr = SURFACES[surface]["adam_lr"] if adam_lr is None else adam_lr
    validate(surface, steps, sgd_lr, momentum, adam_lr, beta1, beta2, weight_decay, extra)
    hyper = dict(sgd_lr=sgd_lr, momentum=momentum, adam_lr=adam_lr, beta1=beta1, beta2=beta2,
                 weight_decay=weight_decay)
    names = ("SGD", "SGD + momentum", "Adam", "AdamW", extra)
    runs = tuple(trajectory(surface, n, steps, **hyper) for n in names)
    gx, gy, gz = _grid(surface)
    return SurfaceResult(surface, steps, gx, gy, gz, runs, race_script(surface, steps, names, hyper))


def race_script(surface: str, steps: int, names, hyper: dict) -> Script:
    """Each optimizer's descent, printing where it ended, its loss there, and the step it diverged at (or None)."""
    return script(surface_fn, make_optimizer, descend, imports="import torch",
                  settings={"surface": surface, "start": SURFACES[surface]["start"], "steps": steps, "names": names,
                            "hyper": hyper}, run="""
for name in names:
    points, losses, diverged = descend(surface, start, name, steps, hyper)
    print(name, points[-1], losses[-1], diverged)""")


@entry("rosenbrock", 40, 0.05, 0.9, 0.999, 0.2)
@single_threaded
def decay_compare(surface: str = "ravine", steps: int = 150, adam_lr: float | None = None, beta1: float = 0.9,
                  beta2: float = 0.999, weight_decay: float = 0.1) -> DecayResult:
    """Adam(weight_decay=wd) vs AdamW(weight_decay=wd): the same number, two different updates."""
    check_choice(surface, "Surface", tuple(SURFACES))
    adam_lr = SURFACES[surface]["adam_lr"] if adam_lr is None else adam_lr
    validate(surface, steps, 0.1, 0.0, adam_lr, beta1, beta2, weight_decay)
    hyper = dict(sgd_lr=0.1, momentum=0.0, adam_lr=adam_lr, beta1=beta1, beta2=beta2, weight_decay=weight_decay)
    names = ("Adam", "Adam (L2 weight_decay)", "AdamW")
    runs = tuple(trajectory(surface, n, steps, **hyper) for n in names)
    first = {r.name: (r.xs[1], r.ys[1]) for r in runs if len(r.xs) > 1}
    formula = {n: first_step_by_hand(surface, n, adam_lr, weight_decay) for n in names}
    a, b = runs[1], runs[2]
    gap = math.dist((a.xs[-1], a.ys[-1]), (b.xs[-1], b.ys[-1]))
    code = race_script(surface, steps, names, hyper)
    return DecayResult(surface, runs, first, formula, gap, code)


def first_step_by_hand(surface: str, name: str, lr: float, wd: float, eps: float = 1e-8) -> tuple[float, float]:
    """Where the first update written out by hand (FIRST_STEP) moves the start point."""
    p = torch.tensor(SURFACES[surface]["start"], dtype=torch.float64, requires_grad=True)
    surface_fn(surface, p).backward()
    new = FIRST_STEP[name](p.detach(), p.grad, lr, wd, eps)
    return new[0].item(), new[1].item()


# Adam's first update, written out: after one step the bias-corrected moments are m̂ = g and v̂ = g², so
# √v̂ = |g|. The page shows the last two side by side; each ran to fill the "by the formula" columns.


def adam_first_step(theta, g, lr, wd, eps):
    """torch.optim.Adam(params, lr=lr): no decay (wd unused)."""
    return theta - lr * g / (g.abs() + eps)  # θ ← θ − lr·m̂/(√v̂ + ε)


def adamw_first_step(theta, g, lr, wd, eps):
    """torch.optim.AdamW(params, lr=lr, weight_decay=wd): the decay shrinks θ outside the adaptive step."""
    theta = theta * (1 - lr * wd)  # θ ← θ·(1 − lr·wd)
    return theta - lr * g / (g.abs() + eps)  # θ ← θ − lr·m̂/(√v̂ + ε)


def adam_l2_first_step(theta, g, lr, wd, eps):
    """torch.optim.Adam(params, lr=lr, weight_decay=wd): the decay joins the gradient, then is divided by √v̂."""
    g = g + wd * theta  # g ← g + wd·θ
    return theta - lr * g / (g.abs() + eps)  # θ ← θ − lr·m̂/(√v̂ + ε): where |g| is large the decay all but vanishes


FIRST_STEP = {"Adam": adam_first_step, "Adam (L2 weight_decay)": adam_l2_first_step, "AdamW": adamw_first_step}


def surface_figure(result: SurfaceResult | DecayResult, grid: SurfaceResult, height: int = 460) -> go.Figure:
    """Contour of log10(1 + loss) with each optimizer's path; a cross marks where each stopped."""
    s = SURFACES[grid.surface]
    fig = go.Figure()
    # no hover on the contour: three decimals of log10(1 + f) draw the same lines in a third of the JSON
    z = [[round(v, 3) for v in row] for row in grid.grid_z]
    fig.add_contour(x=grid.grid_x, y=grid.grid_y, z=z, colorscale="Greys", reversescale=True,
                    colorbar=dict(title="log10(1 + f)", thickness=12), contours=dict(showlabels=False), opacity=0.55,
                    hoverinfo="skip",
                    ncontours=25, name="log10(1 + loss)")
    for i, run in enumerate(result.runs):
        label = run.name + (f" (diverged at step {run.diverged_at})" if run.diverged_at else "")
        color = SERIES[i % len(SERIES)]
        fig.add_scatter(x=run.xs, y=run.ys, mode="lines+markers", name=label, marker=dict(size=3),
                        line=dict(color=color, width=2),
                        hovertemplate=f"{run.name}<br>x=%{{x:.4f}}, y=%{{y:.4f}}<extra></extra>")
        fig.add_scatter(x=[run.xs[-1]], y=[run.ys[-1]], mode="markers", showlegend=False,
                        marker=dict(symbol="x", size=11, color=color), hoverinfo="skip")
    fig.add_scatter(x=[s["start"][0]], y=[s["start"][1]], mode="markers", name="start",
                    marker=dict(symbol="circle-open", size=14, color=REFERENCE, line=dict(width=3)))
    fig.add_scatter(x=[s["minimum"][0]], y=[s["minimum"][1]], mode="markers", name="minimum",
                    marker=dict(symbol="star", size=16, color="gold", line=dict(color=REFERENCE, width=1.5)))
    fig.update_xaxes(range=list(s["x"]), title="x")
    fig.update_yaxes(range=list(s["y"]), title="y")
    return base_layout(fig, height=height)


def loss_curves_figure(result: SurfaceResult) -> go.Figure:
    """Loss per step for each optimizer, log scale."""
    fig = go.Figure()
    for i, run in enumerate(result.runs):
        fig.add_scatter(y=[max(v, 1e-12) for v in run.losses], mode="lines", name=run.name,
                        line=dict(color=SERIES[i % len(SERIES)]))
    fig.update_yaxes(type="log", title="loss")
    fig.update_xaxes(title="step")
    return base_layout(fig, height=300)
