"""Run one heavy function in a child process that exits afterwards: what it imports and caches (inductor's
compiler, onnx, onnxruntime) never stays in the server, whose memory returns to its idle size.

The child is forked from the server itself (unless the server has initialised CUDA: see `_context`), so it
shares the server's pages (torch, the loaded modules) copy on write and costs only what it imports and touches:
an inductor compile at the largest size peaked at 590 MB for server plus child, against 730 MB when the child
came from a fork server with its own copy of torch. It holds the server-wide process slot like every other process
demo and is stopped at its time limit. Its result comes back pickled through a pipe from our own child process;
visitor data never travels that way unchecked.

Forking a process that has other threads is safe only if no other thread holds a lock the child will need.
The one such lock here is the compiler's: dynamo and torch.export keep process-wide state, so every use of them
in the server runs inside `compiler_in_use()`, and a fork waits until no thread is inside it (os.register_at_fork).
"""

import contextlib
import faulthandler
import multiprocessing
import os
import signal
import sys
import threading

import torch

from demos import processes
from demos.errors import InputError
from demos.guests import process_slot

_compiler_lock = threading.RLock()


@contextlib.contextmanager
def compiler_in_use():
    """Hold while this thread runs dynamo or torch.export: one user at a time, and never across a fork."""
    with _compiler_lock:
        yield


def _new_lock_in_child() -> None:
    global _compiler_lock
    _compiler_lock = threading.RLock()


os.register_at_fork(before=_compiler_lock.acquire, after_in_parent=_compiler_lock.release,
                    after_in_child=_new_lock_in_child)

STACKS_SIGNAL = signal.SIGUSR1

# Inductor compiles in the child itself instead of starting a pool of compile workers (one per core).
CHILD_ENV = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
PRELOAD = ("torch",)  # what the fork server imports when the child cannot be forked from the server (CUDA)


def _compile_in_this_process() -> None:
    """Inductor compiles here, without a pool of compile-worker processes.

    The environment variable covers a config imported after this point; a forked child inherits the server's
    config module, whose thread count was read when the server first imported it, so that is set too (a child
    that never compiles does not import inductor for it).
    """
    os.environ.update(CHILD_ENV)
    inductor_config = sys.modules.get("torch._inductor.config")
    if inductor_config is not None:
        inductor_config.compile_threads = 1


def _child_main(fn, args, conn) -> None:
    """Run fn(*args) with the server's thread setting; send (True, result), (False, sentence) or (None, bug)."""
    faulthandler.register(STACKS_SIGNAL, all_threads=True)  # a child stopped at its limit says where it was
    _compile_in_this_process()
    torch.set_num_threads(1)  # as the server runs its demos (pages/shell/entry.py)
    try:
        conn.send((True, fn(*args)))
    except InputError as err:
        conn.send((False, str(err)))
    except Exception as err:  # reported to the page as a bug, with the child's error type and message
        conn.send((None, f"{type(err).__name__}: {err}"))
    finally:
        conn.close()


def _context():
    """(multiprocessing context, what stops it afterwards) for the child.

    A child forked after the server has initialised CUDA cannot use CUDA ("Cannot re-initialize CUDA in forked
    subprocess"); then it comes from the fork server (demos/processes.py), a fresh interpreter that never touched
    CUDA: the warm one if it runs, else one started for this run and stopped after it. process_slot() keeps the
    fork server to one run at a time.
    """
    if not torch.cuda.is_initialized():
        return multiprocessing.get_context("fork"), None
    warm = processes.fork_server_running()
    ctx, _ = processes.fork_server(PRELOAD)
    return ctx, None if warm else processes.stop_warm_helpers


def run_isolated(fn, *args, time_limit_s: float = 180.0):
    """fn(*args) run in a child process; its InputError is raised here, any other error as RuntimeError."""
    with process_slot():
        ctx, stop_server = _context()
        receive, send = ctx.Pipe(duplex=False)
        child = ctx.Process(target=_child_main, args=(fn, args, send))
        try:
            # a child still running after its result (or its limit) prints its threads' stacks to the server's log,
            # then is killed
            with processes.started([child], exit_s=5.0, grace_s=1.0, stop_signal=STACKS_SIGNAL):
                send.close()
                ok, value = _result(receive, child, time_limit_s)
        finally:
            receive.close()
            send.close()
            if stop_server is not None:
                stop_server()
    if ok:
        return value
    raise InputError(value) if ok is False else RuntimeError(value)


def _result(receive, child, time_limit_s: float):
    """What the child sent: (True, result), (False, sentence) or (None, bug)."""
    if not receive.poll(time_limit_s):
        raise InputError(f"The run passed its {time_limit_s:g} s limit and was stopped; try a smaller size.")
    try:
        return receive.recv()
    except EOFError:
        child.join(5)
        raise RuntimeError(f"the child process ended without a result (exit code {child.exitcode})") from None
