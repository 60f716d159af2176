"""The shared process plumbing: a child that hangs is killed at its timeout, one that fails is named, every child
is reaped however its block ends, ports are bound on 127.0.0.1, and the fork server starts with what a run asks
for and stops without a trace. The standard library's private names it relies on still exist."""

import multiprocessing.forkserver
import multiprocessing.resource_tracker
import multiprocessing.spawn
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from demos import processes

ROOT = Path(__file__).resolve().parent.parent


def children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def gone(pid: int) -> bool:
    """No such process any more: exited and reaped (a zombie would still be listed)."""
    return not psutil.pid_exists(pid)


def warm_helper_pids() -> dict[str, int]:
    """The fork server and multiprocessing's resource tracker among this process's children, by kind."""
    found = {}
    for p in psutil.Process().children():
        command = " ".join(p.cmdline())
        for kind in ("forkserver", "resource_tracker"):
            if f"multiprocessing.{kind} import main" in command:
                found[kind] = p.pid
    return found


def _ignore_sigterm_and_sleep(ready) -> None:
    """Runs in a child: a process that does not stop when asked."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ready.set()
    time.sleep(60)


def _exit_with(code: int) -> None:
    """Runs in a child."""
    raise SystemExit(code)


@pytest.fixture
def ctx(no_warm_helpers):
    """The forkserver context with a server that imported nothing heavy; stopped again after the test."""
    context, _ = processes.fork_server(())
    yield context
    processes.stop_warm_helpers()


def test_a_child_that_hangs_is_killed_at_its_timeout(ctx):
    child = ctx.Process(target=time.sleep, args=(60,))
    start = time.monotonic()
    with pytest.raises(TimeoutError), processes.started([child]):
        processes.first_failure([child], timeout_s=1.0)
    assert time.monotonic() - start < 10
    assert child.exitcode == -signal.SIGTERM and gone(child.pid)


def test_a_child_that_ignores_the_stop_signal_is_killed_after_the_grace(ctx):
    ready = ctx.Event()
    child = ctx.Process(target=_ignore_sigterm_and_sleep, args=(ready,))
    with processes.started([child], grace_s=0.5):
        assert ready.wait(60), "the child set its handler"
    assert child.exitcode == -signal.SIGKILL and gone(child.pid)


def test_every_child_is_reaped_when_the_block_ends_in_an_error(ctx):
    procs = [ctx.Process(target=time.sleep, args=(60,)) for _ in range(2)]
    with pytest.raises(ValueError, match="a bug in the caller"), processes.started(procs):
        raise ValueError("a bug in the caller")
    assert all(p.exitcode is not None and gone(p.pid) for p in procs)


def test_the_first_failed_child_is_named_and_the_rest_are_reaped(ctx):
    fails, hangs = ctx.Process(target=_exit_with, args=(3,)), ctx.Process(target=time.sleep, args=(60,))
    with processes.started([hangs, fails]):
        failed = processes.first_failure([hangs, fails], timeout_s=30)
    assert failed is fails and fails.exitcode == 3
    assert hangs.exitcode == -signal.SIGTERM and gone(hangs.pid)


def test_a_clean_run_returns_no_failure_and_leaves_no_child(ctx):
    before = children()
    procs = [ctx.Process(target=_exit_with, args=(0,)) for _ in range(2)]
    with processes.started(procs):
        assert processes.first_failure(procs, timeout_s=30) is None
    assert children() == before


def test_free_port_binds_on_loopback_and_the_port_is_free_afterwards(monkeypatch):
    bound = []

    class RecordingSocket(socket.socket):
        def bind(self, address):
            bound.append(address)
            return super().bind(address)

    monkeypatch.setattr(processes.socket, "socket", RecordingSocket)
    port = processes.free_port()
    assert bound == [("127.0.0.1", 0)]
    monkeypatch.undo()
    assert 0 < port < 65536
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # nothing holds it


def test_gloo_is_told_the_loopback_interface():
    name = processes.loopback_interface()
    addresses = psutil.net_if_addrs()[name]
    assert any(a.family == socket.AF_INET and a.address == "127.0.0.1" for a in addresses)
    assert processes.gloo_interface() == {"GLOO_SOCKET_IFNAME": name}


def test_the_fork_server_is_reused_when_it_has_the_modules_and_restarted_when_not(no_warm_helpers):
    try:
        _, first_s = processes.fork_server(())
        server = warm_helper_pids()["forkserver"]
        assert first_s > 0 and processes.fork_server_running()
        assert processes.fork_server(())[1] == 0.0 and warm_helper_pids()["forkserver"] == server, "reused"
        _, again_s = processes.fork_server(("json",))
        assert again_s > 0 and warm_helper_pids()["forkserver"] != server and gone(server), "restarted for json"
        server = warm_helper_pids()["forkserver"]
        assert processes.fork_server(())[1] == 0.0, "a server with more modules serves a run that needs fewer"
        assert processes.fork_server((), fresh=True)[1] > 0 and gone(server), "a fresh one when asked"
    finally:
        processes.stop_warm_helpers()
    assert warm_helper_pids() == {} and not processes.fork_server_running()


def test_the_fork_servers_children_do_not_rerun_the_parents_main_script(tmp_path):
    """Under Streamlit the parent's __main__ is the page script; a child that re-ran it would run the app."""
    marker = tmp_path / "main ran"
    script = tmp_path / "app_like.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        if os.environ.get("CHILD_OF_TEST"):  # only a child that re-runs this file gets here
            Path({str(marker)!r}).write_text(str(os.getpid()))
        os.environ["CHILD_OF_TEST"] = "1"
        from demos import processes
        ctx, _ = processes.fork_server(())
        child = ctx.Process(target=os.getpid)
        with processes.started([child]):
            assert processes.first_failure([child], timeout_s=60) is None
        processes.stop_warm_helpers()
        print("exit code", child.exitcode)
    """))  # no main guard, like a Streamlit script
    # from the repository root, as the app starts: Python 3.11's fork server finds its preload there
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "exit code 0" in done.stdout
    assert not marker.exists(), "the child re-ran the parent's script"


def test_the_private_standard_library_names_the_plumbing_relies_on_still_exist():
    """No public API stops the fork server or the resource tracker, or skips __main__ in the fork server's children:
    if a Python upgrade renames one of these, this fails before the app leaves processes or runs app.py in them."""
    assert callable(multiprocessing.forkserver._forkserver._stop)
    tracker = multiprocessing.resource_tracker._resource_tracker
    assert callable(tracker._stop) and hasattr(tracker, "_pid")
    assert callable(multiprocessing.spawn._fixup_main_from_path)
    assert callable(multiprocessing.spawn._fixup_main_from_name)
    assert os.path.exists(ROOT / (processes.SKIP_MAIN.replace(".", "/") + ".py"))
