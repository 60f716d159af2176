"""Rules for spawned processes (DataLoader workers, distributed ranks), server-wide.

- One heavy run at a time, in arrival order: a visitor whose run waits is told how many runs are ahead of
  theirs (`turn`), instead of the server piling up processes or CPU-bound work.
- How many processes a distributed run may start follows the container's memory limit, read once at start
  (cgroup); the DataLoader demos fit their workers on the smallest tier measured, so they are not scaled.
- Helpers that stay warm between runs (a fork server, multiprocessing's resource tracker) stop after
  IDLE_WINDOW_S without a run, so an idle server holds no extra process.
- Free ports on 127.0.0.1 only, and gloo on the loopback interface only (`bind_gloo_to_loopback`).
"""

import math
import multiprocessing.resource_tracker
import os
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import psutil

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


def loopback_interface() -> str:
    """The name of the network interface that holds 127.0.0.1 ('lo' on Linux, 'lo0' on macOS)."""
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == "127.0.0.1" for a in addresses):
            return name
    return "lo"


GLOO_INTERFACE = {"GLOO_SOCKET_IFNAME": loopback_interface()}


def bind_gloo_to_loopback() -> None:
    """Every gloo group made in this process from now on, and in its children, listens on loopback only.

    Without it gloo listens on the address the hostname resolves to, which in a container is usually the
    network interface. ProcessGroupGloo reads GLOO_SOCKET_IFNAME each time a group is made, so the groups the
    interview and Practice questions make as threads of the server are covered, not only the rank processes.
    """
    os.environ.update(GLOO_INTERFACE)
