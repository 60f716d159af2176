"""Memory leaks in a training loop, measured: graphs kept alive, outputs kept without detach, hooks piling up."""

from dataclasses import dataclass

import torch
from torch import nn

from demos.errors import InputError

MAX_STEPS = 100
_SAVED_ATTRS: dict[type, tuple[str, ...]] = {}  # dir() is slow: look up each node class once


def _saved_attrs(node) -> tuple[str, ...]:
    kind = type(node)
    if kind not in _SAVED_ATTRS:
        _SAVED_ATTRS[kind] = tuple(a for a in dir(node) if a.startswith("_saved_"))
    return _SAVED_ATTRS[kind]


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
        for attr in _saved_attrs(node):
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


def leaks(steps: int) -> LeakResult:
    """Every pattern run twice for `steps` steps: the trap and the fix."""
    if not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise InputError(f"Steps must be between 1 and {MAX_STEPS}; got {steps}.")
    leak_nodes, _ = accumulate_loss(steps, leak=True)
    ok_nodes, _ = accumulate_loss(steps, leak=False)
    return LeakResult(
        steps,
        LeakSeries("training: total_loss += loss", tuple(leak_nodes), tuple(ok_nodes), "autograd nodes alive"),
        LeakSeries("validation: total += loss (no torch.no_grad)", tuple(eval_accumulate(steps, True)),
                   tuple(eval_accumulate(steps, False)), "bytes of saved activations alive"),
        LeakSeries("outputs.append(out)", tuple(keep_outputs(steps, True)), tuple(keep_outputs(steps, False)),
                   "autograd nodes alive"),
        LeakSeries("register_forward_hook in the loop", tuple(hooks_pile_up(steps, True)),
                   tuple(hooks_pile_up(steps, False)), "hook calls per forward"),
        leak_code(steps),
    )


def leak_code(steps: int) -> str:
    return f'''import torch
from torch import nn


def graph_size(t):
    """Autograd nodes reachable from t: what t keeps alive."""
    seen, stack = set(), [t.grad_fn] if isinstance(t, torch.Tensor) and t.grad_fn else []
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack.extend(fn for fn, _ in node.next_functions)
    return len(seen)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
g = torch.Generator().manual_seed(0)
leaky, fixed = 0.0, 0.0
for step in range({steps}):
    x, y = torch.randn(16, 32, generator=g), torch.randn(16, 1, generator=g)
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    leaky = leaky + loss        # keeps this step's whole graph (and its saved inputs) alive
    fixed = fixed + loss.item()  # a Python float: nothing kept
print("nodes kept by leaky:", graph_size(leaky), " by fixed:", graph_size(fixed))
'''


# Heavy cases for `python -m bench`: the longest loops the slider allows.
BENCH_CASES = {"leaks: 100 steps": lambda: leaks(MAX_STEPS)}
