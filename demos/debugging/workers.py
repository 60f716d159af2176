"""DataLoader workers and NumPy randomness: the copied-generator bug and its fix.

Importable on purpose: worker processes unpickle the dataset class and worker_init_fn from here.
"""

import time
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from demos.data.procs import WorkerRun, worker_run
from demos.errors import InputError

ITEMS, WORKERS, TIMEOUT_S = 8, 2, 60


class AugmentDataset(Dataset):
    """Each item draws a 'random augmentation' three ways: a NumPy Generator held by the dataset,
    the global np.random, and torch.rand."""

    def __init__(self, n: int = ITEMS, seed: int = 0):
        self.n = n
        self.rng = np.random.default_rng(seed)  # copied into every worker: the bug

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        info = get_worker_info()
        wid = info.id if info is not None else -1
        seed = info.seed if info is not None else -1
        return (i, wid, seed, float(self.rng.random()), float(np.random.random()), float(torch.rand(()).item()))


def seed_worker(worker_id: int) -> None:
    """worker_init_fn: give the dataset's copy of the generator a per-worker seed derived from torch's."""
    info = get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed)


@dataclass(frozen=True)
class WorkerRows:
    label: str
    rows: tuple[tuple, ...]  # index, worker, worker seed, dataset rng, np.random, torch.rand
    duplicates: int  # dataset-rng values that appear more than once


@dataclass(frozen=True)
class WorkerResult:
    bug: WorkerRows
    fixed: WorkerRows
    base_seeds: tuple[int, ...]  # what generator=manual_seed(0) gives as base seed in two fresh runs
    seconds: float
    code: str


def make_loader(run: WorkerRun, fixed: bool) -> DataLoader:
    """Two workers from the run's fork server; the fix adds worker_init_fn and a seeded generator."""
    return run.loader(
        AugmentDataset(), batch_size=None, num_workers=WORKERS,
        worker_init_fn=seed_worker if fixed else None,
        generator=torch.Generator().manual_seed(0) if fixed else None,
    )


def load_both() -> tuple[list[tuple], list[tuple]]:
    """Start both loaders' workers at once, read one epoch from each; the run stops every worker afterwards.

    The workers are forked from a fork server that imported torch once (demos.data.procs), not spawned: each
    spawned worker imports torch again (about 250 MB apiece). The dataset is pickled into each worker either
    way, so the copied generator is the same lesson.
    """
    with worker_run(TIMEOUT_S) as run:
        try:
            iterators = [run.iterate(make_loader(run, False)), run.iterate(make_loader(run, True))]
            return [tuple(r) for r in iterators[0]], [tuple(r) for r in iterators[1]]
        except RuntimeError as err:
            raise InputError(f"The DataLoader workers failed on this host: {str(err).splitlines()[0]}") from None


def base_seeds(runs: int = 2) -> tuple[int, ...]:
    """The base seed a DataLoader draws from generator=torch.Generator().manual_seed(0), in fresh runs."""
    return tuple(
        int(torch.empty((), dtype=torch.int64).random_(generator=torch.Generator().manual_seed(0)).item())
        for _ in range(runs)
    )


def _rows(label: str, rows: list[tuple]) -> WorkerRows:
    values = [round(r[3], 12) for r in rows]
    return WorkerRows(label, tuple(rows), len(values) - len(set(values)))


def worker_seeds(workers: int = WORKERS) -> WorkerResult:
    """Run the buggy and the fixed loader (the worker run holds the server-wide process slot)."""
    if workers != WORKERS:
        raise InputError(f"This demo always uses {WORKERS} workers; got {workers}.")
    start = time.perf_counter()
    bug, fixed = load_both()
    return WorkerResult(_rows("bug: generator created in __init__", bug),
                        _rows("fix: worker_init_fn + generator", fixed),
                        base_seeds(), time.perf_counter() - start, WORKER_CODE)


WORKER_CODE = '''import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info


class AugmentDataset(Dataset):
    def __init__(self, n=8, seed=0):
        self.n = n
        self.rng = np.random.default_rng(seed)  # every worker gets a copy of this exact state

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        info = get_worker_info()
        return i, info.id, info.seed, self.rng.random(), np.random.random(), torch.rand(()).item()


def seed_worker(worker_id):
    info = get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed)  # info.seed = base_seed + worker_id


if __name__ == "__main__":  # required with forkserver and spawn: workers re-import this file
    bug = DataLoader(AugmentDataset(), batch_size=None, num_workers=2, multiprocessing_context="forkserver")
    for i, worker, seed, dataset_rng, global_np, torch_rand in bug:
        # items 0 and 1 (workers 0 and 1) share the same dataset_rng value: the copied Generator.
        # This loader has no generator=, so its worker seeds (and np.random, torch.rand) change from run to run.
        print("bug", i, worker, dataset_rng)
    fixed = DataLoader(AugmentDataset(), batch_size=None, num_workers=2, multiprocessing_context="forkserver",
                       worker_init_fn=seed_worker, generator=torch.Generator().manual_seed(0))
    for row in fixed:
        print("fixed", row)
'''


# Heavy cases for `python -m bench`: starting the two loaders' workers.
BENCH_CASES = {"worker seeds: 2 loaders x 2 workers": worker_seeds}
