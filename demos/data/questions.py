"""Predict-then-run questions for the data loading page; each one runs a real DataLoader or sampler."""

import functools

import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import (
    DataLoader,
    Dataset,
    DistributedSampler,
    IterableDataset,
    WeightedRandomSampler,
    get_worker_info,
)

from demos.errors import InputError
from demos.guests import process_slot
from demos.quiz import Question

STREAM_IMPORTS = "from torch.utils.data import DataLoader, IterableDataset, get_worker_info"
LOADER_IMPORTS = "from torch.utils.data import DataLoader"
SNIPPET_TIMEOUT_S = 10  # the DataLoader(timeout=10) of every snippet that forks workers


def _one_run_at_a_time(fn):
    """Questions that start worker processes take the server-wide process slot: their Question runs the function
    wrapped in this, and shows the function itself (undecorated, so its source is the snippet).

    Their snippets fork (a class defined in a snippet cannot be sent to a spawned worker); the workers only
    iterate Python ranges, and the DataLoader joins them before the snippet returns. Forking a threaded server
    can copy a lock another thread holds, so a worker may hang: each snippet's DataLoader has a `timeout`, and
    its error becomes a sentence.
    """

    @functools.wraps(fn)
    def run():
        with process_slot():
            try:
                return fn()
            except RuntimeError as err:
                if "timed out" not in str(err):
                    raise
                raise InputError(f"The snippet's worker processes gave no batch within {SNIPPET_TIMEOUT_S} s, so "
                                 "they were stopped; run it again.") from None

    return run


def _unsharded_count():
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(4))

    loader = DataLoader(Stream(), batch_size=None, num_workers=3, multiprocessing_context="fork",
                        timeout=10)
    return len(list(loader))


def _sharded_count():
    class Stream(IterableDataset):
        def __iter__(self):
            info = get_worker_info()
            return iter(range(info.id, 4, info.num_workers))

    loader = DataLoader(Stream(), batch_size=None, num_workers=3, multiprocessing_context="fork",
                        timeout=10)
    return len(list(loader))


def _prefetch_in_flight():
    loader = DataLoader(range(100), batch_size=4, num_workers=2, prefetch_factor=3,
                        multiprocessing_context="fork", timeout=10)
    it = iter(loader)
    in_flight = len(it._task_info)  # batches requested from workers before the first next()
    it._shutdown_workers()
    return in_flight


def _len_drop_last():
    return len(DataLoader(range(10), batch_size=4, drop_last=True))


def _distributed_last_rank():
    sampler = DistributedSampler(range(10), num_replicas=4, rank=3, shuffle=False)
    return list(sampler)


def _same_order_without_set_epoch():
    sampler = DistributedSampler(range(8), num_replicas=2, rank=0, shuffle=True)
    first = list(sampler)
    second = list(sampler)  # a new epoch, but set_epoch was never called
    return first == second


def _default_collate_ragged():
    try:
        batch = next(iter(DataLoader([torch.ones(3), torch.ones(5)], batch_size=2)))
        outcome = f"a batch of shape ({batch.shape[0]}, {batch.shape[1]})"
    except RuntimeError:
        outcome = RuntimeError
    return outcome


def _weighted_zero_weight():
    sampler = WeightedRandomSampler([0.0, 0.0, 1.0], num_samples=5, replacement=True)
    return sum(sampler)


def _worker_info_in_main():
    class Probe(Dataset):
        def __len__(self):
            return 1

        def __getitem__(self, i):
            return get_worker_info() is None

    return bool(next(iter(DataLoader(Probe(), num_workers=0)))[0])


def _padded_shape():
    batch = [torch.ones(3), torch.ones(5), torch.ones(2)]
    return pad_sequence(batch, batch_first=True).shape


QUESTIONS = (
    Question(
        "unsharded", "An `IterableDataset` yields 4 samples and ignores workers. How many samples does a DataLoader "
        "with num_workers=3 produce?", _one_run_at_a_time(_unsharded_count),
        "Each worker gets its own copy of the dataset and runs `__iter__` from the start: 3 x 4 = 12, every id "
        "three times. Map-style datasets do not have this problem because the sampler hands out indices.",
        kind="number", imports=STREAM_IMPORTS,
    ),
    Question(
        "sharded", "The same stream, but `__iter__` starts at `info.id` and steps by `info.num_workers`. "
        "How many samples now?", _one_run_at_a_time(_sharded_count),
        "Worker k yields ids k, k+3, ...: the shards are disjoint and cover the stream, so each id arrives once.",
        kind="number", imports=STREAM_IMPORTS,
    ),
    Question(
        "prefetch", "num_workers=2, prefetch_factor=3: how many batches has the DataLoader already requested "
        "from its workers right after iter(loader)?", _prefetch_in_flight,
        "prefetch_factor is per worker: at most num_workers x prefetch_factor batches are in flight. It bounds "
        "memory and smooths jitter; it cannot raise throughput above what the workers produce.",
        kind="number", imports=LOADER_IMPORTS,
    ),
    Question(
        "drop_last", "len(DataLoader(range(10), batch_size=4, drop_last=True))?", _len_drop_last,
        "10 // 4 = 2 full batches; drop_last throws away the partial batch of 2 (without it: 3 batches).",
        choices=("2", "3", "10"), imports=LOADER_IMPORTS,
    ),
    Question(
        "distributed", "DistributedSampler over 10 items, 4 ranks, shuffle=False: which indices does rank 3 get?",
        _distributed_last_rank,
        "Every rank must get the same count, ceil(10 / 4) = 3, so the index list is padded by wrapping around to "
        "[0..9, 0, 1] and rank r takes every 4th entry from r: 3, 7, then the padded 1.",
        choices=("[3, 7]", "[3, 7, 1]", "[9]", "[7, 8, 9]"), imports="from torch.utils.data import DistributedSampler",
    ),
    Question(
        "set_epoch", "A shuffling DistributedSampler is iterated twice without set_epoch. Is the order the same?",
        _same_order_without_set_epoch,
        "The shuffle is seeded with seed + epoch, and the epoch only changes through set_epoch: without it every "
        "epoch repeats the first order on every rank.",
        choices=("True", "False"), imports="from torch.utils.data import DistributedSampler",
    ),
    Question(
        "ragged", "default_collate receives tensors of length 3 and 5. What happens?", _default_collate_ragged,
        "default_collate calls torch.stack, which needs equal shapes: a RuntimeError. Pad in a collate_fn "
        "(pad_sequence) and return a mask, or use nested tensors.",
        choices=("a batch of shape (2, 5)", "a batch of shape (2, 3)", "RuntimeError"),
        imports="import torch\n" + LOADER_IMPORTS,
    ),
    Question(
        "weighted", "WeightedRandomSampler([0, 0, 1], num_samples=5, replacement=True): what is the sum of the "
        "drawn indices?", _weighted_zero_weight,
        "Weights are relative probabilities: indices 0 and 1 can never be drawn, so all five draws are index 2.",
        kind="number", imports="from torch.utils.data import WeightedRandomSampler",
    ),
    Question(
        "worker_info", "With num_workers=0, is `get_worker_info()` None inside `__getitem__`?", _worker_info_in_main,
        "With no workers __getitem__ runs in the main process, where get_worker_info() returns None: sharding "
        "code must handle that case.",
        choices=("True", "False"), imports="from torch.utils.data import DataLoader, Dataset, get_worker_info",
    ),
    Question(
        "padded_shape", "pad_sequence([ones(3), ones(5), ones(2)], batch_first=True).shape?", _padded_shape,
        "Every sequence is padded to the longest one (5), one row per sequence.",
        kind="shape", imports="import torch\nfrom torch.nn.utils.rnn import pad_sequence",
    ),
)
