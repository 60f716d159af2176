"""Heavy functions run in a child process: the result comes back, a bad input is still a sentence, a run past
its limit is stopped, and no process is left afterwards."""

import threading
import time

import psutil
import pytest
import torch

from demos import isolated, processes
from demos.errors import InputError
from demos.isolated import compiler_in_use, run_isolated
from demos.memory.compiling import parse_shapes
from tests.test_processes import warm_helper_pids


def children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_result_sentence_and_time_limit_come_back_and_no_process_is_left(no_warm_helpers, capfd):
    before = children()
    assert run_isolated(parse_shapes, "8; 16") == parse_shapes("8; 16")
    with pytest.raises(InputError) as err:
        parse_shapes("eight")
    with pytest.raises(InputError) as isolated_err:
        run_isolated(parse_shapes, "eight")
    assert str(isolated_err.value) == str(err.value)
    start = time.perf_counter()
    with pytest.raises(InputError, match="passed its 1 s limit"):
        run_isolated(time.sleep, 30, time_limit_s=1)
    assert time.perf_counter() - start < 15
    assert children() <= before
    assert "_child_main" in capfd.readouterr().err, "the stopped child's stacks are in the log"


def _inherited_mark():
    """Runs in the child: a module attribute set in the parent exists in the child only if it was forked."""
    return getattr(isolated, "test_mark", None)


def test_a_server_that_initialised_cuda_starts_children_that_inherit_nothing(no_warm_helpers, monkeypatch):
    monkeypatch.setattr(isolated, "test_mark", "set in the parent", raising=False)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)  # as on a GPU machine before its first use
    assert run_isolated(_inherited_mark) == "set in the parent", "before CUDA: forked from the server"
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    before = children()
    assert run_isolated(_inherited_mark) is None, "after CUDA: a fresh interpreter, no state of the server"
    assert children() <= before, "the fork server started for the run stops with it"
    try:
        processes.fork_server(isolated.PRELOAD)  # warm, as after a distributed run
        server = warm_helper_pids()["forkserver"]
        assert run_isolated(_inherited_mark) is None, "from the warm fork server"
        assert warm_helper_pids()["forkserver"] == server, "which stays warm for the next run"
    finally:
        processes.stop_warm_helpers()


def _inside_compiler(shapes: str):
    """Runs in the child: the compiler lock it inherited must be free there."""
    with compiler_in_use():
        return parse_shapes(shapes)


def test_a_fork_waits_for_compiler_work_in_another_thread_and_the_child_gets_a_free_lock(no_warm_helpers):
    entered, hold_s = threading.Event(), 1.0

    def compile_elsewhere():
        with compiler_in_use():
            entered.set()
            time.sleep(hold_s)

    other = threading.Thread(target=compile_elsewhere)
    other.start()
    entered.wait(5)
    start = time.perf_counter()
    assert run_isolated(_inside_compiler, "4; 2", time_limit_s=30) == parse_shapes("4; 2")
    assert time.perf_counter() - start >= hold_s * 0.8, "the fork waited for the other thread to leave the compiler"
    other.join()


def _compile_pool_in_use():
    """Runs in the child: does inductor there hand its compiles to a pool of worker processes?"""
    from torch._inductor import config
    from torch._inductor.async_compile import AsyncCompile

    return config.compile_threads, AsyncCompile.use_process_pool(), AsyncCompile._ready_future is not None


def test_the_child_compiles_in_itself_even_when_the_server_config_asks_for_a_pool(no_warm_helpers, monkeypatch):
    from torch._inductor import config

    monkeypatch.setattr(config, "compile_threads", 4)  # as read at import on a 4-core server
    threads, pooled, pool_started = run_isolated(_compile_pool_in_use)
    assert (threads, pooled, pool_started) == (1, False, False)
