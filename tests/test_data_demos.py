"""Oracle tests: each in-process data demo against torch itself (its snippets: tests/test_shown_systems.py)."""

import math

import pytest
import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DistributedSampler, RandomSampler, WeightedRandomSampler

from demos.data.collate import bucketing, corpus_lengths, pad_batch
from demos.data.pinning import pin_demo
from demos.data.samplers import distributed_partition, sampler_orders, weighted_sampling
from demos.data.timeline import (
    MAX_BATCH,
    MAX_SAMPLES,
    LoaderConfig,
    Workload,
    default_samples,
    sample_choices,
    speedup_bound,
    validate,
)
from demos.errors import InputError


def test_sampler_orders_match_torch():
    r = sampler_orders(10, 3)
    assert r.orders["SequentialSampler"] == list(range(10))
    assert r.orders["RandomSampler"] == list(RandomSampler(range(10), generator=torch.Generator().manual_seed(3)))
    with_repl = list(RandomSampler(range(10), replacement=True, generator=torch.Generator().manual_seed(3)))
    assert r.orders["RandomSampler(replacement=True)"] == with_repl
    assert sorted(r.orders["RandomSampler"]) == list(range(10))
    assert r.batches["drop_last=False"][-1] == [8, 9] and len(r.batches["drop_last=True"]) == 2


def test_weighted_sampler_counts_match_torch():
    r = weighted_sampling("900, 90, 10", 32, seed=1)
    labels = torch.repeat_interleave(torch.arange(3), torch.tensor([900, 90, 10]))
    weights = 1.0 / torch.tensor([900.0, 90.0, 10.0], dtype=torch.double)[labels]
    drawn = torch.tensor(list(WeightedRandomSampler(weights, 1000, generator=torch.Generator().manual_seed(1))))
    assert r.drawn_weighted == tuple(torch.bincount(labels[drawn], minlength=3).tolist())
    assert r.drawn_plain == (900, 90, 10), "a shuffled epoch draws every sample exactly once"
    assert sum(r.drawn_weighted) == 1000 and min(r.drawn_weighted) > 250
    assert r.batches_with_rarest[1] > r.batches_with_rarest[0]


@pytest.mark.parametrize("length,ranks,shuffle", [(10, 4, True), (12, 4, True), (7, 3, False), (5, 8, True)])
def test_distributed_partitions_cover_pad_and_change_with_set_epoch(length, ranks, shuffle):
    r = distributed_partition(length, ranks, shuffle)
    per_rank = math.ceil(length / ranks)
    assert r.padding == per_rank * ranks - length
    for lists in r.epochs.values():
        flat = [i for rank in lists for i in rank]
        assert all(len(rank) == per_rank for rank in lists)
        assert set(flat) == set(range(length)), "the ranks together cover the dataset"
        assert len(flat) - len(set(flat)) == r.padding, "only the padding repeats; otherwise disjoint"
    for rank in range(ranks):
        assert r.epochs["epoch 0"][rank] == list(DistributedSampler(range(length), ranks, rank, shuffle=shuffle))
    assert r.epochs["epoch 1 without set_epoch"] == r.epochs["epoch 0"]
    if shuffle and length >= 10:
        assert r.epochs["epoch 1 after set_epoch(1)"] != r.epochs["epoch 0"]


def test_padded_batch_shapes_and_mask():
    r = pad_batch("5, 3, 8, 2")
    seqs = [torch.arange(1, n + 1) for n in (5, 3, 8, 2)]
    assert r.shape == (4, 8)
    assert r.padded == tuple(map(tuple, pad_sequence(seqs, batch_first=True).tolist()))
    assert [sum(row) for row in r.mask] == [5, 3, 8, 2]
    assert all(row[: n] == (True,) * n and not any(row[n:]) for row, n in zip(r.mask, (5, 3, 8, 2), strict=True))
    assert r.padding_fraction == pytest.approx(1 - 18 / 32)
    with pytest.raises(RuntimeError) as err:
        torch.stack(seqs)
    assert r.default_error == str(err.value)
    assert pad_batch("4, 4").default_error == ""


def test_bucketing_padding_is_measured_and_smaller():
    r = bucketing(512, 16, seed=2)
    lengths = corpus_lengths(512, 2)
    ordered = sorted(lengths)
    padded = sum(max(ordered[i:i + 16]) * len(ordered[i:i + 16]) for i in range(0, 512, 16))
    assert r.bucketed_padding == pytest.approx(1 - sum(lengths) / padded)
    assert r.bucketed_padding < r.random_padding
    assert len(r.random_max_lengths) == len(r.bucketed_max_lengths) == 32


def test_pin_demo_reports_what_torch_says():
    r = pin_demo(2)
    try:
        torch.empty(4).pin_memory()
        expected = ""
    except RuntimeError as err:
        expected = str(err)
    assert r.pin_error == expected
    assert r.copy_ms > 0
    assert (r.h2d_pinned_gbps is None) == (not torch.cuda.is_available())


def test_speedup_bound_names_the_slowest_stage():
    io_bound = Workload(samples=32, io_ms=20, transform_ms=0, step_ms=0)
    assert speedup_bound(io_bound, LoaderConfig(num_workers=4), 2) == pytest.approx(4.0)
    step_bound = Workload(samples=32, io_ms=10, transform_ms=0, step_ms=40)
    assert speedup_bound(step_bound, LoaderConfig(num_workers=4, batch_size=4), 2) == pytest.approx(80 / 40)
    cpu_bound = Workload(samples=32, io_ms=0, transform_ms=10, step_ms=0)
    assert speedup_bound(cpu_bound, LoaderConfig(num_workers=4), 2) == pytest.approx(2.0)
    assert speedup_bound(io_bound, LoaderConfig(num_workers=0), 2) == 1.0


@pytest.mark.parametrize("io, cpu, step, batch", [(20, 5, 15, 4), (25, 1, 40, 4), (100, 20, 200, 1),
                                                  (0, 0, 0, 16), (100, 0, 5, 16)])
def test_offered_sample_counts_are_exactly_those_validate_accepts(io, cpu, step, batch):
    choices = sample_choices(io, cpu, step, batch)
    assert choices[0] == 4
    for n in range(4, MAX_SAMPLES + 1, 4):
        workload, config = Workload(n, io, cpu, step), LoaderConfig(batch_size=batch)
        if n in choices:
            validate(workload, config)
            for bigger in range(batch, MAX_BATCH + 1):  # a larger batch means fewer steps: still accepted
                validate(workload, LoaderConfig(batch_size=bigger))
        else:
            with pytest.raises(InputError, match="under 1.5 s"):
                validate(workload, config)
    assert default_samples(choices) == min(Workload().samples, choices[-1])


def test_validation_names_the_limit():
    with pytest.raises(InputError, match="under 1.5 s"):
        validate(Workload(samples=64, io_ms=100, transform_ms=0, step_ms=0), LoaderConfig())
    with pytest.raises(InputError, match="num_workers: 9 is out of range; it must be from 0 to 4"):
        validate(Workload(), LoaderConfig(num_workers=9))
