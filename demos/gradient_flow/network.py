"""A deep MLP whose activation, init, normalization and residual connections are chosen by the user."""

from dataclasses import dataclass

import torch
from torch import nn

from demos.errors import InputError, quoted

ACTIVATIONS = {"sigmoid": "Sigmoid", "tanh": "Tanh", "relu": "ReLU", "gelu": "GELU"}  # torch.nn class names
INITS = ("default", "xavier", "kaiming", "normal", "small")
INIT_LABELS = {
    "default": "PyTorch default", "xavier": "Xavier", "kaiming": "Kaiming", "normal": "N(0, 1)",
    "small": "too small N(0, 0.01²)",
}
NORMS = ("none", "batch", "layer")
NORM_LAYERS = {"none": "Identity", "batch": "BatchNorm1d", "layer": "LayerNorm"}  # Identity ignores width
NORM_LABELS = {"none": "no norm", "batch": "BatchNorm", "layer": "LayerNorm"}
MAX_DEPTH, MAX_WIDTH, MIN_WIDTH = 50, 512, 4
BATCH, CLASSES = 64, 10


@dataclass(frozen=True)
class NetConfig:
    """Everything that defines the network; plain values so results can be cached on it."""

    depth: int
    width: int
    activation: str
    init: str
    norm: str
    residual: bool


def label(cfg: NetConfig) -> str:
    """The config in words, for legends."""
    res = " + residual" if cfg.residual else ""
    return f"{cfg.activation}, {INIT_LABELS[cfg.init]}, {NORM_LABELS[cfg.norm]}{res}"


def right_init(activation: str) -> str:
    """Kaiming for the ReLU family, Xavier for the saturating ones."""
    return "kaiming" if activation in ("relu", "gelu") else "xavier"


def validate(cfg: NetConfig) -> NetConfig:
    """The config itself, or an InputError naming the bad field and its limit."""
    if not isinstance(cfg.depth, int) or not 1 <= cfg.depth <= MAX_DEPTH:
        raise InputError(f"Depth must be a whole number between 1 and {MAX_DEPTH}; got {cfg.depth}.")
    if not isinstance(cfg.width, int) or not MIN_WIDTH <= cfg.width <= MAX_WIDTH:
        raise InputError(f"Width must be a whole number between {MIN_WIDTH} and {MAX_WIDTH}; got {cfg.width}.")
    if cfg.activation not in ACTIVATIONS:
        raise InputError(f"Activation must be one of {', '.join(ACTIVATIONS)}; got {quoted(cfg.activation)}.")
    if cfg.init not in INITS:
        raise InputError(f"Initialization must be one of {', '.join(INITS)}; got {quoted(cfg.init)}.")
    if cfg.norm not in NORMS:
        raise InputError(f"Normalization must be one of {', '.join(NORMS)}; got {quoted(cfg.norm)}.")
    return cfg


class Block(nn.Module):
    """linear -> norm -> activation, optionally added to its input."""

    def __init__(self, width: int, activation: str, norm: str, residual: bool):
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.norm = getattr(nn, NORM_LAYERS[norm])(width)
        self.act = getattr(nn, ACTIVATIONS[activation])()
        self.residual = residual

    def forward(self, h):
        out = self.act(self.norm(self.linear(h)))
        return h + out if self.residual else out


class DeepNet(nn.Module):
    """depth blocks of equal width, then a linear head to CLASSES logits."""

    def __init__(self, cfg: NetConfig):
        super().__init__()
        self.blocks = nn.ModuleList(Block(cfg.width, cfg.activation, cfg.norm, cfg.residual) for _ in range(cfg.depth))
        self.head = nn.Linear(cfg.width, CLASSES)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def init_linear(linear: nn.Linear, init: str) -> None:
    """Apply one of INITS to a linear layer (biases zeroed except for PyTorch's default)."""
    if init == "default":
        return
    if init == "xavier":
        nn.init.xavier_uniform_(linear.weight)
    elif init == "kaiming":
        nn.init.kaiming_normal_(linear.weight, nonlinearity="relu")
    elif init == "normal":
        nn.init.normal_(linear.weight, 0.0, 1.0)
    elif init == "small":
        nn.init.normal_(linear.weight, 0.0, 0.01)
    nn.init.zeros_(linear.bias)


def build(cfg: NetConfig, seed: int = 0) -> DeepNet:
    """The seeded network for a config."""
    torch.manual_seed(seed)
    net = DeepNet(cfg)
    for block in net.blocks:
        init_linear(block.linear, cfg.init)
    return net


def batch(cfg: NetConfig, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded batch: standard normal inputs, random class labels."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(BATCH, cfg.width, generator=g), torch.randint(0, CLASSES, (BATCH,), generator=g)
