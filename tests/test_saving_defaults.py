"""Saving's tabs open on a figure: each tab's default case runs without a press (once per server, cached), its
numbers checked against torch here; any other setting waits for its button."""

import json

import pytest
import torch

from demos.saving.figures import paths_figure
from demos.saving.models import MLP, Branchy
from demos.saving.onnx_export import OnnxResult
from demos.saving.state import saved_bytes
from demos.saving.trace_sweep import SWEEP, trace_sweep
from tests.conftest import assert_clean, open_page, shown_table

PAGE = "pages/saving.py"


def open_tab(tab: str):
    return open_page(PAGE, timeout=300, query={"sv_tab": tab})


def figures(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def series(spec: dict, name: str) -> dict:
    return next(d for d in spec["data"] if d.get("name", "").startswith(name))


def branch_sums(v: float) -> tuple[float, float]:
    """(eager's output sum, the positive branch's) for the page's Branchy (seed 0) on an input of all v."""
    torch.manual_seed(0)
    model = Branchy().eval()
    with torch.no_grad():
        h = model.lin(torch.full((2, 4), v))
    return (h * 2 if v > 0 else -h).sum().item(), (h * 2).sum().item()


def test_trace_sweep_follows_eager_only_where_the_example_branch_is_taken():
    s = trace_sweep()
    assert s.values == SWEEP
    for v, eager, traced, scripted in zip(s.values, s.eager, s.traced, s.scripted, strict=True):
        want_eager, positive = branch_sums(v)
        assert eager == pytest.approx(want_eager, abs=1e-5) and scripted == pytest.approx(want_eager, abs=1e-5)
        assert traced == pytest.approx(positive, abs=1e-5), "trace baked in the example's branch"
    assert s.traced_wrong == tuple(v for v in SWEEP if v <= 0)


def test_torchscript_tab_opens_on_the_sweep_and_runs_export_without_a_press():
    at = open_tab("TorchScript vs export")
    assert_clean(at)
    (spec,) = figures(at)
    traced = series(spec, "torch.jit.trace")
    for v, y in zip(traced["x"], traced["y"], strict=True):
        assert y == pytest.approx(branch_sums(v)[1], abs=1e-5)
    wrong = sum(v <= 0 for v in SWEEP)
    assert any(f"differs from eager on {wrong} of them" in c.value for c in at.caption)
    assert any("torch.ops.higher_order.cond" in c.value for c in at.code), "torch.export ran on open"


def onnx_figure_and_metrics(at) -> tuple[dict, dict]:
    """The latency bars as drawn (label -> ms) and the tab's metrics."""
    (spec,) = figures(at)
    return dict(zip(spec["data"][0]["y"], spec["data"][0]["x"], strict=True)), {m.label: m.value for m in at.metric}


def test_a_measurement_taken_again_gets_its_own_figure():
    """Once the result's cache entry is gone (evicted, or another server process), the new times are measured
    again: the shared figure must draw those, not the earlier run's."""
    from pages.ui.compute import clear as clear_computed

    open_tab("ONNX")
    clear_computed()  # the measurement goes; a figure cached beside it would stay
    at = open_tab("ONNX")
    assert_clean(at)
    shown, metrics = onnx_figure_and_metrics(at)
    assert f"{shown['onnxruntime (.onnx)']:.3f} ms" == metrics["onnxruntime, batch 32"]
    assert f"{shown['PyTorch eager']:.3f} ms" == metrics["eager, batch 32"]


def test_onnx_tab_runs_its_default_on_open_and_waits_for_the_button_after_a_change():
    at = open_tab("ONNX")
    assert_clean(at)
    shown, metrics = onnx_figure_and_metrics(at)
    weights = sum(p.numel() * p.element_size() for p in MLP(width=64, depth=2).parameters())
    assert int(metrics[".onnx file"].removesuffix(" B").replace(",", "")) >= weights, "the weights are in the file"
    assert f"{shown['onnxruntime (.onnx)']:.3f} ms" == metrics["onnxruntime, batch 32"]
    assert f"{shown['PyTorch eager']:.3f} ms" == metrics["eager, batch 32"]
    diffs = shown_table(at.table[0])["max |onnxruntime - eager|"]
    assert all(float(d) < 1e-4 for d in diffs), "onnxruntime computes what torch computes"
    at.select_slider(key="sv_onnx_width").set_value(16).run()
    assert not at.metric and not at.get("plotly_chart"), "another size waits for its button"
    at.button(key="sv_onnx_run_button").click().run()
    assert {m.label for m in at.metric} == set(metrics) and len(at.get("plotly_chart")) == 1


def test_quantization_tab_and_which_path_open_on_measured_figures():
    at = open_tab("Quantization")
    assert_clean(at)
    assert len(figures(at)) == 2, "the error histograms and the scales"
    float_bytes = saved_bytes(MLP(width=256, depth=2).state_dict())  # training changes values, not sizes
    rows = shown_table(at.table[0]).set_index("variant")
    assert int(str(rows.loc["float32", "file bytes"]).replace(",", "")) == float_bytes
    scales = figures(at)[1]
    assert len(series(scales, "per-channel scale")["y"]) == 256, "one scale per output row of the width-256 Linear"
    at.slider(key="sv_quant_depth").set_value(1).run()
    assert not at.get("plotly_chart"), "another size waits for its button"

    at = open_tab("Which path?")
    assert_clean(at)
    (spec,) = figures(at)
    sizes = dict(zip(spec["data"][0]["y"], spec["data"][0]["x"], strict=True))
    assert sizes["float32 state_dict (MLP 256×2)"] == float_bytes
    targets = shown_table(at.table[-1])
    assert not targets["measured here"].str.contains("press its button").any(), "every row quotes a measurement"


def test_paths_figure_draws_each_measured_number_once():
    class Quant:
        rows = ({"variant": "float32", "file bytes": 400, "latency ms (batch 256)": 2.0},
                {"variant": "int8 dynamic", "file bytes": 100, "latency ms (batch 256)": 1.5})

    onnx = OnnxResult(nodes=(), dot="", file_bytes=300, checks=(), eager_ms=0.2, ort_ms=0.1, export_s=1.0,
                      input_shape="", code="")
    fig = paths_figure(onnx, (64, 2), Quant, (256, 2))
    sizes, times = fig.data
    assert dict(zip(sizes.y, sizes.x, strict=True)) == {"float32 state_dict (MLP 256×2)": 400,
                                                        "int8 dynamic state_dict (MLP 256×2)": 100,
                                                        ".onnx file (MLP 64×2)": 300}
    assert list(times.x) == [2.0, 1.5, 0.2, 0.1]


def test_a_warm_rerun_draws_the_finished_status_without_creating_a_new_one():
    """st.status sleeps 50 ms when created: after the first showing, a rerun draws an expander with its label."""
    at = open_tab("ONNX")
    assert [s.label for s in at.status] == ["Exported, then run in onnxruntime"]
    assert not any(e.label.startswith("Exported") for e in at.expander)
    shown = [m.value for m in at.metric]
    at.run()
    assert not at.status and at.expander[0].label == "Exported, then run in onnxruntime"
    assert [m.value for m in at.metric] == shown, "the same cached result"


def test_which_path_shows_its_three_runs_under_one_status_once_then_as_a_plain_expander():
    """Which path? computes the export, ONNX and quantization results under one st.status (ui.queued_each); a rerun
    takes them from the cache and draws the finished status as an expander with the same label."""
    at = open_tab("Which path?")
    assert_clean(at)
    assert [s.label for s in at.status] == ["Each path measured"]
    table = shown_table(at.table[-1])
    at.run()
    assert not at.status and [e.label for e in at.expander if e.label == "Each path measured"] == ["Each path measured"]
    assert shown_table(at.table[-1]).equals(table), "the same cached results"
