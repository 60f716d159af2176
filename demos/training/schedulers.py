"""Learning rate over steps, each curve read from a real torch.optim.lr_scheduler as it steps."""

from dataclasses import dataclass

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import nn

from demos.shown import Script, entry, script
from demos.style import COLORS, SERIES, base_layout
from demos.threads import single_threaded
from demos.training.common import IMPORTS, SpiralNet, check_int, check_range, spiral

SCHEDULERS = ("StepLR", "CosineAnnealingLR", "OneCycleLR", "Warmup + cosine (SequentialLR)")
MAX_TOTAL = 1000
MAX_EPOCHS = 60


@dataclass(frozen=True)
class ScheduleResult:
    total: int
    base_lr: float
    curves: dict  # scheduler name -> tuple of the lr used at each step
    code: Script


@dataclass(frozen=True)
class PlateauResult:
    epochs: int
    val_losses: tuple[float, ...]
    lrs: tuple[float, ...]  # lr used during each epoch
    reductions: tuple[int, ...]  # epochs after which the lr was cut
    code: Script


def make_scheduler(name: str, opt, total: int, base_lr: float, step_size: int, gamma: float, warmup: int):
    """The scheduler called `name`."""
    sch = torch.optim.lr_scheduler
    if name == "StepLR":
        return sch.StepLR(opt, step_size=step_size, gamma=gamma)
    if name == "CosineAnnealingLR":
        return sch.CosineAnnealingLR(opt, T_max=total)
    if name == "OneCycleLR":
        return sch.OneCycleLR(opt, max_lr=base_lr, total_steps=total)
    warm = sch.LinearLR(opt, start_factor=0.01, end_factor=1.0, total_iters=warmup)
    cos = sch.CosineAnnealingLR(opt, T_max=total - warmup)
    return sch.SequentialLR(opt, schedulers=[warm, cos], milestones=[warmup])


def lr_curve(name: str, total: int, base_lr: float, step_size: int, gamma: float, warmup: int) -> tuple[float, ...]:
    """Step a fresh optimizer and scheduler `total` times; record the lr each optimizer.step() used."""
    p = nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=base_lr)
    sched = make_scheduler(name, opt, total, base_lr, step_size, gamma, warmup)
    lrs = []
    for step in range(total):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        if step < total - 1:  # OneCycleLR allows exactly total_steps - 1 further steps
            sched.step()
    return tuple(lrs)


def validate(total, base_lr, step_size, gamma, warmup) -> None:
    check_int(total, "Total steps", 10, MAX_TOTAL)
    check_range(base_lr, "Base learning rate", 1e-5, 1.0)
    check_int(step_size, "StepLR step_size", 1, MAX_TOTAL)
    check_range(gamma, "StepLR gamma", 0.01, 1.0)
    check_int(warmup, "Warmup steps", 1, total - 1)


@entry(40, 0.2, 7, 0.3, 5)
@single_threaded
def schedules(total: int = 100, base_lr: float = 0.1, step_size: int = 30, gamma: float = 0.5,
              warmup: int = 10) -> ScheduleResult:
    """The learning rate of each scheduler over `total` steps."""
    validate(total, base_lr, step_size, gamma, warmup)
    curves = {n: lr_curve(n, total, base_lr, step_size, gamma, warmup) for n in SCHEDULERS}
    return ScheduleResult(total, base_lr, curves, schedules_script(total, base_lr, step_size, gamma, warmup))


def schedules_script(total, base_lr, step_size, gamma, warmup) -> Script:
    """Every scheduler's curve, printed as every tenth learning rate."""
    return script(make_scheduler, lr_curve, imports="import torch\nfrom torch import nn",
                  settings={"SCHEDULERS": SCHEDULERS, "total": total, "base_lr": base_lr, "step_size": step_size,
                            "gamma": gamma, "warmup": warmup},
                  run="""
for name in SCHEDULERS:
    lrs = lr_curve(name, total, base_lr, step_size, gamma, warmup)
    print(name, lrs[:: max(1, total // 10)])""")


@entry(12, 0.5, 0.5, 0, 3)
@single_threaded
def plateau(epochs: int = 40, lr: float = 0.5, factor: float = 0.5, patience: int = 3, seed: int = 0) -> PlateauResult:
    """Train the spiral classifier; feed each epoch's validation loss to ReduceLROnPlateau."""
    check_int(epochs, "Epochs", 5, MAX_EPOCHS)
    check_range(lr, "Learning rate", 1e-3, 1.0)
    check_range(factor, "Plateau factor", 0.05, 0.95)
    check_int(patience, "Patience", 0, 20)
    check_int(seed, "Seed", 0, 10_000)
    history = train_with_plateau(epochs, lr, factor, patience, seed)
    cuts = tuple(epoch for epoch, (used, _, after) in enumerate(history) if after < used)
    code = plateau_script(epochs, lr, factor, patience, seed)
    return PlateauResult(epochs, tuple(h[1] for h in history), tuple(h[0] for h in history), cuts, code)


def train_with_plateau(epochs, lr, factor, patience, seed):
    """Train the spiral classifier, feeding each epoch's validation loss to ReduceLROnPlateau; per epoch the
    learning rate it trained with, its validation loss, and the learning rate the scheduler set next."""
    torch.manual_seed(seed)
    x, y = spiral(256, seed)
    x_val, y_val = spiral(256, seed + 1)
    model = SpiralNet(16)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=factor, patience=patience)
    loss_fn = nn.CrossEntropyLoss()
    history = []
    for _ in range(epochs):
        used = opt.param_groups[0]["lr"]
        for idx in torch.randperm(256).split(64):
            opt.zero_grad()
            loss_fn(model(x[idx]), y[idx]).backward()
            opt.step()
        with torch.no_grad():
            val = loss_fn(model(x_val), y_val).item()
        scheduler.step(val)  # the plateau scheduler needs the metric
        history.append((used, val, opt.param_groups[0]["lr"]))
    return history


def plateau_script(epochs, lr, factor, patience, seed) -> Script:
    """The plateau run, printing each epoch's learning rate and validation loss."""
    return script(spiral, SpiralNet, train_with_plateau, imports=IMPORTS,
                  settings={"epochs": epochs, "lr": lr, "factor": factor, "patience": patience, "seed": seed},
                  run="""
for epoch, (used, val, _) in enumerate(train_with_plateau(epochs, lr, factor, patience, seed)):
    print(epoch, used, val)""")


def schedules_figure(result: ScheduleResult, chosen) -> go.Figure:
    """LR vs step, one line per scheduler."""
    fig = go.Figure()
    for i, name in enumerate(SCHEDULERS):
        if name in chosen:
            fig.add_scatter(y=result.curves[name], mode="lines", name=name, line=dict(color=SERIES[i], width=2.5),
                            hovertemplate=f"{name}<br>step %{{x}}: lr %{{y:.5g}}<extra></extra>")
    fig.update_xaxes(title="step (optimizer.step() calls)")
    fig.update_yaxes(title="learning rate")
    return base_layout(fig, height=360)


def plateau_figure(result: PlateauResult) -> go.Figure:
    """Validation loss (left) and the learning rate ReduceLROnPlateau set (right, log scale)."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_scatter(y=result.val_losses, mode="lines+markers", name="validation loss",
                    line=dict(color=COLORS["activation"]), secondary_y=False)
    fig.add_scatter(y=result.lrs, mode="lines", name="learning rate", line=dict(color=COLORS["optimizer_state"],
                    shape="hv", width=3), secondary_y=True)
    for epoch in result.reductions:
        fig.add_vline(x=epoch + 0.5, line_dash="dot", line_color=COLORS["idle"])
    fig.update_xaxes(title="epoch")
    fig.update_yaxes(title="validation loss", secondary_y=False)
    levels = sorted(set(result.lrs))  # each learning rate the scheduler set, labelled in full on the log axis
    fig.update_yaxes(title="learning rate", type="log", secondary_y=True, tickvals=levels,
                     ticktext=[f"{v:.3g}" for v in levels], showgrid=False)
    return base_layout(fig, height=340)
