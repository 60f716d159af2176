"""Checkpoint and exact resume: N steps straight vs k steps, save, load into fresh objects, continue; and the traps."""

import io
from dataclasses import dataclass

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import nn

from demos.shown import Script, entry, script
from demos.style import COLORS, base_layout
from demos.threads import single_threaded
from demos.training.common import IMPORTS, SpiralNet, check_int, spiral

VARIANTS = {
    "full": "Resume with everything",
    "no_optimizer": "Trap: fresh optimizer (Adam moments lost)",
    "no_scheduler": "Trap: fresh scheduler (its warmup re-runs on the restored LR)",
    "no_rng": "Trap: RNG state not restored (dropout, batch sampling)",
}
SHORT = {"full": "everything restored", "no_optimizer": "no optimizer state", "no_scheduler": "no scheduler state",
         "no_rng": "no RNG state"}
N_POINTS, BATCH, WARMUP = 256, 32, 10
PEAK_LR = 0.05
MAX_STEPS = 300


@dataclass(frozen=True)
class Run:
    name: str
    losses: tuple[float, ...]
    lrs: tuple[float, ...]
    distance: tuple[float, ...]  # max |θ − θ_straight| after each step
    max_diff: float  # at the end


@dataclass(frozen=True)
class ResumeResult:
    total: int
    split: int
    checkpoint_keys: tuple[str, ...]
    checkpoint_bytes: int
    straight: Run
    resumed: dict  # variant -> Run
    code: Script


# The torch core: the demo runs these functions and the page shows their source (demos/shown.py).


def build(seed: int, total: int):
    """Model, Adam, warmup + cosine schedule and a GradScaler, as a fresh process would build them."""
    torch.manual_seed(seed)
    model = SpiralNet(16, dropout=0.1)
    opt = torch.optim.Adam(model.parameters(), lr=PEAK_LR)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, schedulers=[
        torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=WARMUP),
        torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total - WARMUP)], milestones=[WARMUP])
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=5)
    return model, opt, sched, scaler


def train(model, opt, sched, scaler, x, y, steps, watch=None):
    """Train over `steps`; watch(model, opt, loss), if given, sees each step before the schedule moves on."""
    model.train()
    for _ in steps:
        idx = torch.randint(0, N_POINTS, (BATCH,))  # global RNG: batch sampling
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])  # global RNG: dropout
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if watch:
            watch(model, opt, loss)
        sched.step()


def checkpoint(model, opt, sched, scaler, step: int) -> bytes:
    """Everything a resume needs, saved with torch.save."""
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                "scaler": scaler.state_dict(), "step": step, "rng": torch.get_rng_state()}, buf)
    return buf.getvalue()


def resume(blob: bytes, seed: int, total: int, skip: str = ""):
    """Fresh objects (built as a new process would, another seed), then every state the checkpoint holds except
    `skip` (the traps: "optimizer", "scheduler" or "rng")."""
    ckpt = torch.load(io.BytesIO(blob), weights_only=True)
    model, opt, sched, scaler = build(seed + 1, total)
    model.load_state_dict(ckpt["model"])
    if skip != "optimizer":
        opt.load_state_dict(ckpt["optimizer"])  # Adam's exp_avg / exp_avg_sq / step
    if skip != "scheduler":
        sched.load_state_dict(ckpt["scheduler"])  # where the schedule is
    scaler.load_state_dict(ckpt["scaler"])  # the loss scale and its growth tracker
    if skip != "rng":
        torch.set_rng_state(ckpt["rng"])  # dropout masks and batch order continue identically
    return (model, opt, sched, scaler), ckpt["step"]


SKIPPED = {"full": "", "no_optimizer": "optimizer", "no_scheduler": "scheduler", "no_rng": "rng"}


class _Log:
    """Each step's loss, learning rate and flat parameters (a train() watcher)."""

    def __init__(self, losses=(), lrs=(), params=()):
        self.losses, self.lrs, self.params = list(losses), list(lrs), list(params)

    def __call__(self, model, opt, loss):
        self.lrs.append(opt.param_groups[0]["lr"])
        self.losses.append(loss.item())
        self.params.append(torch.cat([p.detach().flatten() for p in model.parameters()]))

    def copy(self) -> "_Log":
        return _Log(self.losses, self.lrs, self.params)


def scheduler_trap(r: ResumeResult) -> str:
    """What the fresh scheduler did to the learning rate, read from the logged LRs."""
    lrs, straight = r.resumed["no_scheduler"].lrs, r.straight.lrs
    warm = lrs[r.split:r.split + WARMUP]
    top = max(warm)
    said = (f"Without the scheduler state the schedule neither continues nor restarts: the optimizer state restores "
            f"LR {warm[0]:.3g}, and the fresh LinearLR warmup multiplies whatever LR it finds by its step ratio, "
            f"reaching {top:.3g} ({top / PEAK_LR:.2g}× the peak {PEAK_LR:g}) where the straight run used "
            f"{straight[r.split + warm.index(top)]:.3g}")
    after = r.split + WARMUP
    if after < r.total:
        said += (f"; then the fresh cosine starts over at {lrs[after]:.3g}, where the straight run was at "
                 f"{straight[after]:.3g}")
    return said + "."


@entry(24, 12, 1, entries=16)  # five runs of per-step records each
@single_threaded
def resume_demo(total: int = 120, split: int = 60, seed: int = 0) -> ResumeResult:
    """Train `total` steps straight; then `split` steps, checkpoint, resume four ways and finish."""
    check_int(total, "Total steps", 20, MAX_STEPS)
    check_int(split, "Checkpoint step", 1, total - 1)
    check_int(seed, "Seed", 0, 10_000)
    x, y = spiral(N_POINTS, seed)
    straight_log, first_log = _Log(), _Log()
    train(*build(seed, total), x, y, range(total), straight_log)
    first = build(seed, total)
    train(*first, x, y, range(split), first_log)
    blob = checkpoint(*first, split)
    resumed = {}
    for variant in VARIANTS:
        log = first_log.copy()
        fresh, step = resume(blob, seed, total, SKIPPED[variant])
        train(*fresh, x, y, range(step, total), log)
        resumed[variant] = _run(VARIANTS[variant], log, straight_log.params)
    keys = tuple(torch.load(io.BytesIO(blob), weights_only=True))
    return ResumeResult(total, split, keys, len(blob), _run("Straight run", straight_log, straight_log.params),
                        resumed, resume_script(total, split, seed))


def _run(name: str, log: _Log, ref) -> Run:
    dist = tuple((p - r).abs().max().item() for p, r in zip(log.params, ref, strict=True))
    return Run(name, tuple(log.losses), tuple(log.lrs), dist, dist[-1])


def resume_script(total: int, split: int, seed: int) -> Script:
    """Straight run, then split + checkpoint + full resume, printing how far the two ended apart."""
    return script(spiral, SpiralNet, build, train, checkpoint, resume, imports=f"import io\n{IMPORTS}",
                  settings={"N_POINTS": N_POINTS, "BATCH": BATCH, "WARMUP": WARMUP, "PEAK_LR": PEAK_LR,
                            "total": total, "split": split, "seed": seed},
                  run="""
x, y = spiral(N_POINTS, seed)
straight = build(seed, total)
train(*straight, x, y, range(total))

first = build(seed, total)
train(*first, x, y, range(split))
blob = checkpoint(*first, split)
resumed, step = resume(blob, seed, total)  # fresh objects, as in a new process
train(*resumed, x, y, range(step, total))
diff = max((a - b).abs().max().item() for a, b in zip(resumed[0].parameters(), straight[0].parameters()))
print("max |difference| vs the straight run:", diff)  # 0.0""")


def resume_figure(r: ResumeResult, variants) -> go.Figure:
    """Top: loss per step (straight vs resumed). Middle: the LR. Bottom: max |θ − θ_straight| per step."""
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06, row_heights=[0.4, 0.25, 0.35])
    colors = {"full": COLORS["activation"], "no_optimizer": COLORS["optimizer_state"],
              "no_scheduler": COLORS["gradient"], "no_rng": COLORS["error"]}
    fig.add_scatter(y=r.straight.losses, name="straight run", line=dict(color=COLORS["parameter"], width=4),
                    row=1, col=1)
    fig.add_scatter(y=r.straight.lrs, showlegend=False, line=dict(color=COLORS["parameter"], width=4), row=2, col=1)
    for v in variants:
        run = r.resumed[v]
        dash = "dash" if v == "full" else "solid"
        x = list(range(r.split, r.total))
        fig.add_scatter(x=x, y=run.losses[r.split:], name=run.name, line=dict(color=colors[v], dash=dash, width=2),
                        row=1, col=1)
        fig.add_scatter(x=x, y=run.lrs[r.split:], showlegend=False, line=dict(color=colors[v], dash=dash), row=2, col=1)
        fig.add_scatter(x=x, y=run.distance[r.split:], showlegend=False, line=dict(color=colors[v], dash=dash),
                        row=3, col=1)
    fig.add_vline(x=r.split - 0.5, line_dash="dot", annotation_text="checkpoint")
    fig.update_yaxes(title="loss", row=1, col=1)
    fig.update_yaxes(title="lr", row=2, col=1)
    fig.update_yaxes(title="max |Δθ| vs straight", row=3, col=1)
    fig.update_xaxes(title="step", row=3, col=1)
    return base_layout(fig, height=560)
