"""Heavy functions run in a child process: the result comes back, a bad input is still a sentence, a run past
its limit is stopped, and no process is left afterwards."""

import time

import psutil
import pytest

from demos.errors import InputError
from demos.isolated import run_isolated
from demos.memory.compiling import parse_shapes


def children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_result_sentence_and_time_limit_come_back_and_no_process_is_left(no_warm_helpers):
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
