"""One forward/backward across depth, a few training steps, and the fixes side by side."""

import math
from dataclasses import dataclass, replace

import torch
from torch import nn

from demos.errors import InputError
from demos.gradient_flow.network import NetConfig, batch, build, right_init, validate

MAX_STEPS = 12
LR = 0.1
HIST_BINS = 40
TINY = 1e-45  # smallest positive float32: an exact zero is drawn at this floor on log axes


@dataclass(frozen=True)
class Pass:
    """One forward/backward of one config: per-layer weight-gradient norms and activation stds."""

    cfg: NetConfig
    grad_norms: tuple[float, ...]
    act_stds: tuple[float, ...]
    loss: float


@dataclass(frozen=True)
class Histogram:
    layer: int
    edges: tuple[float, ...]  # log10 |gradient| bin edges
    counts: tuple[int, ...]
    zeros: int  # entries that are exactly 0 (no log)


@dataclass(frozen=True)
class FlowResult:
    cfg: NetConfig
    variants: tuple[Pass, ...]  # yours first, then + residual, + LayerNorm, full fix
    heatmap: tuple[tuple[float, ...], ...]  # [layer][step] gradient norm while training
    step_losses: tuple[float, ...]
    histograms: tuple[Histogram, ...]
    code: str

    @property
    def yours(self) -> Pass:
        return self.variants[0]

    @property
    def fixed(self) -> Pass:
        return self.variants[-1]


def one_pass(cfg: NetConfig, seed: int = 0) -> tuple[Pass, nn.Module]:
    """Forward and backward on one batch; norms read from each block's linear.weight.grad."""
    net = build(cfg, seed)
    x, y = batch(cfg, seed)
    stds = []
    h = x
    for block in net.blocks:
        h = block(h)
        stds.append(h.detach().std().item())
    loss = nn.functional.cross_entropy(net.head(h), y)
    loss.backward()
    norms = tuple(b.linear.weight.grad.norm().item() for b in net.blocks)
    return Pass(cfg, norms, tuple(stds), loss.item()), net


def fix_variants(cfg: NetConfig) -> tuple[NetConfig, ...]:
    """Your setting, + residual, + LayerNorm, and the full fix (right init + LayerNorm + residual)."""
    return (
        cfg,
        replace(cfg, residual=True),
        replace(cfg, norm="layer"),
        replace(cfg, init=right_init(cfg.activation), norm="layer", residual=True),
    )


def training_heatmap(cfg: NetConfig, steps: int, seed: int = 0) -> tuple[list[list[float]], list[float]]:
    """Plain SGD for a few real steps; every layer's gradient norm at every step (a fresh batch each step)."""
    net = build(cfg, seed)
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    grid = [[0.0] * steps for _ in range(cfg.depth)]
    losses = []
    for step in range(steps):
        x, y = batch(cfg, seed + 1 + step)
        loss = nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        for i, block in enumerate(net.blocks):
            grid[i][step] = block.linear.weight.grad.norm().item()
        opt.step()
        losses.append(loss.item())
    return grid, losses


def histogram(grad: torch.Tensor, layer: int, lo: float, hi: float) -> Histogram:
    """Counts of log10 |g| over fixed edges so layers can be compared on one axis."""
    mag = grad.abs().flatten()
    nonzero = mag[mag > 0]
    logs = nonzero.log10().clamp(lo, hi)
    counts = torch.histc(logs, bins=HIST_BINS, min=lo, max=hi)
    step = (hi - lo) / HIST_BINS
    edges = tuple(lo + i * step for i in range(HIST_BINS + 1))
    return Histogram(layer, edges, tuple(int(c) for c in counts.tolist()), int((mag == 0).sum()))


def histogram_layers(depth: int) -> list[int]:
    """First, one third, two thirds and last layer (1-based), without repeats."""
    return sorted({1, max(1, round(depth / 3)), max(1, round(2 * depth / 3)), depth})


def layer_histograms(net: nn.Module, depth: int) -> tuple[Histogram, ...]:
    grads = {i: net.blocks[i - 1].linear.weight.grad for i in histogram_layers(depth)}
    logs = [g.abs()[g != 0].log10() for g in grads.values()]
    finite = torch.cat([v[torch.isfinite(v)] for v in logs]) if logs else torch.zeros(0)
    lo = math.floor(finite.min().item()) if finite.numel() else -10.0
    hi = math.ceil(finite.max().item()) if finite.numel() else 0.0
    hi = max(hi, lo + 1)
    return tuple(histogram(g, i, lo, hi) for i, g in grads.items())


def gradient_flow(depth: int, width: int, activation: str, init: str, norm: str, residual: bool,
                  steps: int = 8) -> FlowResult:
    """Per-layer gradient norms and activation stds for your net and its fixes, a training heatmap, histograms."""
    cfg = validate(NetConfig(depth, width, activation, init, norm, bool(residual)))
    if not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise InputError(f"Training steps must be between 1 and {MAX_STEPS}; got {steps}.")
    passes = []
    yours_net = None
    for variant in fix_variants(cfg):
        p, net = one_pass(variant)
        passes.append(p)
        if yours_net is None:
            yours_net = net
    grid, losses = training_heatmap(cfg, steps)
    return FlowResult(
        cfg, tuple(passes), tuple(tuple(row) for row in grid), tuple(losses),
        layer_histograms(yours_net, depth), flow_code(cfg),
    )


def flow_code(cfg: NetConfig) -> str:
    """A standalone script that prints the per-layer gradient norms shown for your setting."""
    act = {"sigmoid": "nn.Sigmoid()", "tanh": "nn.Tanh()", "relu": "nn.ReLU()", "gelu": "nn.GELU()"}[cfg.activation]
    norm = {"none": "nn.Identity()", "batch": f"nn.BatchNorm1d({cfg.width})",
            "layer": f"nn.LayerNorm({cfg.width})"}[cfg.norm]
    init = {
        "default": "pass  # keep PyTorch's default init",
        "xavier": "nn.init.xavier_uniform_(lin.weight); nn.init.zeros_(lin.bias)",
        "kaiming": "nn.init.kaiming_normal_(lin.weight, nonlinearity='relu'); nn.init.zeros_(lin.bias)",
        "normal": "nn.init.normal_(lin.weight, 0.0, 1.0); nn.init.zeros_(lin.bias)",
        "small": "nn.init.normal_(lin.weight, 0.0, 0.01); nn.init.zeros_(lin.bias)",
    }[cfg.init]
    residual = "h + out" if cfg.residual else "out"
    return f'''import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear({cfg.width}, {cfg.width})
        self.norm = {norm}
        self.act = {act}

    def forward(self, h):
        out = self.act(self.norm(self.linear(h)))
        return {residual}


torch.manual_seed(0)
blocks = nn.ModuleList(Block() for _ in range({cfg.depth}))
head = nn.Linear({cfg.width}, 10)
for block in blocks:
    lin = block.linear
    {init}

g = torch.Generator().manual_seed(0)
x = torch.randn(64, {cfg.width}, generator=g)
y = torch.randint(0, 10, (64,), generator=g)
h = x
for block in blocks:
    h = block(h)
loss = nn.functional.cross_entropy(head(h), y)
loss.backward()
norms = [block.linear.weight.grad.norm().item() for block in blocks]
print("layer 1:", norms[0], " last layer:", norms[-1], " ratio:", norms[0] / max(norms[-1], 1e-45))
'''


# Heavy cases for `python -m bench`: the largest network the widgets allow.
BENCH_CASES = {
    "worst case: depth 50, width 512, 12 steps": lambda: gradient_flow(50, 512, "gelu", "normal", "batch", True, 12),
}
