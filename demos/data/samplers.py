"""Samplers decide which indices a DataLoader asks for, in what order, and in which batches."""

from dataclasses import dataclass

import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    DistributedSampler,
    RandomSampler,
    SequentialSampler,
    WeightedRandomSampler,
)

from demos.errors import InputError
from demos.parsing import parse_numbers, whole_in_range
from demos.shown import entry, print_each, script

MAX_ORDER_LENGTH = 24
MAX_CLASS_SIZE = 10_000
MAX_CLASSES = 8
MAX_RANKS = 8
MAX_DIST_LENGTH = 64


@dataclass(frozen=True)
class OrderResult:
    length: int
    seed: int
    orders: dict  # sampler name -> list of indices
    batches: dict  # "drop_last=False/True" -> list of index batches
    code: str


@dataclass(frozen=True)
class WeightedResult:
    class_sizes: tuple[int, ...]
    batch_size: int
    drawn_plain: tuple[int, ...]  # class counts drawn by shuffle=True
    drawn_weighted: tuple[int, ...]  # class counts drawn by WeightedRandomSampler
    batches_with_rarest: tuple[float, float]  # fraction of batches holding the rarest class: plain, weighted
    unique_fraction: float  # distinct samples / draws, weighted
    code: str


@dataclass(frozen=True)
class DistributedResult:
    length: int
    ranks: int
    shuffle: bool
    epochs: dict  # "epoch 0", "epoch 1 (no set_epoch)", "epoch 1 (set_epoch(1))" -> list per rank
    padding: int
    code: str


def repeats(order: list[int]) -> list[bool]:
    """Per position: is this index one an earlier position already drew? (The first draw of an index is not.)"""
    seen: set[int] = set()
    out = []
    for i in order:
        out.append(i in seen)
        seen.add(i)
    return out


def repeats_caption(orders: dict) -> str:
    """The order figure's red cells, counted per sampler."""
    counts = {name: sum(repeats(seq)) for name, seq in orders.items()}
    said = "; ".join(f"{name}: {n} of {len(orders[name])}" for name, n in counts.items())
    return (f"Red cells: a draw of an index an earlier cell already drew (its first draw stays blue). Repeats: "
            f"{said}. Only replacement=True can repeat.")


def orders_and_batches(length: int, seed: int) -> dict:
    """Index order from Sequential, Random (without and with replacement), and BatchSampler's grouping."""
    data = range(length)
    orders = {
        "SequentialSampler": list(SequentialSampler(data)),
        "RandomSampler": list(RandomSampler(data, generator=torch.Generator().manual_seed(seed))),
        "RandomSampler(replacement=True)": list(
            RandomSampler(data, replacement=True, generator=torch.Generator().manual_seed(seed))
        ),
    }
    batches = {f"drop_last={d}": list(BatchSampler(SequentialSampler(data), 4, drop_last=d)) for d in (False, True)}
    return {"orders": orders, "batches": batches}


@entry(10, 3)
def sampler_orders(length: int, seed: int) -> OrderResult:
    """orders_and_batches at the visitor's settings, with the code that ran."""
    _check("Dataset length", length, 2, MAX_ORDER_LENGTH)
    _check("Seed", seed, 0, 10_000)
    code = script(orders_and_batches, imports=ORDER_IMPORTS, settings={"length": length, "seed": seed},
                  run=print_each("orders_and_batches(length, seed)"))
    return OrderResult(length, seed, **orders_and_batches(length, seed), code=code)


ORDER_IMPORTS = "import torch\nfrom torch.utils.data import BatchSampler, RandomSampler, SequentialSampler"
WEIGHTED_IMPORTS = "import torch\nfrom torch.utils.data import DataLoader, WeightedRandomSampler"


def parse_class_sizes(text: str) -> tuple[int, ...]:
    """'900, 90, 10' -> (900, 90, 10): 2 to 8 whole class sizes, each 1 to 10000."""
    values = parse_numbers(text, "Class sizes", min_count=2, max_count=MAX_CLASSES,
                           example=f"a whole number from 1 to {MAX_CLASS_SIZE}", list_example="900, 90, 10")
    return tuple(whole_in_range(v, f"Class sizes, entry {i + 1}", 1, MAX_CLASS_SIZE) for i, v in enumerate(values))


def draw_both(sizes: tuple[int, ...], batch_size: int, seed: int) -> dict:
    """One epoch of batches plainly shuffled and one with inverse-frequency weights: the classes each drew."""
    labels = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    weights = 1.0 / torch.tensor(sizes, dtype=torch.double)[labels]  # each class gets equal total weight
    g = torch.Generator().manual_seed(seed)
    plain = DataLoader(labels, batch_size=batch_size, shuffle=True, generator=g)
    sampler = WeightedRandomSampler(weights, num_samples=len(labels), replacement=True,
                                    generator=torch.Generator().manual_seed(seed))
    weighted = DataLoader(labels, batch_size=batch_size, sampler=sampler)
    rarest = min(range(len(sizes)), key=sizes.__getitem__)
    drawn_plain, rare_plain = _draw(plain, len(sizes), rarest)
    drawn_weighted, rare_weighted = _draw(weighted, len(sizes), rarest)
    return {"drawn_plain": drawn_plain, "drawn_weighted": drawn_weighted,
            "batches_with_rarest": (rare_plain, rare_weighted),
            "unique_fraction": len(set(list(sampler))) / len(labels)}  # the same generator state replays: a fresh draw


@entry("900, 90, 10", 32)
def weighted_sampling(class_sizes_text: str, batch_size: int, seed: int = 0) -> WeightedResult:
    """draw_both for the visitor's class sizes, with the code that ran."""
    sizes = parse_class_sizes(class_sizes_text)
    _check("Batch size", batch_size, 1, 256)
    code = script(_draw, draw_both, imports=WEIGHTED_IMPORTS,
                  settings={"sizes": sizes, "batch_size": batch_size, "seed": seed},
                  run=print_each("draw_both(sizes, batch_size, seed)"))
    return WeightedResult(sizes, batch_size, **draw_both(sizes, batch_size, seed), code=code)


def _draw(loader, n_classes: int, rarest: int) -> tuple[tuple[int, ...], float]:
    batches = list(loader)
    counts = torch.bincount(torch.cat(batches), minlength=n_classes)
    with_rarest = sum(bool((b == rarest).any()) for b in batches) / len(batches)
    return tuple(counts.tolist()), with_rarest


def partition(length: int, ranks: int, shuffle: bool, seed: int) -> dict:
    """DistributedSampler for every simulated rank: epoch 0, epoch 1 without set_epoch, epoch 1 with it."""
    data = range(length)
    samplers = [DistributedSampler(data, num_replicas=ranks, rank=r, shuffle=shuffle, seed=seed) for r in range(ranks)]
    epochs = {"epoch 0": [list(s) for s in samplers], "epoch 1 without set_epoch": [list(s) for s in samplers]}
    for s in samplers:
        s.set_epoch(1)  # leave this out and every epoch repeats epoch 0's order
    epochs["epoch 1 after set_epoch(1)"] = [list(s) for s in samplers]
    return {"epochs": epochs, "padding": samplers[0].total_size - length}


@entry(10, 4, True)
def distributed_partition(length: int, ranks: int, shuffle: bool = True, seed: int = 0) -> DistributedResult:
    """partition at the visitor's settings, with the code that ran."""
    _check("Dataset length", length, 1, MAX_DIST_LENGTH)
    _check("Ranks", ranks, 1, MAX_RANKS)
    code = script(partition, imports="from torch.utils.data import DistributedSampler",
                  settings={"length": length, "ranks": ranks, "shuffle": shuffle, "seed": seed},
                  run=print_each("partition(length, ranks, shuffle, seed)"))
    return DistributedResult(length, ranks, shuffle, **partition(length, ranks, shuffle, seed), code=code)


def _check(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise InputError(f"{name} must be between {low} and {high}; got {value}.")
