"""Runs with worker processes: one at a time, a fresh fork server, a deadline, and nothing left behind.

Start method: 'forkserver', chosen by measurement on this 2-core host (4 workers, first batch of a tiny dataset):
'spawn' took 13-24 s (every worker imports torch again); 'fork' took 0.1 s but copies a threaded Streamlit
server mid-flight (a lock held by another thread stays locked forever in the child); 'forkserver' took 1.2 s
for the first run (the server imports torch once) and 0.09 s once the server was up. The server is started
when a run first needs workers and stopped when the run ends, so no process outlives a run.
"""

import gc
import multiprocessing
import multiprocessing.forkserver
import time
import traceback
import warnings
from contextlib import contextmanager

from torch.utils.data import DataLoader

from demos.data.workers import noop
from demos.errors import InputError
from demos.guests import process_slot, release_resource_tracker

START_METHOD = "forkserver"
# The first module stops workers from re-running app.py (the parent's __main__); see its docstring.
PRELOAD = ["demos.data.forkserver_preload", "torch", "demos.data.workers"]
DEFAULT_LIMIT_S = 10.0


class RunTimeout(InputError):
    """A run passed its time limit and was stopped."""


@contextmanager
def _quiet_worker_advice():
    """Silence torch's "more workers than cores" advice: the page states the core count itself."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        yield


class WorkerRun:
    """Makes DataLoaders on the fork server, tracks their workers, and stops them all on close()."""

    def __init__(self, time_limit_s: float):
        self.context = multiprocessing.get_context(START_METHOD)
        self.time_limit_s = time_limit_s
        self.deadline = time.perf_counter() + time_limit_s
        self.loaders: list[DataLoader] = []
        self.iterators: list = []
        self.startup_s = 0.0  # fork server start-up, paid by the first loader that has workers
        self.server_started = False

    def loader(self, dataset, **kwargs) -> DataLoader:
        """A DataLoader on this run's fork server whose batch wait is capped by the run's time limit."""
        if kwargs.get("num_workers", 0) > 0:
            self._ensure_server()
            kwargs.setdefault("multiprocessing_context", self.context)
            kwargs.setdefault("timeout", self.time_limit_s)
        with _quiet_worker_advice():
            loader = DataLoader(dataset, **kwargs)
        self.loaders.append(loader)
        return loader

    def iterate(self, loader: DataLoader):
        """iter(loader), remembered so its workers can be stopped whatever happens next."""
        with _quiet_worker_advice():
            it = iter(loader)
        self.iterators.append(it)
        return it

    def _ensure_server(self) -> None:
        """Start the fork server once per run; its start-up does not count against the run's time limit."""
        if not self.server_started:
            self.server_started = True
            self.startup_s = start_fork_server()
            self.deadline += self.startup_s

    def check_deadline(self) -> None:
        if time.perf_counter() > self.deadline:
            raise RunTimeout(f"The run passed its {self.time_limit_s:g} s limit and was stopped; use fewer samples "
                             "or shorter delays.")

    def close(self, timed_out: bool = False) -> None:
        """Shut every iterator down (joins its workers), then kill any worker that is still alive.

        After a timeout a worker may be stuck for good: it is killed first, since the DataLoader's own
        shutdown would wait 5 s for it before terminating it.
        """
        iterators = self.iterators + [ld._iterator for ld in self.loaders if getattr(ld, "_iterator", None)]
        for it in iterators:
            if timed_out:
                for w in getattr(it, "_workers", []):
                    w.kill()
            shutdown = getattr(it, "_shutdown_workers", None)
            if shutdown is not None:
                shutdown()
            for w in getattr(it, "_workers", []):
                if w.is_alive():
                    w.kill()
                w.join(timeout=2)
        self.iterators.clear()
        for ld in self.loaders:
            ld._iterator = None
        self.loaders.clear()


def start_fork_server() -> float:
    """Start the fork server with torch and the datasets preloaded; returns the seconds it took."""
    ctx = multiprocessing.get_context(START_METHOD)
    ctx.set_forkserver_preload(PRELOAD)
    t0 = time.perf_counter()
    probe = ctx.Process(target=noop)  # the first fork waits until the server has imported torch
    probe.start()
    probe.join()
    return time.perf_counter() - t0


def stop_fork_server() -> None:
    """Stop the fork server and multiprocessing's resource tracker (unless the distributed page's warm fork server
    still reports to it): no idle helper outlives a run."""
    gc.collect()  # drop finished queues first, so the tracker has no semaphores left to report
    multiprocessing.forkserver._forkserver._stop()
    release_resource_tracker()


def _clear_frames(err: BaseException | None) -> None:
    """Clear the locals of every finished frame in an exception and the exceptions it chains to."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        traceback.clear_frames(err.__traceback__)
        err = err.__cause__ or err.__context__


@contextmanager
def worker_run(time_limit_s: float = DEFAULT_LIMIT_S):
    """Hold the server-wide process slot; yield a WorkerRun; on any exit stop its workers and the fork server."""
    with process_slot():
        run = WorkerRun(time_limit_s)
        timed_out = False
        try:
            yield run
        except BaseException as err:
            timed_out = isinstance(err, RunTimeout)
            # The traceback's frames still hold the loader and its queues: free them so their semaphores
            # are released before the resource tracker stops (otherwise it reports them as leaked).
            _clear_frames(err)
            raise
        finally:
            run.close(timed_out)
            if run.server_started:
                stop_fork_server()
