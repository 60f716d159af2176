"""The Memory page's CUDA branch, run on the CPU with torch.cuda answers patched: the measured peak is counted
from the start of the run (the cuBLAS workspaces left out), runs hold the lock that per-process peak statistics
need, and a configuration that does not fit the GPU's free memory runs on meta tensors with the reason said."""

import pytest
import torch

from demos.memory import stream_recorder, training
from demos.memory.allocator import GiB, MiB, fmt_bytes
from demos.memory.training import RunSpec, gpu_fit, simulate
from pages.ui.compute import clear as clear_computed
from tests.conftest import assert_clean, open_page

TINY = RunSpec("Transformer tiny (2 x 128)", 2, 32, steps=1)


@pytest.fixture
def fake_allocator(monkeypatch):
    """torch.cuda's allocator counters as a GPU would report them: 68 MiB of workspaces, then whatever is set."""
    state = {"allocated": 68 * MiB, "reserved": 350 * MiB, "max": 68 * MiB}
    for name in ("synchronize", "empty_cache", "reset_peak_memory_stats"):
        monkeypatch.setattr(torch.cuda, name, lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a: state["allocated"])
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda *a: state["reserved"])
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a: state["max"])
    monkeypatch.setattr(training, "warm_cuda_workspaces", lambda: None)
    return state


def test_measured_rows_are_counted_from_the_start_of_the_run(fake_allocator):
    measure = training._Measure("cuda")
    fake_allocator.update(allocated=100 * MiB, reserved=400 * MiB, max=168 * MiB)
    measure("forward 1", 7)
    assert measure.base == (68 * MiB, 350 * MiB)
    assert measure.rows == [("forward 1", 7, 32 * MiB, 50 * MiB, 100 * MiB)], "the workspaces are not the model's"


def test_cuda_runs_hold_the_lock_and_others_do_not(monkeypatch):
    held = []

    def run_steps(spec, device, estimate):
        held.append(training.CUDA_RUN_LOCK.locked())
        raise RuntimeError("stop after the lock check")

    monkeypatch.setattr(training, "run_steps", run_steps)
    for device in ("cuda", "meta"):
        with pytest.raises(RuntimeError, match="stop"):
            simulate(TINY, device)
    assert held == [True, False]


def test_fit_check_uses_the_free_memory_with_a_margin(monkeypatch):
    t = simulate(TINY, "meta")
    need = int(max(t.reserved) * training.FIT_FACTOR) + training.FIT_SLACK
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (need, 141 * GiB))
    assert gpu_fit(t) is None
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (need - 1, 141 * GiB))
    said = gpu_fit(t)
    assert f"about {fmt_bytes(need)}" in said and f"only {fmt_bytes(need - 1)} of its 141.00 GiB are free" in said


def test_page_runs_what_does_not_fit_on_meta_and_says_why(monkeypatch):
    # GPT-2 small's default view predicts about 3 GiB reserved: a GPU with 1 GiB free must not be asked for it
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (1 * GiB, 141 * GiB))
    at = open_page("pages/memory.py")
    assert_clean(at)
    assert any("only 1.00 GiB of its 141.00 GiB are free, so they ran on meta tensors instead" in i.value
               for i in at.info)


def made_here() -> dict:
    """A recording in the recorder's newest format, standing in for what record() returns on a GPU."""
    iv = [("pinned, side stream", "copy stream", "H2D 0", "copy", 0.0, 1.0),
          ("pinned, side stream", "compute stream", "kernels 0", "kernel", 1.0, 2.0)]
    return {"schema": stream_recorder.SCHEMA, "scenarios": ["pinned, side stream"],
            "provenance": stream_recorder.provenance("page button", "Test GPU 9000", "999.1", "13.0"),
            "sizing": {"matmuls per batch": 3, "matmul size": 2048, "matmul ms": 0.4, "pinned copy ms": 1.2},
            "intervals": [dict(zip(("scenario", "lane", "name", "kind", "start_ms", "end_ms"), r, strict=True))
                          for r in iv]}


def test_streams_tab_on_a_gpu_keeps_this_sessions_recording_across_reruns(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (100 * GiB, 141 * GiB))
    monkeypatch.setattr(stream_recorder, "record", lambda **kw: made_here())
    at = open_page("pages/memory.py", query={"mem_tab": "Streams & transfers"})
    assert not any("no CUDA GPU" in w.value for w in at.warning)
    at.button(key="mem_record").click().run()
    at.run()  # the next rerun (any widget) must still show it
    assert_clean(at)
    assert any("Recorded on **Test GPU 9000**" in c.value and "a batch got 3 matmuls of 2048²" in c.value
               for c in at.caption)


def no_recording(path=stream_recorder.DEFAULT_OUT) -> None:
    """load_recording where none has been made yet (a module-level function: pages compute only those)."""
    return None


def test_streams_tab_without_a_recording_on_a_gpu_does_not_say_there_is_no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(stream_recorder, "load_recording", no_recording)
    clear_computed()
    at = open_page("pages/memory.py", query={"mem_tab": "Streams & transfers"})
    clear_computed()  # the next page run must read the shipped recording again
    said = " ".join(w.value for w in at.warning)
    assert "No recording exists yet. Press **Record on this GPU now**" in said and "no CUDA GPU" not in said
