"""Child processes of the demos: forked from one fork server, waited for under a deadline, always reaped.

Start method: 'forkserver', chosen by measurement on a 2-core host (4 DataLoader workers, first batch of a tiny
dataset): 'spawn' took 13-24 s (every child imports torch again); 'fork' took 0.1 s but copies a threaded Streamlit
server mid-flight (a lock held by another thread stays locked forever in the child); 'forkserver' took 1.2 s for
the first run (the fork server imports torch once) and 0.09 s once it was up.

There is one fork server, multiprocessing's own (`get_context("forkserver")`), started with the modules a run
asks for (`fork_server`). Python 3.11's fork server imports them with the default sys.path, whose first entry is
the working directory, not with the server's: the app starts from the repository root (README, Dockerfile).
Callers hold the process slot (demos.guests), so one run at a time uses it. Public
multiprocessing APIs throughout, except where the standard library has none: stopping the fork server and the
resource tracker (`stop_fork_server`, `stop_resource_tracker`) and skipping the parent's __main__ in the fork
server's children (demos/forkserver_preload.py). tests/test_processes.py fails loudly if a Python upgrade
changes one of them.

Every socket binds to 127.0.0.1, and gloo to the loopback interface (`bind_gloo_to_loopback`).
"""

import functools
import multiprocessing
import multiprocessing.resource_tracker
import os
import signal
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import wait

import psutil

START_METHOD = "forkserver"
# Imported first in the fork server: its children skip re-running the server's __main__ (see that module).
SKIP_MAIN = "demos.forkserver_preload"

_preloaded: tuple[str, ...] | None = None  # what the running fork server imported; None when none runs


def _ready() -> None:
    """Runs in a child: it exists only once the fork server has finished its imports."""


def fork_server(preload: Sequence[str], fresh: bool = False) -> tuple[multiprocessing.context.BaseContext, float]:
    """(the forkserver context, seconds spent starting its server now: 0.0 when one was already up).

    The server has imported every module in `preload` (children share them copy on write). A running server that
    lacks one of them, or any running server when `fresh`, is stopped and a new one started. Call it holding the
    process slot: no other run may be using the server while it restarts.
    """
    global _preloaded
    wanted = (SKIP_MAIN, *preload)
    ctx = multiprocessing.get_context(START_METHOD)
    if _preloaded is not None and not fresh and set(wanted) <= set(_preloaded):
        return ctx, 0.0
    stop_fork_server()
    ctx.set_forkserver_preload(list(wanted))
    start = time.perf_counter()
    probe = ctx.Process(target=_ready)  # the first fork waits until the server has imported its modules
    probe.start()
    probe.join()
    _preloaded = wanted
    return ctx, time.perf_counter() - start


def fork_server_running() -> bool:
    """Whether a fork server started by `fork_server` is up (warm for the next run)."""
    return _preloaded is not None


def stop_fork_server() -> None:
    """Stop the fork server if one runs. The standard library has no public stop: `_stop` is its own shutdown (it
    closes the server's alive pipe and reaps it), which its tests use."""
    global _preloaded
    from multiprocessing import forkserver  # here, not at the app's start: most servers never start one

    forkserver._forkserver._stop()
    _preloaded = None


def stop_resource_tracker() -> None:
    """Stop multiprocessing's resource tracker if this process started one (a fork server or a semaphore does, and
    nothing else ever stops it); the next semaphore or fork server starts it again. No public stop exists either."""
    tracker = multiprocessing.resource_tracker._resource_tracker
    if tracker._pid is not None:
        tracker._stop()


def stop_warm_helpers() -> None:
    """Stop the fork server, then the resource tracker its children reported to."""
    stop_fork_server()
    stop_resource_tracker()


# ---- waiting and cleaning up ----------------------------------------------------------------------------------

def first_failure(procs: Sequence[multiprocessing.process.BaseProcess], timeout_s: float):
    """Wait for every process to exit; return the first one that exited with a non-zero code, or None when all
    succeeded. Raises TimeoutError when timeout_s passes first (the rest still run: `reap` them)."""
    deadline = time.monotonic() + timeout_s
    running = list(procs)
    while running:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{len(running)} of {len(procs)} processes still ran after {timeout_s:g} s")
        for sentinel in wait([p.sentinel for p in running], timeout=left):
            p = next(p for p in running if p.sentinel == sentinel)
            p.join()
            running.remove(p)
            if p.exitcode != 0:
                return p
    return None


def reap(procs: Sequence[multiprocessing.process.BaseProcess], exit_s: float = 0.0, grace_s: float = 2.0,
         stop_signal: int = signal.SIGTERM) -> None:
    """Leave no process of `procs` behind: give them exit_s to end by themselves, send what still runs
    `stop_signal`, give it grace_s, then kill what is left. Every started process is joined (no zombie)."""
    started = [p for p in procs if p.pid is not None]
    _join_all(started, exit_s)
    for p in started:
        if p.is_alive():
            os.kill(p.pid, stop_signal)
    _join_all(started, grace_s)
    for p in started:
        if p.is_alive():
            p.kill()
    _join_all(started, 5.0)


def _join_all(procs, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))


@contextmanager
def started(procs: Sequence[multiprocessing.process.BaseProcess], **reap_options) -> Iterator[None]:
    """Start every process; however the block is left (done, an error, a timeout), `reap` them all."""
    try:
        for p in procs:
            p.start()
        yield
    finally:
        reap(procs, **reap_options)


# ---- ports and interfaces -------------------------------------------------------------------------------------

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


@functools.cache
def gloo_interface() -> dict[str, str]:
    """The environment that makes gloo listen on the loopback interface only."""
    return {"GLOO_SOCKET_IFNAME": loopback_interface()}


def bind_gloo_to_loopback() -> None:
    """Every gloo group made in this process from now on, and in its children, listens on loopback only.

    Without it gloo listens on the address the hostname resolves to, which in a container is usually the
    network interface. ProcessGroupGloo reads GLOO_SOCKET_IFNAME each time a group is made, so the groups the
    interview and Practice questions make as threads of the server are covered, not only the rank processes.
    """
    os.environ.update(gloo_interface())
