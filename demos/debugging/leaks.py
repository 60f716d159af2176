"""Memory leaks in a training loop, measured: graphs kept alive, outputs kept without detach, hooks piling up."""

import functools
from dataclasses import dataclass

import torch
from torch import nn

from demos.errors import InputError
from demos.shown import print_each, script

MAX_STEPS = 100


@functools.cache  # dir() is slow: look up each node class once
def _saved_attrs(kind: type) -> tuple[str, ...]:
    """The attributes through which a backward node class exposes what it saved."""
    return tuple(a for a in dir(kind) if a.startswith("_saved_"))


@dataclass(frozen=True)
class LeakSeries:
    name: str
    leak: tuple[int, ...]  # measurement after each step, the trap
    fixed: tuple[int, ...]  # the same loop written correctly
    unit: str


@dataclass(frozen=True)
class LeakResult:
    steps: int
    nodes: LeakSeries  # training loop: autograd nodes reachable from total_loss
    saved_bytes: LeakSeries  # eval loop without no_grad: bytes saved for a backward that never comes
    outputs: LeakSeries  # keeping outputs without detach: nodes reachable
    hooks: LeakSeries  # hook calls per forward
    code: str


def graph_stats(roots: list) -> tuple[int, int]:
    """Walk grad_fn graphs from the kept tensors: distinct nodes, and distinct bytes they saved for backward."""
    seen, storages = {}, {}  # id -> node: holding each node keeps its id from being reused by a later wrapper
    stack = [t.grad_fn for t in roots if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        for attr in _saved_attrs(type(node)):
            try:
                value = getattr(node, attr)
            except RuntimeError:  # already freed by backward(): no longer holds memory
                continue
            if isinstance(value, torch.Tensor):
                storages[value.untyped_storage().data_ptr()] = value.untyped_storage().nbytes()
        stack.extend(fn for fn, _ in node.next_functions)
    return len(seen), sum(storages.values())


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))


def _batch(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(16, 32, generator=g), torch.randn(16, 1, generator=g)


def accumulate_loss(steps: int, leak: bool) -> tuple[list[int], list[int]]:
    """`total += loss` (leak) vs `total += loss.item()`: graph size reachable from `total` after each step."""
    model, g = _model(), torch.Generator().manual_seed(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    total = 0.0
    nodes, saved = [], []
    for _ in range(steps):
        x, y = _batch(g)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total = total + loss if leak else total + loss.item()
        n, b = graph_stats([total])
        nodes.append(n)
        saved.append(b)
    return nodes, saved


def eval_accumulate(steps: int, leak: bool) -> list[int]:
    """A validation loop with no backward: `total += loss` keeps every batch's saved activations alive."""
    model, g = _model(), torch.Generator().manual_seed(0)
    total = 0.0
    saved = []
    for _ in range(steps):
        x, y = _batch(g)
        loss = nn.functional.mse_loss(model(x), y)
        total = total + loss if leak else total + loss.item()
        saved.append(graph_stats([total])[1])
    return saved


def keep_outputs(steps: int, leak: bool) -> list[int]:
    """Keeping every step's output for later (metrics) with and without .detach()."""
    model, g = _model(), torch.Generator().manual_seed(0)
    kept, counts = [], []
    for _ in range(steps):
        x, _y = _batch(g)
        out = model(x)
        kept.append(out if leak else out.detach())
        counts.append(graph_stats(kept)[0])
    return counts


def hooks_pile_up(steps: int, leak: bool) -> list[int]:
    """Registering a forward hook inside the loop (leak) vs once: hook calls made by each forward."""
    model, g = _model(), torch.Generator().manual_seed(0)
    calls = [0]

    def hook(module, args, output):
        calls[0] += 1

    if not leak:
        model.register_forward_hook(hook)
    counts = []
    for _ in range(steps):
        if leak:
            model.register_forward_hook(hook)  # a new handle every step, never removed
        calls[0] = 0
        with torch.no_grad():
            model(_batch(g)[0])
        counts.append(calls[0])
    return counts


def trap_and_fix(steps: int) -> dict:
    """Every pattern run twice for `steps` steps: (the trap, the fix), by the measurement that shows the leak."""
    return {
        "nodes": (accumulate_loss(steps, leak=True)[0], accumulate_loss(steps, leak=False)[0]),
        "saved_bytes": (eval_accumulate(steps, True), eval_accumulate(steps, False)),
        "outputs": (keep_outputs(steps, True), keep_outputs(steps, False)),
        "hooks": (hooks_pile_up(steps, True), hooks_pile_up(steps, False)),
    }


SERIES = {  # report field: the trap's name, the unit of its measurement
    "nodes": ("training: total_loss += loss", "autograd nodes alive"),
    "saved_bytes": ("validation: total += loss (no torch.no_grad)", "bytes of saved activations alive"),
    "outputs": ("outputs.append(out)", "autograd nodes alive"),
    "hooks": ("register_forward_hook in the loop", "hook calls per forward"),
}


def leaks(steps: int) -> LeakResult:
    """trap_and_fix for `steps` steps, with the code that ran."""
    if not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise InputError(f"Steps must be between 1 and {MAX_STEPS}; got {steps}.")
    code = script(_saved_attrs, graph_stats, _model, _batch, accumulate_loss, eval_accumulate, keep_outputs,
                  hooks_pile_up, trap_and_fix, imports=IMPORTS, settings={"steps": steps},
                  run=print_each("trap_and_fix(steps)"))
    series = {field: LeakSeries(SERIES[field][0], tuple(trap), tuple(fix), SERIES[field][1])
              for field, (trap, fix) in trap_and_fix(steps).items()}
    return LeakResult(steps, **series, code=code)


IMPORTS = """import functools

import torch
from torch import nn"""


# Heavy cases for `python -m bench`: the longest loops the slider allows.
BENCH_CASES = {"leaks: 100 steps": lambda: leaks(MAX_STEPS)}
