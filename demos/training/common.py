"""Shared pieces of the training demos: the spiral task, the small classifier, validation helpers."""

import math

import torch
from torch import nn

from demos.errors import InputError, quoted
from demos.threads import ONE_THREAD_LINE

IMPORTS = f"import math\n\nimport torch\nfrom torch import nn\n\n{ONE_THREAD_LINE}"  # a training script's head


def check_range(value, name: str, low, high):
    """Return value if low <= value <= high, else an InputError naming the field and the limits."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{name} must be a number between {low} and {high}.")
    if not (math.isfinite(value) and low <= value <= high):
        raise InputError(f"{name} must be between {low} and {high}; got {value}.")
    return value


def check_int(value, name: str, low: int, high: int) -> int:
    """Return value if it is a whole number in [low, high], else an InputError."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{name} must be a whole number between {low} and {high}.")
    return check_range(value, name, low, high)


def check_choice(value, name: str, options) -> str:
    """Return value if it is one of options, else an InputError listing them."""
    if value not in options:
        raise InputError(f"{name} must be one of {', '.join(options)}; got {quoted(value)}.")
    return value


def spiral(n: int, seed: int, noise: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """Two interleaved spirals (one turn each): n points in 2-D and their class (0 or 1)."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 2
    t = torch.rand(n, generator=g) * 2 * math.pi + 0.5
    angle = t + math.pi * y
    x = torch.stack([t * torch.cos(angle), t * torch.sin(angle)], dim=1) / math.pi
    return x + noise * torch.randn(n, 2, generator=g), y


class SpiralNet(nn.Module):
    """2 -> hidden -> hidden -> 2 classifier; optional dropout and batch norm for the train/eval demos."""

    def __init__(self, hidden: int = 16, dropout: float = 0.0, batchnorm: bool = False):
        super().__init__()
        self.fc1 = nn.Linear(2, hidden)
        self.norm = nn.BatchNorm1d(hidden) if batchnorm else nn.Identity()
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, 2)

    def forward(self, x):
        x = torch.tanh(self.norm(self.fc1(x)))
        x = self.drop(x)
        x = torch.tanh(self.fc2(x))
        return self.out(x)


def short(values, n: int = 4) -> str:
    """The first n entries of a tensor as text, for tables."""
    flat = values.detach().flatten()[:n].tolist()
    more = ", …" if values.numel() > n else ""
    return "[" + ", ".join(f"{v:+.4f}" for v in flat) + more + "]"
