"""Headroom counts reserved bytes, the CUDA context and the workspace segments; the reserved peak shows its error."""

import json
import re

from demos.memory.allocator import fmt_bytes
from demos.memory.figures import sweep_figure, timeline_figure
from demos.memory.training import (
    CARDS,
    CUDA_CONTEXT_ESTIMATE,
    MEMTRUTH,
    WORKSPACE_RESERVED,
    RunSpec,
    largest_fitting,
    reserved_model_error,
    simulate,
    usable,
)
from tests.conftest import assert_clean, open_page

PAGE = "pages/memory.py"
MLP = {"mem_model": "MLP (4 x 2048)", "mem_batch": "256", "mem_card": "T4 16 GB"}


def test_the_page_states_headroom_and_the_reserved_error_from_their_numbers():
    at = open_page(PAGE, query=MLP)
    assert_clean(at)
    t = simulate(RunSpec(model=MLP["mem_model"], batch=256))
    capacity, peak = CARDS["T4 16 GB"], max(t.reserved)
    caption = next(c.value for c in at.caption if c.value.startswith("Headroom on the T4 16 GB"))
    for number in (capacity, CUDA_CONTEXT_ESTIMATE, WORKSPACE_RESERVED, peak,
                   capacity - CUDA_CONTEXT_ESTIMATE - WORKSPACE_RESERVED - peak):
        assert fmt_bytes(number) in caption, (fmt_bytes(number), caption)
    metric = next(m for m in at.metric if m.label == "Peak reserved (model)")
    assert metric.value == fmt_bytes(peak)
    rows = [r for r in json.loads(MEMTRUTH.read_text())["rows"] if r["spec"]["model"] == MLP["mem_model"]]
    errs = [r["err_reserved_pct"] for r in rows]  # the measurement's own rounded percentages
    low, high = (float(x) for x in re.findall(r"[+-]\d+\.\d", metric.delta))
    assert (low, high) == (round(min(errs), 1), round(max(errs), 1)) and f"({len(rows)} H200 runs" in metric.delta


def test_the_timeline_headroom_is_capacity_less_context_workspaces_and_peak_reserved():
    t = simulate(RunSpec(model="MLP (4 x 2048)", batch=256, steps=1))
    fig = timeline_figure(t, CARDS["A10 24 GB"], "A10 24 GB")
    note = next(a.text for a in fig.layout.annotations if "OOM" in a.text)
    room = CARDS["A10 24 GB"] - CUDA_CONTEXT_ESTIMATE - WORKSPACE_RESERVED - max(t.reserved)
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
    assert f"less the CUDA context and workspaces ({fmt_bytes(capacity)}" in caption
    spec = RunSpec(model=MLP["mem_model"], batch=256, steps=1)
    batches = sweep_batches(spec)
    peaks = batch_sweep(spec, batches)
    fig = at.get("plotly_chart")[-1].proto.spec
    for name, values in peaks.items():
        fit = largest_fitting(batches, values, capacity)
        label = (f"{name}: every swept batch fits" if fit == float("inf") else f"{name}: no swept batch fits"
                 if fit is None else f"{name}: fits up to batch ≈ {fit:.0f}")
        assert json.dumps(label)[1:-1] in fig, label
