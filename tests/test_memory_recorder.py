"""The stream recorder without CUDA: its CLI, its recording format and the timeline arithmetic it feeds."""

import json

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


def test_main_without_cuda_records_nothing(tmp_path, capsys):
    assert not torch.cuda.is_available(), "this test covers the CPU-only path"
    out = tmp_path / "streams.json"
    assert rec.main(["--out", str(out)]) == 2
    assert not out.exists()
    assert "No CUDA GPU" in capsys.readouterr().err


def test_record_refuses_without_cuda():
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
    assert row["wall ms"] == 8.0 and row["utilization (kernel running) %"] == 75.0


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


def test_shipped_recording_if_any_is_valid():
    loaded = rec.load_recording()
    assert loaded is None or loaded["provenance"]["gpu"]


def test_streams_figure_draws_one_bar_per_interval():
    fig = streams_figure(synthetic(), "s")
    assert len(fig.data) == 5
