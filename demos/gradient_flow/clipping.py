"""Gradient clipping: clip_grad_norm_ vs clip_grad_value_ on the same gradients, and a run it rescues."""

import math
from dataclasses import dataclass

import torch
from torch import nn

from demos.errors import InputError, quoted
from demos.parsing import parse_number

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
    code: str


@dataclass(frozen=True)
class ClipRun:
    lr: float
    max_norm: float
    loss_plain: tuple[float, ...]  # nan / inf kept: the run diverged there
    loss_clipped: tuple[float, ...]
    norm_plain: tuple[float, ...]  # total gradient norm before clipping, per step
    norm_clipped: tuple[float, ...]
    code: str

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
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))


def raw_gradients(seed: int = 0) -> list[torch.Tensor]:
    """The gradients of one batch of the unnormalized regression at init: large, uneven."""
    model = mlp(seed)
    x, y = regression_data(seed)
    nn.functional.mse_loss(model(x[:64]), y[:64]).backward()
    return [p.grad.clone() for p in model.parameters()]


def total_norm(grads: list[torch.Tensor]) -> float:
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])).item()


def compare_clipping(max_norm: float, clip_value: float) -> ClipCompare:
    """Clip copies of the same gradients both ways; report norms and whether the direction is kept."""
    max_norm, clip_value = check_clip(max_norm, "max_norm"), check_clip(clip_value, "clip_value")
    grads = raw_gradients()
    by_norm = [nn.Parameter(torch.zeros_like(g)) for g in grads]
    by_value = [nn.Parameter(torch.zeros_like(g)) for g in grads]
    for p, q, g in zip(by_norm, by_value, grads, strict=True):
        p.grad, q.grad = g.clone(), g.clone()
    returned = nn.utils.clip_grad_norm_(by_norm, max_norm).item()
    nn.utils.clip_grad_value_(by_value, clip_value)
    flat = torch.cat([g.flatten() for g in grads])
    flat_n = torch.cat([p.grad.flatten() for p in by_norm])
    flat_v = torch.cat([p.grad.flatten() for p in by_value])
    cos = nn.functional.cosine_similarity
    pick = torch.randperm(flat.numel(), generator=torch.Generator().manual_seed(0))[:MAX_POINTS]
    return ClipCompare(
        max_norm, clip_value, total_norm(grads), total_norm([p.grad for p in by_norm]),
        total_norm([p.grad for p in by_value]), returned,
        cos(flat, flat_n, dim=0).item(), cos(flat, flat_v, dim=0).item(),
        tuple(flat[pick].tolist()), tuple(flat_n[pick].tolist()), tuple(flat_v[pick].tolist()),
        compare_code(max_norm, clip_value),
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


def clipping_run(lr_text: str, max_norm: float) -> ClipRun:
    """The same run twice: without clipping and with clip_grad_norm_(max_norm)."""
    lr, max_norm = parse_lr(lr_text), check_clip(max_norm, "max_norm")
    plain, plain_norms = train(lr, None)
    clipped, clipped_norms = train(lr, max_norm)
    return ClipRun(lr, max_norm, tuple(plain), tuple(clipped), tuple(plain_norms), tuple(clipped_norms),
                   run_code(lr, max_norm))


_SETUP = '''import math
import torch
from torch import nn

g = torch.Generator().manual_seed(0)
x = torch.randn(512, 4, generator=g) * 10.0  # features not normalized
y = torch.sin(x[:, :1] / 10.0 * 2) + x[:, 1:2] / 10.0


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
'''


def compare_code(max_norm: float, clip_value: float) -> str:
    return _SETUP + f'''

model = mlp()
nn.functional.mse_loss(model(x[:64]), y[:64]).backward()
grads = [p.grad.clone() for p in model.parameters()]
a = [nn.Parameter(torch.zeros_like(g)) for g in grads]
b = [nn.Parameter(torch.zeros_like(g)) for g in grads]
for p, q, g in zip(a, b, grads):
    p.grad, q.grad = g.clone(), g.clone()
before = nn.utils.clip_grad_norm_(a, max_norm={max_norm!r})  # returns the norm BEFORE clipping
nn.utils.clip_grad_value_(b, clip_value={clip_value!r})
flat = torch.cat([g.flatten() for g in grads])
flat_a = torch.cat([p.grad.flatten() for p in a])
flat_b = torch.cat([p.grad.flatten() for p in b])
print("norm before", before.item(), "after norm clip", flat_a.norm().item(), "after value clip", flat_b.norm().item())
print("cosine kept:", nn.functional.cosine_similarity(flat, flat_a, dim=0).item(),
      nn.functional.cosine_similarity(flat, flat_b, dim=0).item())
'''


def run_code(lr: float, max_norm: float) -> str:
    return _SETUP + f'''

def train(max_norm):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr={lr!r}, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    losses = []
    for _ in range({RUN_STEPS}):
        idx = torch.randint(0, len(x), (64,), generator=gen)
        loss = nn.functional.mse_loss(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # inf: measures, never clips
        opt.step()
        with torch.no_grad():
            losses.append(nn.functional.mse_loss(model(x), y).item())
        if not math.isfinite(losses[-1]):
            break
    return losses


print("no clipping:", train(math.inf)[-1])
print("clip_grad_norm_({max_norm!r}):", train({max_norm!r})[-1])
'''
