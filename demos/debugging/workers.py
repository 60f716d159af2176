"""DataLoader workers and NumPy randomness: the copied-generator bug and its fix.

Importable on purpose: worker processes unpickle the dataset class and worker_init_fn from here.
"""

import time
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from demos.errors import InputError
from demos.shown import entry, script
from demos.worker_runs import worker_run

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

    @staticmethod
    def seed_worker(worker_id: int) -> None:
        """worker_init_fn: give the dataset's copy of the generator a per-worker seed derived from torch's."""
        info = get_worker_info()
        info.dataset.rng = np.random.default_rng(info.seed)  # info.seed = base seed + worker id


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


def read_both(loader=DataLoader, iterate=iter) -> tuple[list[tuple], list[tuple]]:
    """One epoch from the buggy loader and one from the fixed one (worker_init_fn and a seeded generator).

    `loader` makes each DataLoader and `iterate` starts its workers: both loaders' workers start before either is
    read."""
    bug = loader(AugmentDataset(), batch_size=None, num_workers=WORKERS)
    fixed = loader(AugmentDataset(), batch_size=None, num_workers=WORKERS, worker_init_fn=AugmentDataset.seed_worker,
                   generator=torch.Generator().manual_seed(0))
    iterators = [iterate(bug), iterate(fixed)]
    return [tuple(r) for r in iterators[0]], [tuple(r) for r in iterators[1]]


def load_both() -> tuple[list[tuple], list[tuple]]:
    """read_both with two workers per loader, forked from a fork server that imported torch once
    (demos.worker_runs), not spawned: each spawned worker imports torch again (about 250 MB apiece). The dataset is
    pickled into each worker either way, so the copied generator is the same lesson. The run stops every worker
    afterwards."""
    with worker_run(TIMEOUT_S) as run:
        try:
            return read_both(run.loader, run.iterate)
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


@entry(entries=1)
def worker_seeds(workers: int = WORKERS) -> WorkerResult:
    """Run the buggy and the fixed loader (the worker run holds the server-wide process slot)."""
    if workers != WORKERS:
        raise InputError(f"This demo always uses {WORKERS} workers; got {workers}.")
    code = script(AugmentDataset, read_both, base_seeds, imports=IMPORTS, settings={"ITEMS": ITEMS, "WORKERS": WORKERS},
                  run=RUN)
    start = time.perf_counter()
    bug, fixed = load_both()
    return WorkerResult(_rows("bug: generator created in __init__", bug),
                        _rows("fix: worker_init_fn + generator", fixed),
                        base_seeds(), time.perf_counter() - start, code)


IMPORTS = """import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info"""

RUN = """if __name__ == "__main__":  # workers started by spawn or forkserver re-import this file
    bug, fixed = read_both()
    for row in bug:  # index, worker, worker seed, dataset's generator, np.random, torch.rand
        print("bug", row)  # no generator=: the worker seeds (and np.random, torch.rand) change from run to run
    for row in fixed:
        print("fixed", row)
    print("base seeds of two loaders with generator=manual_seed(0):", base_seeds())"""


# Heavy cases for `python -m bench`: starting the two loaders' workers.
BENCH_CASES = {"worker seeds: 2 loaders x 2 workers": worker_seeds}
