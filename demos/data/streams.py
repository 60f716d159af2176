"""IterableDataset with workers: every worker replays the stream unless the dataset shards by worker id."""

from dataclasses import dataclass

from demos.data.procs import worker_run
from demos.data.workers import NaiveStream, ShardedStream
from demos.errors import InputError

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


def stream_demo(length: int, num_workers: int, time_limit_s: float = 10.0) -> StreamRun:
    """Load both streams with real workers and record which worker produced each sample id."""
    if not 1 <= num_workers <= MAX_WORKERS:
        raise InputError(f"num_workers must be between 1 and {MAX_WORKERS}; got {num_workers}.")
    if not 1 <= length <= MAX_LENGTH:
        raise InputError(f"Stream length must be between 1 and {MAX_LENGTH}; got {length}.")
    with worker_run(time_limit_s) as run:
        naive = _drain(run, NaiveStream(length), num_workers)
        sharded = _drain(run, ShardedStream(length), num_workers)
    return StreamRun(length, num_workers, naive, sharded, stream_code(length, num_workers))


def _drain(run, dataset, num_workers: int) -> tuple[tuple[int, int], ...]:
    seen = []
    for batch in run.iterate(run.loader(dataset, batch_size=None, num_workers=num_workers)):
        seen.append((int(batch["index"]), int(batch["worker"])))
        run.check_deadline()
    return tuple(seen)


def stream_code(length: int, num_workers: int) -> str:
    return f'''from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class Stream(IterableDataset):
    def __init__(self, length, shard):
        self.length, self.shard = length, shard

    def __iter__(self):
        info = get_worker_info()
        start, step = (info.id, info.num_workers) if self.shard and info else (0, 1)
        for i in range(start, self.length, step):
            yield i


if __name__ == "__main__":
    for shard in (False, True):
        loader = DataLoader(Stream({length}, shard), batch_size=None, num_workers={num_workers},
                            multiprocessing_context="forkserver")
        ids = [int(i) for i in loader]
        print("sharded" if shard else "naive", len(ids), "samples,", len(ids) - len(set(ids)), "duplicates")
'''
