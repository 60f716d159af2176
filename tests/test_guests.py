"""The server-wide process line: first come, first served, each waiting run told its place; the memory limit
read from cgroup files caps the processes per run."""

import threading
import time

import pytest

from demos import guests
from demos.errors import InputError


def hold_slot(entered: threading.Event, release: threading.Event, log: list, name: str,
              places: list | None = None) -> threading.Thread:
    places = [] if places is None else places  # every place in line this run was told, in order

    def body():
        with guests.turn(places.append, wait_s=30):
            log.append((name, places))
            entered.set()
            release.wait(10)

    thread = threading.Thread(target=body)
    thread.start()
    return thread


def wait_until(condition, timeout_s: float = 10) -> bool:
    end = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < end:
        time.sleep(0.01)
    return condition()


def test_runs_go_in_arrival_order_and_each_waiting_run_is_told_its_place(no_warm_helpers):
    names = ("first", "second", "third")
    log, releases, threads, told = [], [], [], {name: [] for name in names}
    for name in names:
        entered, release = threading.Event(), threading.Event()
        threads.append(hold_slot(entered, release, log, name, told[name]))
        releases.append((entered, release))
        time.sleep(0.3)  # let it join the line before the next one arrives
    for i, (entered, release) in enumerate(releases):
        assert entered.wait(10)
        release.set()
        # before the next release, each run still waiting has been told its new place (one fewer ahead)
        expected = {n: [j - i - 1] for j, n in enumerate(names) if j > i}
        assert wait_until(lambda expected=expected: all(told[n][-1:] == e for n, e in expected.items()))
    for t in threads:
        t.join(10)
    assert [name for name, _ in log] == ["first", "second", "third"]
    assert told["first"] == []  # it never waited
    assert told["second"] == [1, 0]
    assert told["third"] == [2, 1, 0]  # "2 runs ahead of yours", then 1, then its turn


def test_a_run_that_waits_too_long_is_refused_with_a_sentence_and_leaves_the_line():
    entered, release = threading.Event(), threading.Event()
    holder = hold_slot(entered, release, [], "holder")
    assert entered.wait(10)
    with pytest.raises(InputError, match="1 run is still ahead of yours after 0 s"):
        with guests.process_slot(wait_s=0.3):
            pass
    release.set()
    holder.join(10)
    assert not guests.busy()


def test_a_deferred_run_runs_at_once_when_the_line_is_free_and_raises_before_running_when_it_is_not():
    ran = []

    def run(name):
        with guests.process_slot(wait_s=5):
            ran.append(name)

    with guests.deferring_turn():
        run("free line")
    entered, release = threading.Event(), threading.Event()
    holder = hold_slot(entered, release, [], "holder")
    assert entered.wait(10)
    try:
        with guests.deferring_turn(), pytest.raises(guests.TurnNeeded):
            run("busy line")
        told = []
        threading.Timer(0.3, release.set).start()
        with guests.turn(told.append, wait_s=10):  # the caller waits for its turn, then the run takes it
            run("after its turn")
            assert guests.busy()
        assert told == [1, 0]
    finally:
        release.set()
        holder.join(10)
    assert ran == ["free line", "after its turn"]
    assert not guests.busy()


def test_memory_limit_is_read_from_cgroup_v2_then_v1(tmp_path, monkeypatch):
    monkeypatch.delenv(guests.LIMIT_VARIABLE, raising=False)
    v2, v1 = tmp_path / "memory.max", tmp_path / "limit_in_bytes"
    assert guests.read_memory_limit([str(v2), str(v1)]) is None  # neither file: no limit
    v1.write_text("9223372036854771712\n")  # v1 without a limit
    assert guests.read_memory_limit([str(v2), str(v1)]) is None
    v1.write_text("1073741824\n")
    assert guests.read_memory_limit([str(v2), str(v1)]) == 2**30
    v2.write_text("max\n")
    assert guests.read_memory_limit([str(v2), str(v1)]) is None
    v2.write_text("734003200\n")
    assert guests.read_memory_limit([str(v2), str(v1)]) == 734003200
    assert guests.read_memory_limit([str(v2)], {guests.LIMIT_VARIABLE: "690"}) == 690 * 10**6  # the override wins


def test_small_limits_scale_processes_down_and_say_so(monkeypatch):
    assert guests.process_cap(None) == guests.MAX_PROCESSES or guests.MEMORY_LIMIT is not None
    smallest = guests.process_cap(690 * 10**6)
    assert 1 <= smallest < guests.MAX_PROCESSES <= guests.process_cap(4 * 10**9)
    monkeypatch.setattr(guests, "MEMORY_LIMIT", 690 * 10**6)
    granted, note = guests.scaled(4, "ranks", low=2)
    assert granted == max(2, smallest) < 4
    assert note == (f"This server's memory limit (0.69 GB) allows {granted} ranks per run, so {granted} ran "
                    "instead of 4.")
    assert guests.scaled(granted, "ranks", low=2) == (granted, "")


def test_a_distributed_run_under_a_small_limit_runs_fewer_ranks_and_says_so(monkeypatch):
    from demos.distributed import runs, views

    monkeypatch.setattr(guests, "MEMORY_LIMIT", 690 * 10**6)
    monkeypatch.setattr(guests, "process_cap", lambda limit=None: 2)
    run = runs.run_demo("env", 4)
    assert run.world_size == 2 and len(views.env_view(run)) == 2
    assert "allows 2 ranks per run, so 2 ran instead of 4" in run.scaled
