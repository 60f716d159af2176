"""Dead ReLUs: units that output zero for every input, per layer, before and after training."""

import math
from dataclasses import dataclass
from functools import lru_cache

import torch
from torch import nn

from demos.errors import InputError, quoted

LRS = (0.001, 0.01, 0.1, 0.3, 1.0)
INITS = ("kaiming", "default", "negative_bias")
INIT_LABELS = {"kaiming": "Kaiming", "default": "PyTorch default", "negative_bias": "bias = -1"}
DEPTH, WIDTH, STEPS, EVAL = 6, 64, 60, 1024
GOOD = (0.01, "kaiming")


@dataclass(frozen=True)
class DeadRun:
    lr: float
    init: str
    dead_before: tuple[float, ...]  # fraction of units silent on every one of EVAL inputs, per layer
    dead_after: tuple[float, ...]
    final_loss: float
    finite: bool  # False: the weights went NaN/inf, and every unit reads as silent


@dataclass(frozen=True)
class DeadResult:
    yours: DeadRun
    good: DeadRun
    code: str


def relu_net(init: str, seed: int = 0) -> tuple[nn.Sequential, list[nn.Linear]]:
    torch.manual_seed(seed)
    linears = [nn.Linear(16 if i == 0 else WIDTH, WIDTH) for i in range(DEPTH)]
    for lin in linears:
        if init == "kaiming":
            nn.init.kaiming_normal_(lin.weight, nonlinearity="relu")
            nn.init.zeros_(lin.bias)
        elif init == "negative_bias":
            nn.init.constant_(lin.bias, -1.0)
    layers = [m for lin in linears for m in (lin, nn.ReLU())]
    return nn.Sequential(*layers, nn.Linear(WIDTH, 1)), linears


def dead_fractions(linears: list[nn.Linear], x: torch.Tensor) -> tuple[float, ...]:
    """Per layer: the share of units whose ReLU output is 0 for every row of x."""
    out = []
    h = x
    with torch.no_grad():
        for lin in linears:
            h = torch.relu(lin(h))
            out.append(((h > 0).sum(0) == 0).float().mean().item())
    return tuple(out)


@lru_cache(maxsize=32)  # a pure function of plain values; the good reference is asked for on every call
def dead_run(lr: float, init: str, seed: int = 0) -> DeadRun:
    """Train STEPS of plain SGD on a small regression and count dead units before and after."""
    if lr not in LRS:
        raise InputError(f"Learning rate must be one of {', '.join(map(str, LRS))}; got {lr}.")
    if init not in INITS:
        raise InputError(f"Initialization must be one of {', '.join(INITS)}; got {quoted(init)}.")
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(EVAL, 16, generator=g)
    y = torch.sin(x[:, :4]).sum(1, keepdim=True)
    model, linears = relu_net(init, seed)
    before = dead_fractions(linears, x)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(STEPS):
        idx = torch.randint(0, EVAL, (64,), generator=g)
        loss = nn.functional.mse_loss(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        final = nn.functional.mse_loss(model(x), y).item()
    finite = all(torch.isfinite(p).all().item() for p in model.parameters())
    return DeadRun(lr, init, before, dead_fractions(linears, x), final, finite and math.isfinite(final))


def dead_relus(lr: float, init: str) -> DeadResult:
    """Your learning rate and init next to the good pair (Kaiming, lr 0.01)."""
    return DeadResult(dead_run(lr, init), dead_run(*GOOD), dead_code(lr, init))


def dead_code(lr: float, init: str) -> str:
    init_line = {
        "kaiming": "nn.init.kaiming_normal_(lin.weight, nonlinearity='relu'); nn.init.zeros_(lin.bias)",
        "default": "pass  # PyTorch default init",
        "negative_bias": "nn.init.constant_(lin.bias, -1.0)",
    }[init]
    return f'''import torch
from torch import nn

g = torch.Generator().manual_seed(0)
x = torch.randn({EVAL}, 16, generator=g)
y = torch.sin(x[:, :4]).sum(1, keepdim=True)
torch.manual_seed(0)
linears = [nn.Linear(16 if i == 0 else {WIDTH}, {WIDTH}) for i in range({DEPTH})]
for lin in linears:
    {init_line}
model = nn.Sequential(*[m for lin in linears for m in (lin, nn.ReLU())], nn.Linear({WIDTH}, 1))


def dead_fractions():
    h, out = x, []
    with torch.no_grad():
        for lin in linears:
            h = torch.relu(lin(h))
            out.append(((h > 0).sum(0) == 0).float().mean().item())  # silent for every input
    return out


print("before:", dead_fractions())
opt = torch.optim.SGD(model.parameters(), lr={lr!r})
for _ in range({STEPS}):
    idx = torch.randint(0, {EVAL}, (64,), generator=g)
    loss = nn.functional.mse_loss(model(x[idx]), y[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
print("after:", dead_fractions())
'''
