"""Rules for spawned processes (DataLoader workers, distributed ranks): one run at a time, free ports."""

import socket
import threading
from contextlib import contextmanager

from demos.errors import InputError

# One lock per server process: visitors cannot pile up worker processes on a small host.
_PROCESS_LOCK = threading.Lock()


@contextmanager
def process_slot(wait_s: float = 20.0):
    """Hold the server-wide right to spawn processes; refuse with a clear message if it stays busy."""
    if not _PROCESS_LOCK.acquire(timeout=wait_s):
        raise InputError("Another run is using the worker processes right now; try again in a few seconds.")
    try:
        yield
    finally:
        _PROCESS_LOCK.release()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on at this moment."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
