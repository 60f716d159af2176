"""IterableDataset with workers: every worker replays the stream unless the dataset shards by worker id."""

from dataclasses import dataclass

from torch.utils.data import DataLoader

from demos.data.workers import NaiveStream, ShardedStream
from demos.errors import InputError
from demos.shown import entry, script
from demos.worker_runs import worker_run

MAX_LENGTH = 48
MAX_WORKERS = 4


@dataclass(frozen=True)
class StreamRun:
    length: int
    num_workers: int
    naive: tuple[tuple[int, int], ...]  # (sample id, worker id) in arrival order
    sharded: tuple[tuple[int, int], ...]
    code: str

    @property
    def naive_duplicates(self) -> int:
        return len(self.naive) - len({i for i, _ in self.naive})

    @property
    def sharded_duplicates(self) -> int:
        return len(self.sharded) - len({i for i, _ in self.sharded})


def read_streams(length: int, num_workers: int, loader=DataLoader, iterate=iter) -> dict:
    """Which worker produced each sample id, in arrival order, for the naive and the sharded stream.

    `loader` makes each DataLoader and `iterate` reads it (the page passes its worker run's, which hold the
    server's process slot, fork workers from a fork server and stop them at a deadline)."""
    seen = {}
    for name, dataset in (("naive", NaiveStream(length)), ("sharded", ShardedStream(length))):
        batches = iterate(loader(dataset, batch_size=None, num_workers=num_workers))
        seen[name] = tuple((int(b["index"]), int(b["worker"])) for b in batches)
    return seen


@entry(6, 2, entries=16)
def stream_demo(length: int, num_workers: int, time_limit_s: float = 10.0) -> StreamRun:
    """read_streams with real workers, with the code that ran."""
    if not 1 <= num_workers <= MAX_WORKERS:
        raise InputError(f"num_workers must be between 1 and {MAX_WORKERS}; got {num_workers}.")
    if not 1 <= length <= MAX_LENGTH:
        raise InputError(f"Stream length must be between 1 and {MAX_LENGTH}; got {length}.")
    code = script(NaiveStream, ShardedStream, read_streams, imports=IMPORTS,
                  settings={"length": length, "num_workers": num_workers}, run=RUN)
    with worker_run(time_limit_s) as run:
        return StreamRun(length, num_workers, **read_streams(length, num_workers, run.loader,
                                                             lambda loader: _within_deadline(run, loader)),
                         code=code)


def _within_deadline(run, loader):
    """The loader's batches, stopping the run with a clear message once it passes its time limit."""
    for batch in run.iterate(loader):
        yield batch
        run.check_deadline()


IMPORTS = """# Run from the repository root: the streams stamp each sample with demos.data.workers.worker_id.
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from demos.data.workers import worker_id"""

RUN = """if __name__ == "__main__":  # workers started by spawn or forkserver re-import this file
    for name, seen in read_streams(length, num_workers).items():  # (sample id, worker id) in arrival order
        print(f"{name}: {seen}")"""
