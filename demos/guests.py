"""Rules for spawned processes (DataLoader workers, distributed ranks), server-wide.

- One run at a time, in arrival order: a visitor whose run waits is told how many runs are ahead of theirs
  (`queue_reporter`), instead of the server piling up processes.
- How many processes a distributed run may start follows the container's memory limit, read once at start
  (cgroup); the DataLoader demos fit their workers on the smallest tier measured, so they are not scaled.
- Helpers that stay warm between runs (a fork server, multiprocessing's resource tracker) stop after
  IDLE_WINDOW_S without a run, so an idle server holds no extra process.
- Free ports on 127.0.0.1 only.
"""

import math
import multiprocessing.resource_tracker
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

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
_reporter = threading.local()  # per script thread: how to show a waiting visitor their place


@contextmanager
def queue_reporter(report: Callable[[int], None]):
    """While the block runs, a run that has to wait calls report(runs ahead of it) whenever that number changes,
    and report(0) when its turn comes. The page passes a function that writes to the visitor's page."""
    _reporter.report = report
    try:
        yield
    finally:
        _reporter.report = None


def _report(ahead: int) -> None:
    report = getattr(_reporter, "report", None)
    if report is not None:
        report(ahead)


@contextmanager
def process_slot(wait_s: float = QUEUE_WAIT_S):
    """Hold the server-wide right to spawn processes, waiting in line for it; refuse after wait_s."""
    ticket = object()
    with _queue.cond:
        _queue.tickets.append(ticket)
    try:
        _wait_for_turn(ticket, time.monotonic() + wait_s, wait_s)
        yield
    finally:
        with _queue.cond:
            _queue.tickets.remove(ticket)
            _queue.cond.notify_all()
        _arm_idle_stop()


def _wait_for_turn(ticket, deadline: float, wait_s: float) -> None:
    shown = 0
    while True:
        with _queue.cond:
            ahead = _queue.ahead_of(ticket)
            if ahead and ahead == shown:
                _queue.cond.wait(timeout=min(0.5, max(deadline - time.monotonic(), 0)))
                ahead = _queue.ahead_of(ticket)
        if ahead != shown:  # outside the lock: the report writes to a page
            _report(ahead)
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
    if environ.get(LIMIT_VARIABLE, "").strip().isdigit():
        return int(environ[LIMIT_VARIABLE]) * 10**6
    for name in files:
        try:
            text = Path(name).read_text().strip()
        except OSError:
            continue
        if text == "max" or not text.isdigit() or int(text) >= 2**60:  # v1 writes a huge number for 'no limit'
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

_helpers: list[tuple[Callable[[], bool], Callable[[], None]]] = []
_idle_timer: threading.Timer | None = None
_timer_lock = threading.Lock()


def register_helper(is_running: Callable[[], bool], stop: Callable[[], None]) -> None:
    """A warm helper (a fork server kept between runs): stop() runs IDLE_WINDOW_S after the last run ends."""
    if (is_running, stop) not in _helpers:
        _helpers.append((is_running, stop))


def _arm_idle_stop() -> None:
    global _idle_timer
    with _timer_lock:
        if _idle_timer is not None:
            _idle_timer.cancel()
        _idle_timer = threading.Timer(IDLE_WINDOW_S, stop_idle_helpers)
        _idle_timer.daemon = True
        _idle_timer.start()


def stop_idle_helpers() -> bool:
    """Stop every warm helper, then the resource tracker, unless a run holds or awaits the slot (it re-arms)."""
    with _queue.cond:
        if _queue.tickets:
            return False
        for is_running, stop in _helpers:  # under the lock: no run can start while its fork server stops
            if is_running():
                stop()
        _stop_resource_tracker()
        return True


def release_resource_tracker() -> None:
    """Stop multiprocessing's resource tracker now unless a warm helper still runs (its children report to it).

    A fork server starts the tracker, and nothing else ever stops it.
    """
    if not any(is_running() for is_running, _ in _helpers):
        _stop_resource_tracker()


def _stop_resource_tracker() -> None:
    """Stop the tracker this process started (a spawned child inherits the pipe but not the process)."""
    tracker = multiprocessing.resource_tracker._resource_tracker
    if tracker._pid is not None:
        tracker._stop()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on at this moment."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
