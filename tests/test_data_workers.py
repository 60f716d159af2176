"""Real DataLoader runs with worker processes: every sample once, sharding, epochs, and no process left behind."""

import os
import time
from collections import Counter

import psutil
import pytest
import torch.utils.data

from demos.data.streams import stream_demo
from demos.data.timeline import LoaderConfig, Workload, compare, epoch_boundaries, record_run
from demos.errors import InputError
from demos.worker_runs import RunTimeout

SMALL = Workload(samples=12, io_ms=4.0, transform_ms=1.0, step_ms=2.0)


def children() -> list[int]:
    return [p.pid for p in psutil.Process().children(recursive=True)]


@pytest.fixture
def no_children_left(no_warm_helpers):
    before = children()
    yield
    assert children() == before, "a worker, fork server or helper process outlived the run"


def test_perf_counter_is_the_machine_wide_monotonic_clock():
    assert time.get_clock_info("perf_counter").implementation == "clock_gettime(CLOCK_MONOTONIC)"
    assert abs(time.perf_counter() - time.clock_gettime(time.CLOCK_MONOTONIC)) < 0.05


def test_every_map_style_sample_appears_once_in_both_timelines(no_children_left):
    result = compare(SMALL, LoaderConfig(num_workers=0, batch_size=3), LoaderConfig(num_workers=2, batch_size=3))
    for run in (result.a, result.b):
        assert sorted(index for _, index, _, _ in run.loaded) == list(range(SMALL.samples))
        spans = [s for s in run.spans if s.kind == "io"]
        assert sorted(int(s.text.split()[1].rstrip(":")) for s in spans) == list(range(SMALL.samples))
        # Worker clocks and the main clock agree: every worker stamp lies inside the run as the main process saw it.
        assert all(-1e-3 <= s.start <= s.end <= run.wall_s + 1e-3 for s in run.spans)
    assert {w for _, _, w, _ in result.a.loaded} == {-1}
    assert {w for _, _, w, _ in result.b.loaded} == {0, 1}
    assert os.getpid() not in {pid for _, _, _, pid in result.b.loaded}
    assert result.speedup(result.a) == pytest.approx(1.0)
    assert set(result.baseline_samples_per_s) == {3}


def test_persistent_workers_keep_their_processes_across_epochs(no_children_left):
    r = epoch_boundaries(SMALL, LoaderConfig(num_workers=2, batch_size=3))
    off, on = r.off, r.on
    assert "persistent_workers=True" in r.code
    for run in (off, on):
        for epoch in (0, 1):
            assert sorted(i for e, i, _, _ in run.loaded if e == epoch) == list(range(SMALL.samples))
        assert len(run.epoch_startup_s) == 2
    off_pids = [{pid for e, _, _, pid in off.loaded if e == epoch} for epoch in (0, 1)]
    on_pids = [{pid for e, _, _, pid in on.loaded if e == epoch} for epoch in (0, 1)]
    assert off_pids[0].isdisjoint(off_pids[1]), "without persistent_workers each epoch starts new workers"
    assert on_pids[0] == on_pids[1], "persistent workers serve both epochs"


def test_unsharded_stream_repeats_per_worker_and_sharded_yields_each_once(no_children_left):
    r = stream_demo(length=7, num_workers=3)
    assert len(r.naive) == 3 * 7
    assert Counter(i for i, _ in r.naive) == {i: 3 for i in range(7)}
    assert sorted(i for i, _ in r.sharded) == list(range(7))
    assert {w for _, w in r.sharded} == {0, 1, 2}
    assert r.naive_duplicates == 14 and r.sharded_duplicates == 0


def test_no_child_left_after_a_worker_error(no_children_left):
    with pytest.raises(InputError, match="ValueError: sample 5 could not be decoded"):
        record_run(SMALL, LoaderConfig(num_workers=2, batch_size=3), fail_at=5)


def test_no_child_left_after_a_stuck_worker_times_out(no_children_left):
    t0 = time.perf_counter()
    with pytest.raises(RunTimeout, match="limit"):
        record_run(SMALL, LoaderConfig(num_workers=2, batch_size=3), hang_at=4, time_limit_s=1.5)
    assert time.perf_counter() - t0 < 30


def test_run_deadline_stops_a_slow_main_loop(no_children_left):
    with pytest.raises(RunTimeout):
        record_run(Workload(samples=16, io_ms=40.0, transform_ms=0.0, step_ms=0.0), LoaderConfig(batch_size=2),
                   time_limit_s=0.1)


class _Stuck(torch.utils.data.Dataset):
    """A dataset whose worker never answers in time, like a forked worker blocked on a copied lock."""

    def __len__(self):
        return 2

    def __getitem__(self, i):
        time.sleep(30)
        return i


def test_quiz_snippets_that_fork_workers_have_a_timeout_and_it_becomes_a_sentence(no_children_left):
    from demos.data import questions

    forking = [q for q in questions.QUESTIONS if 'multiprocessing_context="fork"' in q.snippet]
    assert forking and all(f"timeout={questions.SNIPPET_TIMEOUT_S}" in q.snippet for q in forking)

    @questions._one_run_at_a_time
    def stuck():
        loader = torch.utils.data.DataLoader(_Stuck(), num_workers=1, multiprocessing_context="fork", timeout=1)
        return list(loader)

    start = time.perf_counter()
    with pytest.raises(InputError, match="gave no batch within"):
        stuck()
    assert time.perf_counter() - start < 10
