"""DataLoader runs with worker processes: one at a time, a fresh fork server, a deadline, and nothing left behind.

The Data loading and Debugging pages run real DataLoaders through `worker_run`. Their workers come from the fork
server (demos/processes.py), started for the run with torch and the dataset's module imported before the run's
clock starts, and stopped when the run ends, so no process outlives a run.
"""

import gc
import signal
import time
import traceback
import warnings
from contextlib import contextmanager

from torch.utils.data import DataLoader

from demos import processes
from demos.errors import InputError
from demos.guests import process_slot

PRELOAD = ("torch",)  # and the module of the run's first dataset: its workers unpickle the dataset from there
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
        self.context = None  # the fork server's context, once a loader needs workers
        self.time_limit_s = time_limit_s
        self.deadline = time.perf_counter() + time_limit_s
        self.loaders: list[DataLoader] = []
        self.iterators: list = []
        self.startup_s = 0.0  # fork server start-up, paid by the first loader that has workers
        self.server_started = False

    def loader(self, dataset, **kwargs) -> DataLoader:
        """A DataLoader on this run's fork server whose batch wait is capped by the run's time limit."""
        if kwargs.get("num_workers", 0) > 0:
            self._ensure_server(type(dataset).__module__)
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

    def _ensure_server(self, dataset_module: str) -> None:
        """Start the fork server once per run; its start-up does not count against the run's time limit."""
        if not self.server_started:
            self.server_started = True
            preload = PRELOAD if dataset_module == "__main__" else (*PRELOAD, dataset_module)
            self.context, self.startup_s = processes.fork_server(preload, fresh=True)
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
            workers = getattr(it, "_workers", [])
            if timed_out:
                processes.reap(workers, stop_signal=signal.SIGKILL)
            shutdown = getattr(it, "_shutdown_workers", None)
            if shutdown is not None:
                shutdown()
            processes.reap(workers, stop_signal=signal.SIGKILL)  # what the shutdown left running
        self.iterators.clear()
        for ld in self.loaders:
            ld._iterator = None
        self.loaders.clear()


def _stop_helpers() -> None:
    """Stop the run's fork server and multiprocessing's resource tracker: no idle helper outlives a run."""
    gc.collect()  # drop finished queues first, so the tracker has no semaphores left to report
    processes.stop_warm_helpers()


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
                _stop_helpers()
