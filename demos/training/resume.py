"""Checkpoint and exact resume: N steps straight vs k steps, save, load into fresh objects, continue; and the traps."""

import io
from dataclasses import dataclass

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import nn

from demos.style import COLORS, base_layout
from demos.training.common import HEADER, SPIRAL_SOURCE, SpiralNet, check_int, single_threaded, spiral

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
    code: str


def _build(seed: int, total: int):
    """Model, Adam, warmup + cosine schedule and a GradScaler, as a fresh process would build them."""
    torch.manual_seed(seed)
    model = SpiralNet(16, dropout=0.1)
    opt = torch.optim.Adam(model.parameters(), lr=PEAK_LR)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, schedulers=[
        torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=WARMUP),
        torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total - WARMUP)], milestones=[WARMUP])
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=5)
    return model, opt, sched, scaler


def _train(objs, x, y, steps: range, log: dict):
    model, opt, sched, scaler = objs
    model.train()
    for _ in steps:
        idx = torch.randint(0, N_POINTS, (BATCH,))  # batch sampling draws from the global RNG, like dropout
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        scaler.scale(loss).backward()
        log["lrs"].append(opt.param_groups[0]["lr"])
        scaler.step(opt)
        scaler.update()
        sched.step()
        log["losses"].append(loss.item())
        log["params"].append(torch.cat([p.detach().flatten() for p in model.parameters()]))


def _checkpoint(objs, step: int) -> bytes:
    model, opt, sched, scaler = objs
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                "scaler": scaler.state_dict(), "step": step, "rng": torch.get_rng_state()}, buf)
    return buf.getvalue()


def _resume(blob: bytes, variant: str, seed: int, total: int):
    """Fresh objects (built as a new process would, other seed), then load what this variant restores."""
    ckpt = torch.load(io.BytesIO(blob), weights_only=True)
    model, opt, sched, scaler = _build(seed + 1, total)
    model.load_state_dict(ckpt["model"])
    if variant != "no_optimizer":
        opt.load_state_dict(ckpt["optimizer"])
    if variant != "no_scheduler":
        sched.load_state_dict(ckpt["scheduler"])
    scaler.load_state_dict(ckpt["scaler"])
    if variant != "no_rng":
        torch.set_rng_state(ckpt["rng"])
    return (model, opt, sched, scaler), ckpt["step"]


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


@single_threaded
def resume_demo(total: int = 120, split: int = 60, seed: int = 0) -> ResumeResult:
    """Train `total` steps straight; then `split` steps, checkpoint, resume four ways and finish."""
    check_int(total, "Total steps", 20, MAX_STEPS)
    check_int(split, "Checkpoint step", 1, total - 1)
    check_int(seed, "Seed", 0, 10_000)
    x, y = spiral(N_POINTS, seed)
    straight_log = {"losses": [], "lrs": [], "params": []}
    _train(_build(seed, total), x, y, range(total), straight_log)
    ref = straight_log["params"]
    first_log = {"losses": [], "lrs": [], "params": []}
    objs = _build(seed, total)
    _train(objs, x, y, range(split), first_log)
    blob = _checkpoint(objs, split)
    resumed = {}
    for variant in VARIANTS:
        log = {k: list(v) for k, v in first_log.items()}
        fresh, step = _resume(blob, variant, seed, total)
        _train(fresh, x, y, range(step, total), log)
        resumed[variant] = _run(VARIANTS[variant], log, ref)
    keys = tuple(torch.load(io.BytesIO(blob), weights_only=True))
    return ResumeResult(total, split, keys, len(blob), _run("Straight run", straight_log, ref), resumed,
                        resume_code(total, split, seed))


def _run(name: str, log: dict, ref) -> Run:
    dist = tuple((p - r).abs().max().item() for p, r in zip(log["params"], ref, strict=True))
    return Run(name, tuple(log["losses"]), tuple(log["lrs"]), dist, dist[-1])


def resume_code(total: int, split: int, seed: int) -> str:
    return "import io\n" + HEADER + SPIRAL_SOURCE + f"""

def build(seed):
    torch.manual_seed(seed)
    model = SpiralNet(16, dropout=0.1)
    opt = torch.optim.Adam(model.parameters(), lr={PEAK_LR})
    sched = torch.optim.lr_scheduler.SequentialLR(opt, schedulers=[
        torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters={WARMUP}),
        torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max={total - WARMUP})], milestones=[{WARMUP}])
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=5)
    return model, opt, sched, scaler


def train(model, opt, sched, scaler, steps):
    for _ in steps:
        idx = torch.randint(0, {N_POINTS}, ({BATCH},))     # global RNG: batch sampling
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])   # global RNG: dropout
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        sched.step()


x, y = spiral({N_POINTS}, {seed})
straight = build({seed})
train(*straight, range({total}))

model, opt, sched, scaler = build({seed})
train(model, opt, sched, scaler, range({split}))
buf = io.BytesIO()
torch.save({{"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
            "scaler": scaler.state_dict(), "step": {split}, "rng": torch.get_rng_state()}}, buf)

ckpt = torch.load(io.BytesIO(buf.getvalue()), weights_only=True)
model, opt, sched, scaler = build({seed + 1})           # fresh objects, as in a new process
model.load_state_dict(ckpt["model"])
opt.load_state_dict(ckpt["optimizer"])                  # Adam's exp_avg / exp_avg_sq / step
sched.load_state_dict(ckpt["scheduler"])                # where the schedule is
scaler.load_state_dict(ckpt["scaler"])                  # the loss scale and its growth tracker
torch.set_rng_state(ckpt["rng"])                        # dropout masks and batch order continue identically
train(model, opt, sched, scaler, range(ckpt["step"], {total}))
diff = max((a - b).abs().max().item() for a, b in zip(model.parameters(), straight[0].parameters()))
print("max |difference| vs the straight run:", diff)    # 0.0
"""


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
