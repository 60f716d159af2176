"""Datasets the demos load; importable on their own so forked workers can unpickle them.

Each sample carries timestamps taken inside the process that produced it (time.perf_counter, which on
Linux reads CLOCK_MONOTONIC: one clock for every process on the machine, so worker and main times line up).
"""

import os
import time

import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

IMAGE_SIDE = 64


def worker_id() -> int:
    """The DataLoader worker id of this process, or -1 in the main process."""
    info = get_worker_info()
    return -1 if info is None else info.id


def transform(reps: int, seed: int) -> torch.Tensor:
    """Real CPU work standing in for decoding and augmentation: `reps` rounds of arithmetic on an image.

    Plain arithmetic on 3x64x64 stays below torch's parallel grain size, so it runs on one thread in the main
    process and in a worker alike (matmul or tanh would fan out to every core from the main process).
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(3, IMAGE_SIDE, IMAGE_SIDE, generator=g)
    for _ in range(reps):
        x = x * x * 0.9 + 0.05
    return x


class TimedDataset(Dataset):
    """Map-style: __getitem__ sleeps io_ms (a read), then does `reps` of torch work, and stamps both.

    `setup_ms` is a cost paid once per process on its first sample (opening files, connecting to storage, loading
    an index): a worker that lives on (persistent_workers) keeps its set-up copy of the dataset; a new worker gets
    a fresh copy from the main process and pays it again.
    """

    def __init__(self, length: int, io_ms: float, reps: int, fail_at: int = -1, hang_at: int = -1,
                 setup_ms: float = 0.0):
        self.length, self.io_ms, self.reps = length, io_ms, reps
        self.fail_at, self.hang_at = fail_at, hang_at
        self.setup_ms, self.ready = setup_ms, False

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> dict:
        s0 = s1 = 0.0
        if not self.ready:  # this process's first sample: set up once (no setup, no span: even sleep(0) takes time)
            if self.setup_ms:
                s0 = time.perf_counter()
                time.sleep(self.setup_ms / 1000)
                s1 = time.perf_counter()
            self.ready = True
        t0 = time.perf_counter()
        if i == self.fail_at:
            raise ValueError(f"sample {i} could not be decoded")
        time.sleep(3600 if i == self.hang_at else self.io_ms / 1000)
        t1 = time.perf_counter()
        x = transform(self.reps, i)
        t2 = time.perf_counter()
        stamps = torch.tensor([t0, t1, t2, s0, s1], dtype=torch.float64)
        return {"x": x, "index": i, "worker": worker_id(), "pid": os.getpid(), "t": stamps}


class NaiveStream(IterableDataset):
    """An IterableDataset that ignores workers: every worker replays the whole stream."""

    def __init__(self, length: int):
        self.length = length

    def __iter__(self):
        for i in range(self.length):
            yield {"index": i, "worker": worker_id()}


class ShardedStream(NaiveStream):
    """The same stream, sharded: worker k of n yields ids k, k+n, k+2n, ..."""

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(start, self.length, step):
            yield {"index": i, "worker": worker_id()}
