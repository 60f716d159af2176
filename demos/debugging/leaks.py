"""Memory leaks in a training loop, measured: graphs kept alive, outputs kept without detach, hooks piling up."""

import functools
from dataclasses import dataclass

import torch
from torch import nn

from demos.errors import InputError
from demos.shown import entry, print_each, script, source

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


def add_loss(total, loss):
    return total + loss  # total is now a tensor holding this step's graph, and through it every earlier one


def add_loss_value(total, loss):
    return total + loss.item()  # a Python float: the step's graph is freed


def keep_output(kept: list, out: torch.Tensor) -> None:
    kept.append(out)  # each output keeps the graph that made it alive


def keep_output_detached(kept: list, out: torch.Tensor) -> None:
    kept.append(out.detach())  # the values only, no graph


def forwards_hooked_every_step(model: nn.Module, hook, batches) -> None:
    for x in batches:
        model.register_forward_hook(hook)  # a new handle every step, never removed
        with torch.no_grad():
            model(x)


def forwards_hooked_once(model: nn.Module, hook, batches) -> None:
    handle = model.register_forward_hook(hook)  # once, before the loop
    for x in batches:
        with torch.no_grad():
            model(x)
    handle.remove()  # and off again when the loop is done


def accumulate_loss(steps: int, add) -> tuple[list[int], list[int]]:
    """A training loop summing its loss with `add`: graph size reachable from the sum after each step."""
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
        total = add(total, loss)
        n, b = graph_stats([total])
        nodes.append(n)
        saved.append(b)
    return nodes, saved


def eval_accumulate(steps: int, add) -> list[int]:
    """A validation loop with no backward summing with `add`: a tensor sum keeps every batch's saved activations."""
    model, g = _model(), torch.Generator().manual_seed(0)
    total = 0.0
    saved = []
    for _ in range(steps):
        x, y = _batch(g)
        loss = nn.functional.mse_loss(model(x), y)
        total = add(total, loss)
        saved.append(graph_stats([total])[1])
    return saved


def keep_outputs(steps: int, keep) -> list[int]:
    """Keeping every step's output for later (metrics) with `keep`: autograd nodes reachable from what is kept."""
    model, g = _model(), torch.Generator().manual_seed(0)
    kept, counts = [], []
    for _ in range(steps):
        x, _y = _batch(g)
        keep(kept, model(x))
        counts.append(graph_stats(kept)[0])
    return counts


def hooks_pile_up(steps: int, loop) -> list[int]:
    """`loop` runs `steps` forwards with a counting hook: the hook calls each forward made."""
    model, g = _model(), torch.Generator().manual_seed(0)
    calls = []

    def hook(module, args, output):
        calls[-1] += 1

    def batches():
        for _ in range(steps):
            calls.append(0)  # this forward's count
            yield _batch(g)[0]

    loop(model, hook, batches())
    return calls


PATTERNS = {  # report field: (the trap, the fix), the code that differs between the two loops
    "nodes": (add_loss, add_loss_value),
    "outputs": (keep_output, keep_output_detached),
    "hooks": (forwards_hooked_every_step, forwards_hooked_once),
}


def trap_and_fix(steps: int) -> dict:
    """Every pattern run twice for `steps` steps: (the trap, the fix), by the measurement that shows the leak."""
    return {
        "nodes": (accumulate_loss(steps, add_loss)[0], accumulate_loss(steps, add_loss_value)[0]),
        "saved_bytes": (eval_accumulate(steps, add_loss), eval_accumulate(steps, add_loss_value)),
        "outputs": (keep_outputs(steps, keep_output), keep_outputs(steps, keep_output_detached)),
        "hooks": (hooks_pile_up(steps, forwards_hooked_every_step), hooks_pile_up(steps, forwards_hooked_once)),
    }


def trap_and_fix_sources() -> tuple[str, str]:
    """The source of the trap functions and of the fix functions the loops call (the page's two columns)."""
    return tuple("\n\n".join(source(pair[side]) for pair in PATTERNS.values()) for side in (0, 1))


SERIES = {  # report field: the trap's name, the unit of its measurement
    "nodes": ("training: total_loss += loss", "autograd nodes alive"),
    "saved_bytes": ("validation: total += loss (no torch.no_grad)", "bytes of saved activations alive"),
    "outputs": ("outputs.append(out)", "autograd nodes alive"),
    "hooks": ("register_forward_hook in the loop", "hook calls per forward"),
}


@entry(4)
def leaks(steps: int) -> LeakResult:
    """trap_and_fix for `steps` steps, with the code that ran."""
    if not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise InputError(f"Steps must be between 1 and {MAX_STEPS}; got {steps}.")
    code = script(_saved_attrs, graph_stats, _model, _batch, *(f for pair in PATTERNS.values() for f in pair),
                  accumulate_loss, eval_accumulate, keep_outputs, hooks_pile_up, trap_and_fix, imports=IMPORTS,
                  settings={"steps": steps}, run=print_each("trap_and_fix(steps)"))
    series = {field: LeakSeries(SERIES[field][0], tuple(trap), tuple(fix), SERIES[field][1])
              for field, (trap, fix) in trap_and_fix(steps).items()}
    return LeakResult(steps, **series, code=code)


IMPORTS = """import functools

import torch
from torch import nn"""


# Heavy cases for `python -m bench`: the longest loops the slider allows.
BENCH_CASES = {"leaks: 100 steps": lambda: leaks(MAX_STEPS)}
