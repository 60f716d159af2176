"""Shared pieces of the training demos: the spiral task, the small classifier, validation helpers."""

import dataclasses
import math
import threading
from contextlib import contextmanager
from functools import wraps

import torch
from torch import nn

from demos.errors import InputError, quoted
from demos.shown import Script

_THREADS_LOCK = threading.Lock()
_THREADS_USERS = [0, 0]  # [active demos, thread count to restore]


@contextmanager
def one_thread():
    """Run tiny-tensor training on one intra-op thread: on a busy 2-core host OpenMP spin-waits cost 10-50x."""
    with _THREADS_LOCK:
        if _THREADS_USERS[0] == 0:
            _THREADS_USERS[1] = torch.get_num_threads()
            torch.set_num_threads(1)
        _THREADS_USERS[0] += 1
    try:
        yield
    finally:
        with _THREADS_LOCK:
            _THREADS_USERS[0] -= 1
            if _THREADS_USERS[0] == 0:
                torch.set_num_threads(_THREADS_USERS[1])


ONE_THREAD_LINE = "torch.set_num_threads(1)  # as on the page: one thread adds every sum in the same order"


IMPORTS = f"import math\n\nimport torch\nfrom torch import nn\n\n{ONE_THREAD_LINE}"  # a training script's head


def with_one_thread(code: str) -> str:
    """A snippet that pins one intra-op thread right after its imports, as the demo that made its numbers did.

    Float sums split across threads add in another order: a 150-step training run then ends in visibly different
    numbers (a validation loss of 3509 instead of 2252), so a snippet that does not pin the thread count does not
    reproduce its figure.
    """
    if ONE_THREAD_LINE in code or "import torch" not in code:
        return code
    lines = code.split("\n")
    body = next(i for i, line in enumerate(lines)
                if line.strip() and not line.startswith(("import ", "from ", "#")))
    pinned = Script("\n".join([*lines[:body], ONE_THREAD_LINE, "", *lines[body:]]))
    pinned.origins = getattr(code, "origins", ())  # a Script stays one, naming the same code that ran
    return pinned


def _pin_snippets(result):
    """The result with every `code` snippet in it (nested results too) pinned to one thread."""
    if isinstance(result, dict):
        return {k: _pin_snippets(v) for k, v in result.items()}
    if isinstance(result, tuple) and not hasattr(result, "_fields"):
        return tuple(_pin_snippets(v) for v in result)
    if not dataclasses.is_dataclass(result) or isinstance(result, type):
        return result
    changes = {}
    for f in dataclasses.fields(result):
        value = getattr(result, f.name)
        pinned = with_one_thread(value) if f.name == "code" and isinstance(value, str) else _pin_snippets(value)
        if pinned is not value:
            changes[f.name] = pinned
    return dataclasses.replace(result, **changes) if changes else result


def single_threaded(fn):
    """Decorator form of one_thread(); the snippets in the result pin one thread too, so they print its numbers."""

    @wraps(fn)
    def run(*args, **kwargs):
        with one_thread():
            return _pin_snippets(fn(*args, **kwargs))

    return run


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
