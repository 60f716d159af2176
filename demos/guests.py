"""Rules for heavy work (spawned processes, compiles, sweeps), server-wide.

- One heavy run at a time, in arrival order: a visitor whose run waits is told how many runs are ahead of
  theirs (`turn`), instead of the server piling up processes or CPU-bound work.
- How many processes a distributed run may start follows the container's memory limit, read once at start
  (cgroup); the DataLoader demos fit their workers on the smallest tier measured, so they are not scaled.
- Helpers that stay warm between runs (the fork server, multiprocessing's resource tracker) stop after
  IDLE_WINDOW_S without a run, so an idle server holds no extra process.

How processes are started, timed out and cleaned up is demos/processes.py.
"""

import math
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from demos import processes
from demos.errors import InputError

QUEUE_WAIT_S = 180.0  # how long a run may wait for its turn before it is refused
IDLE_WINDOW_S = 20.0  # warm helpers stop this long after the last run
MAX_PROCESSES = 4  # the most ranks one distributed run starts when memory allows
# Measured by `python -m bench --memory` (PSS, MB): the server with a page open, a fork server that has imported
# torch and the distributed workers, one rank or worker forked from it.
SERVER_MB = 400
HELPER_MB = 225
PROCESS_MB = 50
LIMIT_VARIABLE = "WHITEBOARD_MEMORY_LIMIT_MB"
CGROUP_FILES = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


class _RunQueue:
    """First come, first served; one run holds the head of the queue at a time."""

    def __init__(self):
        self.cond = threading.Condition()
        self.tickets: deque[object] = deque()

    def ahead_of(self, ticket) -> int:
        return self.tickets.index(ticket)


_queue = _RunQueue()
_thread = threading.local()  # per script thread: .turn (a ticket at the head of the line), .defer (see below)


class TurnNeeded(Exception):
    """A run found others ahead of it while its caller asked to wait outside (`deferring_turn`).

    Pages call heavy demos through st.cache_data, which replays what a cached function wrote to the page; a
    place-in-line notice written from inside one cannot be replayed. So the page first calls with the wait
    deferred: a cache hit or a free line runs at once, and a busy line raises this before anything runs. The
    page then waits in `turn` (outside the cache, writing the notice itself) and calls again.
    """


@contextmanager
def deferring_turn():
    """Inside the block, a run that would have to wait raises TurnNeeded instead of waiting."""
    _thread.defer = True
    try:
        yield
    finally:
        _thread.defer = False


@contextmanager
def turn(report: Callable[[int], None] = lambda ahead: None, wait_s: float = QUEUE_WAIT_S):
    """Wait in line for the server-wide run slot and hold it for the block; report(runs ahead) whenever that
    number changes, report(0) when the turn comes; refuse after wait_s. Runs inside the block take this turn."""
    ticket = object()
    with _queue.cond:
        _queue.tickets.append(ticket)
    try:
        _wait_for_turn(ticket, time.monotonic() + wait_s, wait_s, report)
        _thread.turn = ticket
        yield
    finally:
        _thread.turn = None
        with _queue.cond:
            _queue.tickets.remove(ticket)
            _queue.cond.notify_all()
        _arm_idle_stop()


@contextmanager
def process_slot(wait_s: float = QUEUE_WAIT_S):
    """Hold the server-wide right to run heavy work (spawn processes, compile, sweep), in arrival order.

    Inside a caller's `turn` it is already held; under `deferring_turn` a busy line raises TurnNeeded."""
    if getattr(_thread, "turn", None) is not None:
        yield
        return
    if getattr(_thread, "defer", False):
        with _queue.cond:
            if _queue.tickets:
                raise TurnNeeded
    with turn(wait_s=wait_s):
        yield


def _wait_for_turn(ticket, deadline: float, wait_s: float, report: Callable[[int], None]) -> None:
    shown = 0
    while True:
        with _queue.cond:
            ahead = _queue.ahead_of(ticket)
            if ahead and ahead == shown:
                _queue.cond.wait(timeout=min(0.5, max(deadline - time.monotonic(), 0)))
                ahead = _queue.ahead_of(ticket)
        if ahead != shown:  # outside the lock: the report writes to a page
            report(ahead)
            shown = ahead
        if not ahead:
            return
        if time.monotonic() > deadline:
            raise InputError(f"The server is busy: {ahead} {'run is' if ahead == 1 else 'runs are'} still ahead of "
                             f"yours after {wait_s:.0f} s; try again in a minute.")


def busy() -> bool:
    """Whether a run holds the slot or waits for it."""
    with _queue.cond:
        return bool(_queue.tickets)


# ---- memory limit -------------------------------------------------------------------------------------------

def read_memory_limit(files=CGROUP_FILES, environ=os.environ) -> int | None:
    """The memory limit in bytes: WHITEBOARD_MEMORY_LIMIT_MB if set (for hosts that enforce a limit the container
    cannot see), else the container's cgroup limit (v2, then v1), else None."""
    if re.fullmatch(r"[0-9]+", environ.get(LIMIT_VARIABLE, "").strip()):
        return int(environ[LIMIT_VARIABLE]) * 10**6
    for name in files:
        try:
            text = Path(name).read_text().strip()
        except OSError:
            continue
        # v1 writes a huge number for 'no limit'
        if text == "max" or not re.fullmatch(r"[0-9]+", text) or int(text) >= 2**60:
            return None
        return int(text)
    return None


MEMORY_LIMIT = read_memory_limit()  # read once when the server starts


def process_cap(limit: int | None = None) -> int:
    """How many processes one run may start under the memory limit (1 to MAX_PROCESSES)."""
    limit = MEMORY_LIMIT if limit is None else limit
    if limit is None:
        return MAX_PROCESSES
    spare_mb = limit / 1e6 - SERVER_MB - HELPER_MB
    return max(1, min(MAX_PROCESSES, math.floor(spare_mb / PROCESS_MB)))


def scaled(requested: int, what: str, low: int = 1) -> tuple[int, str]:
    """(processes to start, a sentence saying what was scaled, or '' when nothing was)."""
    granted = max(low, min(requested, process_cap()))
    if granted == requested:
        return requested, ""
    return granted, (f"This server's memory limit ({MEMORY_LIMIT / 1e9:.2f} GB) allows {granted} {what} per run, "
                     f"so {granted} ran instead of {requested}.")


# ---- warm helpers -------------------------------------------------------------------------------------------

_idle_timer: threading.Timer | None = None
_timer_lock = threading.Lock()


def _arm_idle_stop() -> None:
    global _idle_timer
    with _timer_lock:
        if _idle_timer is not None:
            _idle_timer.cancel()
        _idle_timer = threading.Timer(IDLE_WINDOW_S, stop_idle_helpers)
        _idle_timer.daemon = True
        _idle_timer.start()


def stop_idle_helpers() -> bool:
    """Stop the warm fork server and the resource tracker, unless a run holds or awaits the slot (it re-arms)."""
    with _queue.cond:
        if _queue.tickets:
            return False
        processes.stop_warm_helpers()  # under the lock: no run can start while its fork server stops
        return True
