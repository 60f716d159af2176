"""One way for a page to compute: `compute(fn, *args)` calls a function of demos/ once per distinct arguments.

The result is kept per server and shared read-only by every visitor, so a rerun costs a dictionary lookup. Each
function has its own cache, keyed on its arguments: a number, string or tuple of them by value (1, 1.0 and True
are told apart), any other hashable value (a frozen dataclass of settings) by value, and anything else (a result
that compute returned earlier, such as the run a figure is drawn from) by identity, the object held beside its
entry so the identity stays its own. So a figure builder is computed the same way as the demo it draws:
`fig = compute(figures.loss_curve, run)`.

A demo with large results says how many to keep with `demos.shown.entry(..., entries=8)` (default 32); the oldest
entry goes first. Two visitors asking for the same result at once wait for one computation. An exception is not
kept: the next call tries again.
"""

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

DEFAULT_ENTRIES = 32
_PLAIN = (int, float, str, bool, type(None), bytes, complex)
_caches: dict[Callable, "_Cache"] = {}
_lock = threading.Lock()


def compute(fn: Callable, /, *args: Any, **kwargs: Any) -> Any:
    """fn(*args, **kwargs), computed once per distinct arguments on this server and shared read-only."""
    return _cache_of(fn).get(args, kwargs)


def clear() -> None:
    """Forget every computed result (for tests that change what a demo sees, such as a patched device)."""
    with _lock:
        _caches.clear()


def _cache_of(fn: Callable) -> "_Cache":
    cache = _caches.get(fn)
    if cache is None:
        if "<locals>" in fn.__qualname__ or fn.__module__.startswith("pages"):
            raise TypeError(f"compute() takes a module-level function of demos/, not "
                            f"{fn.__module__}.{fn.__qualname__}")
        with _lock:
            cache = _caches.setdefault(fn, _Cache(fn, getattr(fn, "cache_entries", DEFAULT_ENTRIES)))
    return cache


def _key(value: Any) -> tuple:
    """A value's part of the cache key: typed by value where it can be, else its identity."""
    if isinstance(value, _PLAIN):
        return (type(value), value)
    if isinstance(value, tuple | frozenset):
        return (type(value), tuple(_key(v) for v in value))
    try:
        hash(value)
        return (type(value), value)
    except TypeError:
        return ("identity", id(value))


class _Cache:
    """One function's results, newest last, at most `entries` of them."""

    def __init__(self, fn: Callable, entries: int):
        self.fn, self.entries = fn, entries
        self.results: OrderedDict[tuple, tuple[tuple, Any]] = OrderedDict()  # key -> (arguments, result)
        self.busy: dict[tuple, threading.Lock] = {}  # key -> held while its result is being computed
        self.lock = threading.Lock()

    def get(self, args: tuple, kwargs: dict) -> Any:
        key = (tuple(map(_key, args)), tuple((k, _key(v)) for k, v in sorted(kwargs.items())))
        hit = self._hit(key)
        if hit is not None:
            return hit[0]
        with self.lock:
            busy = self.busy.setdefault(key, threading.Lock())
        with busy:  # a second visitor asking for the same result waits for the first computation
            hit = self._hit(key)
            if hit is not None:
                return hit[0]
            try:
                result = self.fn(*args, **kwargs)
            except BaseException:
                with self.lock:
                    self.busy.pop(key, None)
                raise
            with self.lock:  # stored before the key stops being busy, so no third caller computes it again
                self.results[key] = ((args, kwargs), result)  # the arguments keep identity-keyed objects alive
                while len(self.results) > self.entries:
                    self.results.popitem(last=False)
                self.busy.pop(key, None)
            return result

    def _hit(self, key: tuple) -> tuple[Any] | None:
        with self.lock:
            entry = self.results.get(key)
            if entry is None:
                return None
            self.results.move_to_end(key)
            return (entry[1],)
