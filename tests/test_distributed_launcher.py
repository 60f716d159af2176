"""The launcher always cleans up (success, failure, timeout), and torchrun writes a result file the page loads."""

import contextlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from demos.distributed import runs, views
from demos.distributed.launcher import RunFailed, run_ranks
from demos.distributed.params import validate_params, validate_world
from demos.distributed.results import load_result
from demos.errors import InputError
from demos.processes import free_port
from tests.test_processes import warm_helper_pids

ROOT = Path(__file__).resolve().parent.parent


def gone(pid: int) -> bool:
    """The process no longer exists (or is a zombie about to be reaped by nobody: counts as not running)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def port_free(port: int) -> bool:
    """Nothing listens on the port: a new TCPStore (which sets SO_REUSEADDR) could bind it now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def children_now() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def rank_pids(before: set[int]) -> set[int]:
    """New descendants since `before`, minus the long-lived helpers (the fork server, the resource tracker)."""
    return children_now() - before - set(warm_helper_pids().values())


def test_success_leaves_no_process_and_frees_the_port():
    record, info = run_ranks("env", 2, {})
    assert info.exit_codes == (0, 0)
    assert all(gone(pid) for pid in info.pids)
    assert port_free(info.port)
    assert [e["seen"]["pid"] for e in record["ranks"]] == list(info.pids)


def test_failure_stops_every_rank_with_a_message(monkeypatch):
    import demos.distributed.launcher as launcher

    ports = []
    monkeypatch.setattr(launcher, "free_port", lambda: ports.append(free_port()) or ports[-1])
    before = children_now()
    with pytest.raises(RunFailed, match="Rank 1 failed .*on purpose"):
        run_ranks("fail", 2, {})
    assert not {p for p in rank_pids(before) if not gone(p)}
    assert port_free(ports[0])
    run_ranks("env", 2, {})  # the lock was released and the group can start again


def test_timeout_kills_every_rank_and_frees_the_port(monkeypatch):
    ports = []
    import demos.distributed.launcher as launcher

    def recording_port():
        ports.append(free_port())
        return ports[-1]

    monkeypatch.setattr(launcher, "free_port", recording_port)
    before = children_now()
    with pytest.raises(RunFailed, match="did not finish within 2 s"):
        run_ranks("sleep", 2, {"seconds": 60}, timeout_s=2)
    assert not {p for p in rank_pids(before) if not gone(p)}
    assert port_free(ports[0])


def test_world_size_is_limited():
    with pytest.raises(InputError, match="between 2 and 4"):
        run_ranks("env", 5, {})


def test_torchrun_writes_a_result_file_the_page_loads(tmp_path):
    out = tmp_path / "result.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port()),
           "-m", "demos.distributed.run", "--demo", "sampler", "--param", "dataset=7", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    run = runs.from_file(out.read_bytes(), "result.json")
    assert run.world_size == 2 and run.backend == "gloo" and run.source.startswith("loaded file")
    view = views.sampler_view(run)
    assert view["views"]["epoch 0"]["covered"] and view["dataset"] == 7


def good_record() -> dict:
    return {"format": "pytorch-whiteboard/distributed", "version": 1, "demo": "env", "params": {}, "world_size": 1,
            "backend": "gloo", "ranks": [{"rank": 0, "seen": {"env": {}, "pid": 1, "dist_rank": 0, "dist_world": 1,
                                                                 "backend": "gloo"}}]}


def test_a_valid_record_loads_and_bad_ones_are_refused():
    run = runs.from_file(json.dumps(good_record()).encode())
    assert views.env_view(run)[0]["pid"] == 1
    for change, message in [({"format": "x"}, "format"), ({"world_size": 99}, "world_size"),
                            ({"demo": "rm -rf"}, "demo"), ({"ranks": []}, "one entry per rank")]:
        with pytest.raises(InputError, match=message):
            runs.from_file(json.dumps({**good_record(), **change}).encode())
    with pytest.raises(InputError, match="only finite numbers"):
        load_result(json.dumps({**good_record(), "x": float("nan")}).encode())
    with pytest.raises(InputError, match=r"ranks\[0\] has no 'seen'"):
        runs.from_file(json.dumps({**good_record(), "ranks": [{"rank": 0}]}).encode())


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                         max_size=4), max_leaves=20)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()))
def test_any_bytes_load_or_raise_input_error(data):
    try:
        runs.from_file(data)
    except InputError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(["world_size", "demo", "params", "ranks", "backend"]), json_values))
def test_any_record_shape_loads_or_raises_input_error(change):
    try:
        runs.from_file(json.dumps({**good_record(), **change}).encode())
    except InputError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40), st.integers(-5, 10))
def test_any_parameter_text_is_parsed_or_refused(bucket, ring, world):
    raw = {"layers": 2, "width": 16, "per_rank": 4, "bucket_cap_mb": bucket, "micro_batches": 2, "head_first": True,
           "seed": 0}
    for demo, params in (("ddp", raw), ("collectives", {"length": 2, "ring_numel": ring, "seed": 0})):
        try:
            p = validate_params(demo, 2, params)
            assert all(isinstance(v, int | float | bool) for v in p.values())
        except InputError:
            pass
    try:
        validate_world(world)
    except InputError:
        assert not 2 <= world <= 4


def test_no_child_process_is_left_after_the_idle_window(monkeypatch, no_warm_helpers):
    """The warm fork server and multiprocessing's resource tracker stop once the server has idled for the window."""
    import time
    from multiprocessing import resource_tracker

    from demos import guests, processes
    from demos.debugging.workers import worker_seeds

    monkeypatch.setattr(guests, "IDLE_WINDOW_S", 1.0)
    before = children_now()
    worker_seeds()  # DataLoader workers from a fork server started for their run and stopped after it
    assert children_now() == before, "a worker run leaves nothing behind, not even for the window"
    run_ranks("env", 2, {})
    helpers = warm_helper_pids()
    assert set(helpers) == {"forkserver", "resource_tracker"}, "the fork server and its tracker stay warm"
    assert processes.fork_server_running()
    deadline = time.monotonic() + 15
    while children_now() - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not children_now() - before, [psutil.Process(p).cmdline()[-1][:80] for p in children_now() - before]
    assert not processes.fork_server_running() and resource_tracker._resource_tracker._pid is None
    run_ranks("env", 2, {})  # and the next run starts them again
    assert set(warm_helper_pids()) == {"forkserver", "resource_tracker"}


def listening_sockets(pids: set[int]) -> set[tuple[int, str]]:
    """(pid, address) of every listening TCP socket that one of these processes owns."""
    return {(c.pid, c.laddr.ip) for c in psutil.net_connections("inet")
            if c.status == psutil.CONN_LISTEN and c.pid in pids}


def test_a_run_opens_no_listening_socket_beyond_loopback():
    """Rank 0 meets its peers through a FileStore (no TCPStore on every interface); gloo binds to loopback."""
    import ipaddress
    import threading
    import time

    def sleep_on_two_ranks():
        with contextlib.suppress(InputError):  # the test worker's record is no page demo: refused after the run
            run_ranks("sleep", 2, {"seconds": 3})

    seen: set[tuple[int, str]] = set()
    runner = threading.Thread(target=sleep_on_two_ranks)
    runner.start()
    while runner.is_alive():
        seen |= listening_sockets(children_now())
        time.sleep(0.1)
    runner.join()
    assert seen, "the ranks' gloo connections were observed listening"
    outside = {(pid, ip) for pid, ip in seen if not ipaddress.ip_address(ip).is_loopback}
    assert not outside, outside


def test_a_result_file_holding_a_lone_surrogate_is_refused():
    record = good_record()
    record["ranks"][0]["seen"]["env"] = {"RANK": "\ud800"}
    with pytest.raises(InputError, match="lone surrogate") as err:
        load_result(json.dumps(record).encode())
    str(err.value).encode("utf-8")
