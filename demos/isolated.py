"""Run one heavy function in a child process that exits afterwards: what it imports and caches (inductor's
compiler, onnx, onnxruntime) never stays in the server, whose memory returns to its idle size.

The child is forked from the fork server of demos.data.procs (torch already imported), holds the server-wide
process slot like every other process demo, and is stopped at its time limit. Its result comes back pickled
through a pipe from our own child process; visitor data never travels that way unchecked.
"""

import multiprocessing
import os

import torch

from demos.data.procs import START_METHOD, start_fork_server, stop_fork_server
from demos.errors import InputError
from demos.guests import process_slot

# Inductor compiles in the child itself instead of starting a pool of compile workers (one per core).
CHILD_ENV = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}


def _child_main(fn, args, conn) -> None:
    """Run fn(*args) with the server's thread setting; send (True, result), (False, sentence) or (None, bug)."""
    os.environ.update(CHILD_ENV)
    torch.set_num_threads(1)  # as the server runs its demos (pages/shell/entry.py)
    try:
        conn.send((True, fn(*args)))
    except InputError as err:
        conn.send((False, str(err)))
    except Exception as err:  # reported to the page as a bug, with the child's error type and message
        conn.send((None, f"{type(err).__name__}: {err}"))
    finally:
        conn.close()


def run_isolated(fn, *args, time_limit_s: float = 180.0):
    """fn(*args) run in a child process; its InputError is raised here, any other error as RuntimeError."""
    with process_slot():
        start_fork_server()
        ctx = multiprocessing.get_context(START_METHOD)
        receive, send = ctx.Pipe(duplex=False)
        child = ctx.Process(target=_child_main, args=(fn, args, send))
        try:
            child.start()
            send.close()
            if not receive.poll(time_limit_s):
                raise InputError(f"The run passed its {time_limit_s:g} s limit and was stopped; try a smaller size.")
            ok, value = receive.recv()
        except EOFError:
            child.join(5)
            raise RuntimeError(f"the child process ended without a result (exit code {child.exitcode})") from None
        finally:
            _stop(child)
            receive.close()
            stop_fork_server()
    if ok:
        return value
    raise InputError(value) if ok is False else RuntimeError(value)


def _stop(child) -> None:
    if child.pid is None:
        return
    child.join(5)
    if child.is_alive():
        child.kill()
        child.join(5)
