"""Headroom counts reserved bytes, the CUDA context and the workspace segments; the reserved peak shows its error."""

import json
import re

import pytest

from demos.memory.allocator import fmt_bytes
from demos.memory.figures import sweep_figure, timeline_figure
from demos.memory.training import (
    CARDS,
    CUDA_CONTEXT_ESTIMATE,
    MEMTRUTH,
    WORKSPACE_ALLOWANCE,
    WORKSPACE_BYTES,
    RunSpec,
    headroom_sentence,
    largest_fitting,
    reserved_model_error,
    simulate,
    usable,
)
from tests.conftest import ROOT, assert_clean, open_page

PAGE = "pages/memory.py"
MLP = {"mem_model": "MLP (4 x 2048)", "mem_batch": "256", "mem_card": "T4 16 GB"}


def test_the_page_states_headroom_and_the_reserved_error_from_their_numbers():
    at = open_page(PAGE, query=MLP)
    assert_clean(at)
    t = simulate(RunSpec(model=MLP["mem_model"], batch=256))
    capacity, peak = CARDS["T4 16 GB"], max(t.reserved)
    caption = next(c.value for c in at.caption if c.value.startswith("Headroom on the T4 16 GB"))
    for number in (capacity, CUDA_CONTEXT_ESTIMATE, WORKSPACE_ALLOWANCE, peak,
                   capacity - CUDA_CONTEXT_ESTIMATE - WORKSPACE_ALLOWANCE - peak):
        assert fmt_bytes(number) in caption, (fmt_bytes(number), caption)
    assert caption == headroom_sentence(t, "T4 16 GB")
    metric = next(m for m in at.metric if m.label == "Peak reserved (model)")
    assert metric.value == fmt_bytes(peak)
    rows = [r for r in json.loads(MEMTRUTH.read_text())["rows"] if r["spec"]["model"] == MLP["mem_model"]]
    errs = [r["err_reserved_pct"] for r in rows]  # the measurement's own rounded percentages
    low, high = (float(x) for x in re.findall(r"[+-]\d+\.\d", metric.delta))
    assert (low, high) == (round(min(errs), 1), round(max(errs), 1)) and f"({len(rows)} H200 runs" in metric.delta


@pytest.mark.parametrize("model, batch, card", [("MLP (4 x 2048)", 256, "T4 16 GB"),
                                                ("Transformer tiny (2 x 128)", 8, "H200 141 GB")])
def test_the_headroom_sentence_names_the_workspace_allowance_as_one_measurement_not_this_runs(model, batch, card):
    """'the segments the cuBLAS workspaces pin (348.00 MiB)' read as measured for every model and card; the probe
    measured 65 MiB of workspaces and, once, 348 MiB of segments around them after a GPT-2 small step."""
    probe = (ROOT / "assets/gpu/probe_ws.txt").read_text()
    sizes = [int(m) for m in re.findall(r"^(?:mm|addmm|bwd) (\d+)", probe, re.M)]
    assert WORKSPACE_BYTES == sum(sizes) == 65 * 2**20
    pinned = re.search(r"^GPT-2 small \(124M\) .*\n after empty_cache: segments \((\d+) KiB.*?\((\d+) KiB.*?"
                       r"\((\d+),", probe, re.M)
    assert WORKSPACE_ALLOWANCE == 1024 * sum(int(g) for g in pinned.groups())
    assert re.search(rf"^MLP \(4 x 2048\) \d+ \d+ {WORKSPACE_ALLOWANCE} ", probe, re.M), "reserved at start"
    t = simulate(RunSpec(model=model, batch=batch, steps=1))
    said = headroom_sentence(t, card)
    room = CARDS[card] - CUDA_CONTEXT_ESTIMATE - WORKSPACE_ALLOWANCE - max(t.reserved)
    assert (f"{fmt_bytes(CARDS[card])} less the CUDA context (≈ {fmt_bytes(CUDA_CONTEXT_ESTIMATE)}, an estimate), an "
            f"allowance of {fmt_bytes(WORKSPACE_ALLOWANCE)} for the segments holding the cuBLAS workspaces and the "
            f"peak reserved (model) {fmt_bytes(max(t.reserved))} leaves ≈ {fmt_bytes(room)}") in said
    assert f"The workspaces themselves are {fmt_bytes(WORKSPACE_BYTES)} on an H200" in said
    assert "not measured for this model or card" in said and "pin" in said


def test_the_timeline_headroom_is_capacity_less_context_workspaces_and_peak_reserved():
    t = simulate(RunSpec(model="MLP (4 x 2048)", batch=256, steps=1))
    fig = timeline_figure(t, CARDS["A10 24 GB"], "A10 24 GB")
    note = next(a.text for a in fig.layout.annotations if "OOM" in a.text)
    room = CARDS["A10 24 GB"] - CUDA_CONTEXT_ESTIMATE - WORKSPACE_ALLOWANCE - max(t.reserved)
    assert f"headroom ≈ {fmt_bytes(room)} above the peak reserved" in note
    assert reserved_model_error("no such model").scope == "all models"


def test_the_sweep_fits_under_the_usable_line_not_the_card():
    batches, reserved = (1, 2, 4), (4 * 2**30, 8 * 2**30, 16 * 2**30)
    capacity = CARDS["T4 16 GB"]
    fit = largest_fitting(batches, reserved, usable(capacity))
    assert fit < largest_fitting(batches, reserved, capacity), "the context and workspaces take batch room"
    fig = sweep_figure(batches, {"fp32": reserved}, capacity, "T4 16 GB", {"fp32": fit})
    assert fig.data[0].name == f"fp32: fits up to batch ≈ {fit:.0f}"
    assert any(fmt_bytes(usable(capacity)) in a.text for a in fig.layout.annotations)


def test_the_sweep_caption_and_legend_state_the_fit_under_the_usable_line():
    from demos.memory.training import batch_sweep, sweep_batches
    at = open_page(PAGE, query={**MLP, "mem_steps": "1"})
    at.button(key="mem_sweep_button").click().run()
    assert_clean(at)
    capacity = usable(CARDS["T4 16 GB"])
    caption = next(c.value for c in at.caption if c.value.startswith("Peak reserved (allocator model)"))
    assert f"less the CUDA context estimate and the workspace allowance ({fmt_bytes(capacity)}" in caption
    spec = RunSpec(model=MLP["mem_model"], batch=256, steps=1)
    batches = sweep_batches(spec)
    peaks = batch_sweep(spec, batches)
    fig = at.get("plotly_chart")[-1].proto.spec
    for name, values in peaks.items():
        fit = largest_fitting(batches, values, capacity)
        label = (f"{name}: every swept batch fits" if fit == float("inf") else f"{name}: no swept batch fits"
                 if fit is None else f"{name}: fits up to batch ≈ {fit:.0f}")
        assert json.dumps(label)[1:-1] in fig, label
