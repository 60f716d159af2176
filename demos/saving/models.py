"""Small models and a seeded synthetic task shared by the saving demos."""

import torch
from torch import nn

from demos.errors import InputError

MAX_WIDTH = 512
MAX_DEPTH = 4


class MLP(nn.Module):
    """Linear-heavy classifier: `depth` hidden Linear+ReLU blocks, then a Linear head."""

    def __init__(self, d_in: int = 16, width: int = 64, depth: int = 2, classes: int = 4):
        super().__init__()
        layers, d = [], d_in
        for _ in range(depth):
            layers += [nn.Linear(d, width), nn.ReLU()]
            d = width
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        h = self.body(x)
        return self.head(h)


class WithBuffer(nn.Module):
    """A Linear, a BatchNorm (running stats are buffers) and a non-persistent buffer."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 4)
        self.norm = nn.BatchNorm1d(4)
        self.register_buffer("scale", torch.ones(4), persistent=False)

    def forward(self, x):
        h = self.lin(x)
        h = self.norm(h)
        return h * self.scale


class Branchy(nn.Module):
    """Data-dependent control flow: doubles the output for inputs with a positive sum, negates it otherwise."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        if x.sum() > 0:
            return h * 2
        return -h


class BranchyCond(Branchy):
    """The same model written with torch.cond, so torch.export can capture both branches."""

    def forward(self, x):
        h = self.lin(x)
        return torch.cond(x.sum() > 0, lambda h: h * 2, lambda h: -h, (h,))


def check_size(width: int, depth: int) -> None:
    if not 8 <= width <= MAX_WIDTH:
        raise InputError(f"Width must be between 8 and {MAX_WIDTH}; got {width}.")
    if not 1 <= depth <= MAX_DEPTH:
        raise InputError(f"Depth must be between 1 and {MAX_DEPTH}; got {depth}.")


def synthetic_task(n: int, d_in: int = 16, classes: int = 4, seed: int = 0):
    """Gaussian inputs labelled by a fixed random linear teacher: learnable, seeded, no download."""
    g = torch.Generator().manual_seed(seed)
    teacher = torch.randn(d_in, classes, generator=torch.Generator().manual_seed(1234))
    x = torch.randn(n, d_in, generator=g)
    y = (x @ teacher).argmax(dim=1)
    return x, y


def train_mlp(width: int = 64, depth: int = 2, steps: int = 150, seed: int = 0) -> MLP:
    """An MLP trained with Adam on the synthetic task (about a second on 2 cores)."""
    torch.manual_seed(seed)
    model = MLP(width=width, depth=depth)
    x, y = synthetic_task(2048, seed=seed)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(steps):
        idx = torch.arange(step * 64, step * 64 + 64) % len(x)
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()
