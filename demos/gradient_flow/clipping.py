"""Gradient clipping: clip_grad_norm_ vs clip_grad_value_ on the same gradients, and a run it rescues."""

import math
from dataclasses import dataclass

import torch
from torch import nn

from demos.errors import InputError, quoted
from demos.parsing import parse_number
from demos.shown import Script, entry, script

MAX_POINTS = 1500  # gradient entries drawn in the scatter
RUN_STEPS = 100
MIN_LR, MAX_LR = 1e-4, 1.0
MIN_CLIP, MAX_CLIP = 0.01, 100.0
INPUT_SCALE = 10.0  # unnormalized features: the usual real-world cause of a first huge step


@dataclass(frozen=True)
class ClipCompare:
    max_norm: float
    clip_value: float
    norm_before: float
    norm_after_norm_clip: float
    norm_after_value_clip: float
    returned_norm: float  # what clip_grad_norm_ returned
    cosine_norm_clip: float  # direction kept: 1.0
    cosine_value_clip: float
    entries: tuple[float, ...]  # a sample of original gradient entries
    after_norm: tuple[float, ...]
    after_value: tuple[float, ...]
    code: Script


@dataclass(frozen=True)
class ClipRun:
    lr: float
    max_norm: float
    loss_plain: tuple[float, ...]  # nan / inf kept: the run diverged there
    loss_clipped: tuple[float, ...]
    norm_plain: tuple[float, ...]  # total gradient norm before clipping, per step
    norm_clipped: tuple[float, ...]
    code: Script

    @property
    def plain_diverged(self) -> bool:
        return not all(math.isfinite(v) for v in self.loss_plain)


def check_clip(value: float, name: str) -> float:
    if not isinstance(value, (int, float)) or not MIN_CLIP <= value <= MAX_CLIP:
        raise InputError(f"{name} must be between {MIN_CLIP} and {MAX_CLIP}; got {value}.")
    return float(value)


def parse_lr(text: str) -> float:
    """A learning rate typed as text, such as 0.1 or 1e-3, within [MIN_LR, MAX_LR]."""
    lr = parse_number(text, "Learning rate")
    if not math.isfinite(lr) or not MIN_LR <= lr <= MAX_LR:
        raise InputError(f"Learning rate: {quoted(text)} is out of range; it must be from {MIN_LR:g} to "
                         f"{MAX_LR:g}.")
    return lr


def regression_data(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs of scale INPUT_SCALE (not normalized), a smooth target of scale 1."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(512, 4, generator=g) * INPUT_SCALE
    y = torch.sin(x[:, :1] / INPUT_SCALE * 2) + x[:, 1:2] / INPUT_SCALE
    return x, y


def mlp(seed: int = 0) -> nn.Sequential:
    """4 -> 64 -> 64 -> 1 with ReLU, seeded."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))


def raw_gradients(seed: int = 0) -> list[torch.Tensor]:
    """The gradients of one batch of the unnormalized regression at init: large, uneven."""
    model = mlp(seed)
    x, y = regression_data(seed)
    nn.functional.mse_loss(model(x[:64]), y[:64]).backward()
    return [p.grad.clone() for p in model.parameters()]


def total_norm(grads: list[torch.Tensor]) -> float:
    """The norm of all gradients as one vector (what clip_grad_norm_ measures)."""
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])).item()


def clip_both_ways(grads: list[torch.Tensor], max_norm: float, clip_value: float):
    """Copies of the same gradients clipped by total norm and by value: the norm clip_grad_norm_ returned (the one
    before clipping) and both clipped gradient lists."""
    by_norm = [nn.Parameter(torch.zeros_like(g)) for g in grads]
    by_value = [nn.Parameter(torch.zeros_like(g)) for g in grads]
    for p, q, g in zip(by_norm, by_value, grads, strict=True):
        p.grad, q.grad = g.clone(), g.clone()
    returned = nn.utils.clip_grad_norm_(by_norm, max_norm)
    nn.utils.clip_grad_value_(by_value, clip_value)
    return returned.item(), [p.grad for p in by_norm], [q.grad for q in by_value]


def flat(grads: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([g.flatten() for g in grads])


def direction_kept(grads: list[torch.Tensor], clipped: list[torch.Tensor]) -> float:
    """Cosine between the gradient before and after clipping: 1.0 when only its length changed."""
    return nn.functional.cosine_similarity(flat(grads), flat(clipped), dim=0).item()


@entry(1.0, 0.01)
def compare_clipping(max_norm: float, clip_value: float) -> ClipCompare:
    """Clip copies of the same gradients both ways; report norms and whether the direction is kept."""
    max_norm, clip_value = check_clip(max_norm, "max_norm"), check_clip(clip_value, "clip_value")
    grads = raw_gradients()
    returned, by_norm, by_value = clip_both_ways(grads, max_norm, clip_value)
    pick = torch.randperm(flat(grads).numel(), generator=torch.Generator().manual_seed(0))[:MAX_POINTS]
    return ClipCompare(
        max_norm, clip_value, total_norm(grads), total_norm(by_norm), total_norm(by_value), returned,
        direction_kept(grads, by_norm), direction_kept(grads, by_value),
        tuple(flat(grads)[pick].tolist()), tuple(flat(by_norm)[pick].tolist()), tuple(flat(by_value)[pick].tolist()),
        compare_script(max_norm, clip_value),
    )


def train(lr: float, max_norm: float | None, seed: int = 0) -> tuple[list[float], list[float]]:
    """SGD with momentum on the unnormalized regression; full-data loss after each step."""
    model = mlp(seed)
    x, y = regression_data(seed)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    g = torch.Generator().manual_seed(seed + 1)
    losses, norms = [], []
    for _ in range(RUN_STEPS):
        idx = torch.randint(0, len(x), (64,), generator=g)
        loss = nn.functional.mse_loss(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm if max_norm else math.inf)
        opt.step()
        norms.append(norm.item())
        with torch.no_grad():
            losses.append(nn.functional.mse_loss(model(x), y).item())
        if not math.isfinite(losses[-1]):
            break  # nothing more to learn from a NaN run
    return losses, norms


@entry("0.5", 1.0)
def clipping_run(lr_text: str, max_norm: float) -> ClipRun:
    """The same run twice: without clipping and with clip_grad_norm_(max_norm)."""
    lr, max_norm = parse_lr(lr_text), check_clip(max_norm, "max_norm")
    plain, plain_norms = train(lr, None)
    clipped, clipped_norms = train(lr, max_norm)
    return ClipRun(lr, max_norm, tuple(plain), tuple(clipped), tuple(plain_norms), tuple(clipped_norms),
                   run_script(lr, max_norm))


def compare_script(max_norm: float, clip_value: float) -> Script:
    """The comparison, printing the norms and the cosines the page reports."""
    return script(regression_data, mlp, raw_gradients, total_norm, clip_both_ways, flat, direction_kept,
                  settings={"INPUT_SCALE": INPUT_SCALE, "max_norm": max_norm, "clip_value": clip_value},
                  imports="import torch\nfrom torch import nn", run="""
grads = raw_gradients()
returned, by_norm, by_value = clip_both_ways(grads, max_norm, clip_value)
print("norm before", total_norm(grads), "returned", returned)
print("after norm clip", total_norm(by_norm), "after value clip", total_norm(by_value))
print("cosine kept:", direction_kept(grads, by_norm), direction_kept(grads, by_value))""")


def run_script(lr: float, max_norm: float) -> Script:
    """Both runs, printing each one's last full-data loss and how many steps it ran."""
    return script(regression_data, mlp, train, imports="import math\n\nimport torch\nfrom torch import nn",
                  settings={"INPUT_SCALE": INPUT_SCALE, "RUN_STEPS": RUN_STEPS, "lr": lr, "max_norm": max_norm},
                  run="""
for clip in (None, max_norm):
    losses, norms = train(lr, clip)
    print("clip_grad_norm_", clip, "steps", len(losses), "last loss", losses[-1])""")
