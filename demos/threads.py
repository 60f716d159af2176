"""One intra-op thread for demos of tiny tensors, and snippets that say so: shared by Training and Modules & hooks."""

import dataclasses
import threading
from contextlib import contextmanager
from functools import wraps

import torch

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
