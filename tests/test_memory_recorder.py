"""The stream recorder without CUDA: its CLI, its recording format and the timeline arithmetic it feeds."""

import contextlib
import json
import time

import pytest
import torch

from demos.memory import stream_recorder as rec
from demos.memory.figures import streams_figure


def synthetic() -> dict:
    """A hand-made recording in the recorder's format (not GPU data: used only to test the arithmetic)."""
    iv = [
        ("s", "copy stream", "H2D 0", "copy", 0.0, 2.0),
        ("s", "compute stream", "kernels 0", "kernel", 2.0, 5.0),
        ("s", "copy stream", "H2D 1", "copy", 2.5, 4.5),
        ("s", "compute stream", "kernels 1", "kernel", 5.0, 8.0),
        ("s", "host", "issue H2D 0", "host", 0.0, 0.1),
    ]
    return {"schema": rec.SCHEMA, "provenance": rec.provenance("test", "none", "unknown", None),
            "scenarios": ["s"], "intervals": [dict(zip(("scenario", "lane", "name", "kind", "start_ms", "end_ms"),
                                                       row, strict=True)) for row in iv]}


def test_main_without_cuda_records_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the same answer on a GPU machine
    out = tmp_path / "streams.json"
    assert rec.main(["--out", str(out)]) == 2
    assert not out.exists()
    assert "No CUDA GPU" in capsys.readouterr().err


def test_record_refuses_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        rec.record(1, 1)


def test_arguments_have_bounds():
    args = rec.build_parser().parse_args([])
    assert args.out == rec.DEFAULT_OUT and args.steps == 8 and args.size_mib == 64
    for bad in (["--steps", "0"], ["--steps", "33"], ["--size-mib", "513"]):
        with pytest.raises(SystemExit):
            rec.check_args(rec.build_parser().parse_args(bad))


def test_provenance_names_everything_printed_beside_the_timeline():
    p = rec.provenance("python -m demos.memory.stream_recorder", "GPU X", "555.1", "12.4")
    assert set(rec.PROVENANCE) <= set(p) and p["torch"] == torch.__version__ and p["date"].endswith("UTC")


def test_union_counts_overlap_once():
    assert rec.union_ms([(0, 2), (1, 3), (5, 6)]) == 4
    assert rec.union_ms([]) == 0


def test_summary_overlap_and_utilization():
    (row,) = rec.summarize(synthetic())
    assert row["copy ms"] == 4.0 and row["kernel ms"] == 6.0
    assert row["copy/kernel overlap ms"] == 2.0
    assert row["wall ms"] == 8.0 and row["kernel spans / wall %"] == 75.0 and row["steps"] == 2


def test_recording_round_trips_and_is_validated(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(synthetic()))
    assert rec.load_recording(path) == synthetic()
    assert rec.load_recording(tmp_path / "missing.json") is None
    broken = synthetic()
    del broken["provenance"]["gpu"]
    with pytest.raises(ValueError, match="provenance"):
        rec.validate_recording(broken)
    backwards = synthetic()
    backwards["intervals"][0]["end_ms"] = -1
    with pytest.raises(ValueError, match="bad interval"):
        rec.validate_recording(backwards)


def test_shipped_recording_is_valid_and_says_where_it_was_made():
    loaded = rec.load_recording()
    assert loaded["provenance"]["gpu"] and loaded["provenance"]["driver"] and loaded["provenance"]["torch"]


def test_a_recording_without_warm_up_loses_step_0_and_a_warmed_one_keeps_every_step():
    old = synthetic() | {"schema": 1}
    assert [r["name"] for r in rec.steady(old)["intervals"]] == ["H2D 1", "kernels 1"]
    (row,) = rec.summarize(old)
    assert row["steps"] == 1 and row["kernel ms"] == 3.0 and row["copy ms"] == 2.0
    assert rec.steady(synthetic()) == synthetic()


def test_shipped_h200_recording_is_warmed_keeps_every_step_and_a_side_stream_hides_copies():
    recording = rec.load_recording()
    assert recording["schema"] >= 2 and recording["warmup"], "recorded by the recorder that warms up untimed"
    rows = {r["scenario"]: r for r in rec.summarize(recording)}
    assert {r["steps"] for r in rows.values()} == {recording["steps"]}, "a warmed recording keeps step 0"
    one, side = rows["pinned, non_blocking"], rows["pinned, side stream"]
    assert side["wall ms"] < one["wall ms"] and side["copy/kernel overlap ms"] > 0 == one["copy/kernel overlap ms"]


def test_compute_is_sized_to_the_copy_and_one_scenario_keeps_copies_dominant():
    assert rec.matmul_count(1.2, 0.3) == 4 and rec.matmul_count(0.01, 5.0) == 1
    plan = {sc.name: sc for sc in rec.scenarios(16)}
    assert {sc.matmuls for name, sc in plan.items() if "dominate" not in name} == {16}
    assert plan["copies dominate, side stream"].matmuls == 2 and plan["copies dominate, side stream"].side_stream
    assert plan["side stream + .item()"].item_each_step and not plan["pinned, non_blocking"].side_stream


def test_lessons_are_built_from_the_summary_numbers():
    rows = [{"scenario": "pinned, non_blocking", "wall ms": 10.0, "copy ms": 4.0, "kernel ms": 4.0,
             "copy/kernel overlap ms": 0.0, "kernel spans / wall %": 40.0},
            {"scenario": "pinned, side stream", "wall ms": 6.5, "copy ms": 4.0, "kernel ms": 4.0,
             "copy/kernel overlap ms": 3.5, "kernel spans / wall %": 61.5},
            {"scenario": "copies dominate, side stream", "wall ms": 4.6, "copy ms": 4.0, "kernel ms": 0.5,
             "copy/kernel overlap ms": 0.4, "kernel spans / wall %": 10.9}]
    one, dominate = rec.lessons(rows)
    assert one.startswith("One stream: 10.00 ms. Side stream: 6.50 ms, with 3.50 ms of copying hidden")
    assert "the kernels take 1.00x as long as the copies" in one
    assert "4.00 ms of copies against 0.50 ms of kernels; the side stream hid 0.40 ms" in dominate


def test_streams_figure_draws_one_bar_per_interval():
    fig = streams_figure(synthetic(), "s")
    intervals = [r for r in synthetic()["intervals"] if r["scenario"] == "s"]
    drawn = sorted((lane, base, base + width) for bars in fig.data for lane, base, width in zip(
        bars.y, bars.base, bars.x, strict=True))
    assert len(intervals) == 5 and drawn == sorted((r["lane"], r["start_ms"], r["end_ms"]) for r in intervals)
    kinds = {r["kind"] for r in intervals}
    legend = [b.name for b in fig.data if b.showlegend is not False]
    assert len(legend) == len(set(legend)) == len(kinds), "one legend entry per kind of interval (copy, kernel...)"


class _Event:
    """A CPU stand-in for torch.cuda.Event: host time where the GPU would stamp its own."""

    def __init__(self, **_):
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def elapsed_time(self, other):
        return 1e3 * (other.t - self.t)

    def synchronize(self):
        pass


class _Stream:
    def wait_stream(self, other):
        pass


def test_record_runs_its_whole_plan_on_cpu_stand_ins_and_records_no_warm_up(monkeypatch):
    """record()'s own code path with torch.cuda's streams and events replaced (timings mean nothing here)."""
    randn, zeros = torch.randn, torch.zeros
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "Event", _Event)
    monkeypatch.setattr(torch.cuda, "Stream", _Stream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: _Stream())
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "CPU stand-in")
    monkeypatch.setattr(torch.Tensor, "record_stream", lambda self, s: None)
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *a, **k: self.clone())
    monkeypatch.setattr(torch, "randn", lambda *a, device=None, pin_memory=False, **k: randn(*a, **k))
    monkeypatch.setattr(torch, "zeros", lambda *a, device=None, **k: zeros(*a, **k))
    r = rec.record(steps=2, size_mib=1, command="test")
    assert r["scenarios"] == [sc.name for sc in rec.scenarios(r["sizing"]["matmuls per batch"])] + ["tiny kernels"]
    assert r["sizing"]["matmul size"] == 512 and r["sizing"]["matmuls per batch"] >= 1
    gpu = [iv for iv in r["intervals"] if iv["lane"] != "host"]
    for name in r["scenarios"]:
        steps = sorted({rec.step_of(iv["name"]) for iv in gpu if iv["scenario"] == name})
        assert steps == [0, 1], f"{name}: only the recorded pass, the untimed warm-up left out"
    assert [row["steps"] for row in rec.summarize(r)] == [2] * len(r["scenarios"])
