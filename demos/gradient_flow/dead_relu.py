"""Dead ReLUs: units that output zero for every input, per layer, before and after training."""

import math
from dataclasses import dataclass
from functools import lru_cache

import torch
from torch import nn

from demos.errors import InputError, quoted
from demos.shown import Script, entry, script

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
    spread_before: tuple[float, ...] = ()  # per layer: std over the inputs of W·h (the input-driven part), mean unit
    bias_before: tuple[float, ...] = ()  # per layer: mean |bias|
    peak_before: tuple[float, ...] = ()  # per layer: the largest W·h each unit reaches over the inputs, averaged


@dataclass(frozen=True)
class DeadResult:
    yours: DeadRun
    good: DeadRun
    code: Script


def relu_net(init: str, seed: int = 0) -> tuple[nn.Sequential, list[nn.Linear]]:
    """DEPTH Linear + ReLU layers of WIDTH units and a linear head, initialized by `init`; the model and its linears."""
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


def signal_and_bias(linears: list[nn.Linear], x: torch.Tensor) -> tuple[tuple[float, ...], ...]:
    """Per layer: how much W·h varies over the inputs and the largest W·h each unit reaches (both averaged over
    units), and the mean |bias| beside them. A unit is silent on every input exactly when its largest W·h is at most
    −bias."""
    spread, peak, bias = [], [], []
    h = x
    with torch.no_grad():
        for lin in linears:
            wh = h @ lin.weight.T
            spread.append(wh.std(0).mean().item())
            peak.append(wh.max(0).values.mean().item())
            bias.append(lin.bias.abs().mean().item())
            h = torch.relu(wh + lin.bias)
    return tuple(spread), tuple(peak), tuple(bias)


def before_sentence(run: DeadRun) -> str:
    """Why units are dead before any training, from the measured signal, peaks and biases ('' when none are)."""
    s, m, b = run.spread_before, run.peak_before, run.bias_before
    cross = bias_wins_from(m, b)
    if not any(run.dead_before) or cross is None:
        return ""
    why = (" (its U(±1/√fan_in) weights have variance 1/(3·fan_in) and ReLU halves the signal's power: about √6 ≈ "
           "2.4 per layer)" if run.init == "default" else "")
    per_layer = f", ÷{(s[0] / s[-1]) ** (1 / (len(s) - 1)):.1f} per layer{why}" if min(s) > 0 else ""
    dead = ", ".join(f"{d:.0%}" for d in run.dead_before)
    first = "" if cross == 0 else (f" In layer 1 the largest W·h averages {m[0]:.3g} against a mean |bias| of "
                                   f"{b[0]:.2g}, and {run.dead_before[0]:.0%} of its units are dead.")
    return (f"Dead before training ({INIT_LABELS[run.init]} init): the input-driven part of each pre-activation "
            f"(W·h, its spread over the {EVAL} inputs) shrank from {s[0]:.3g} in layer 1 to {s[-1]:.2g} in layer "
            f"{len(s)}{per_layer}, while the mean |bias| stays about {sum(b) / len(b):.2g}. A unit is silent on every "
            f"input when its bias is at most minus the largest W·h it reaches. From layer {cross + 1} on, that "
            f"largest W·h averages less than the mean |bias| (layer {cross + 1}: {m[cross]:.2g} against "
            f"{b[cross]:.2g}), so a unit with a negative bias of typical size is silent on every input.{first} "
            f"Dead per layer before training: {dead}.")


def bias_wins_from(peaks, biases) -> int | None:
    """The first layer (from 0) from which on every layer's average largest W·h is below its mean |bias|."""
    cross = None
    for i, (peak, bias) in enumerate(zip(peaks, biases, strict=True)):
        cross = (i if cross is None else cross) if peak < bias else None
    return cross


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
    before, after, final, model, x = train_counting_dead(lr, init, seed)
    spread, peak, bias = signal_and_bias(relu_net(init, seed)[1], x)  # the same seeded net, untrained
    finite = all(torch.isfinite(p).all().item() for p in model.parameters())
    return DeadRun(lr, init, before, after, final, finite and math.isfinite(final), spread, bias, peak)


def train_counting_dead(lr: float, init: str, seed: int = 0):
    """Plain SGD for STEPS on a small regression: the dead fraction per layer before and after, the final loss on
    all EVAL inputs, the model and the inputs."""
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
    return before, dead_fractions(linears, x), final, model, x


@entry(0.3, "default")
def dead_relus(lr: float, init: str) -> DeadResult:
    """Your learning rate and init next to the good pair (Kaiming, lr 0.01)."""
    return DeadResult(dead_run(lr, init), dead_run(*GOOD), dead_script(lr, init))


def dead_script(lr: float, init: str) -> Script:
    """Your run, printing the dead fraction per layer before and after training and the final loss."""
    return script(relu_net, dead_fractions, train_counting_dead, imports="import torch\nfrom torch import nn",
                  settings={"DEPTH": DEPTH, "WIDTH": WIDTH, "STEPS": STEPS, "EVAL": EVAL, "lr": lr, "init": init},
                  run="""
before, after, final, model, x = train_counting_dead(lr, init)
print("dead before:", before)
print("dead after:", after)
print("final loss:", final)""")
