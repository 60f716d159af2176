"""Figures for the saving page: state_dict bytes, checkpoints, quantization, ONNX latency, the paths compared."""

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from demos.style import COLORS, base_layout, legend_on_top

KIND_COLOR = {"parameter": COLORS["parameter"], "buffer": COLORS["buffer"]}


def state_bytes_figure(rows) -> go.Figure:
    """Bytes per state_dict key, coloured parameter vs buffer."""
    fig = go.Figure()
    for kind, color in KIND_COLOR.items():
        picked = [r for r in rows if r["kind"] == kind]
        fig.add_bar(y=[r["key"] for r in picked], x=[r["bytes"] for r in picked], orientation="h", name=kind,
                    marker_color=color)
    fig.update_xaxes(title="bytes")
    fig.update_yaxes(autorange="reversed")
    return base_layout(fig, height=280)


def checkpoint_figure(rows) -> go.Figure:
    """Bytes of each checkpoint item; serving keeps only the weights."""
    colors = [COLORS["parameter"] if r["serving"] == "yes" else COLORS["optimizer_state"] for r in rows]
    fig = go.Figure(go.Bar(y=[r["item"] for r in rows], x=[r["bytes"] for r in rows], orientation="h",
                           marker_color=colors, text=[f"{r['bytes']:,} B" for r in rows], textposition="auto"))
    fig.update_xaxes(title="bytes (log)", type="log")
    fig.update_yaxes(autorange="reversed")
    return base_layout(fig, height=320)


def _histogram(values, bins: int, lo: float, hi: float) -> tuple[list[float], list[float], float]:
    """(bin centres, counts, bin width) by torch.histogram: the figure carries bins, not every weight."""
    counts, edges = torch.histogram(torch.tensor(values, dtype=torch.float64), bins=bins, range=(lo, hi))
    return ((edges[:-1] + edges[1:]) / 2).tolist(), counts.tolist(), float(edges[1] - edges[0])


def quant_figure(s) -> go.Figure:
    """Left: the weight histogram; right: |error| per weight under per-tensor vs per-channel scales (shared bins)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("trained weights of one Linear", "quantization error"))
    x, y, width = _histogram(s.weights, 80, min(s.weights), max(s.weights))
    fig.add_bar(x=x, y=y, width=width, name="weights", marker_color=COLORS["parameter"], row=1, col=1)
    lo, hi = min(min(s.tensor_error), min(s.channel_error)), max(max(s.tensor_error), max(s.channel_error))
    for errors, name, color in ((s.tensor_error, f"per-tensor (mean |err| {s.tensor_mae:.2e})", COLORS["error"]),
                                (s.channel_error, f"per-channel (mean |err| {s.channel_mae:.2e})",
                                 COLORS["activation"])):
        x, y, width = _histogram(errors, 60, lo, hi)
        fig.add_bar(x=x, y=y, width=width, name=name, marker_color=color, opacity=0.6, row=1, col=2)
    fig.update_layout(barmode="overlay", bargap=0)
    fig.update_xaxes(title="weight value", row=1, col=1)
    fig.update_xaxes(title="dequantized − original", row=1, col=2)
    fig.update_yaxes(title="weights", row=1, col=1)
    return legend_on_top(base_layout(fig, height=400))


def scales_figure(s) -> go.Figure:
    """Per-channel scales (one per output row) against the single per-tensor scale."""
    rows = list(range(len(s.channel_scales)))
    fig = go.Figure()
    fig.add_bar(x=rows, y=s.channel_scales, name="per-channel scale", marker_color=COLORS["activation"])
    fig.add_scatter(x=[rows[0], rows[-1]], y=[s.tensor_scale] * 2, mode="lines", name="per-tensor scale",
                    line=dict(color=COLORS["error"], width=3))
    fig.update_xaxes(title="output channel (row of the weight)")
    fig.update_yaxes(title="scale (step between int8 levels)")
    return base_layout(fig, height=300)


def onnx_latency_figure(r, width: int, depth: int) -> go.Figure:
    """Median latency of the same MLP on a batch of 32: PyTorch eager vs the exported .onnx in onnxruntime."""
    names = ["PyTorch eager", "onnxruntime (.onnx)"]
    values = [r.eager_ms, r.ort_ms]
    fig = go.Figure(go.Bar(y=names, x=values, orientation="h", marker_color=[COLORS["parameter"], COLORS["data"]],
                           text=[f"{v:.3f} ms" for v in values], textposition="auto"))
    fig.update_xaxes(title=f"median ms per batch of 32 (MLP width {width}, {depth} hidden layers)", rangemode="tozero")
    fig.update_yaxes(autorange="reversed")
    return base_layout(fig, height=220)


def paths_figure(onnx, onnx_size: tuple[int, int], quant, quant_size: tuple[int, int]) -> go.Figure:
    """File size and latency of each measured path, each bar labelled with the model and batch it was measured on."""
    onnx_model, quant_model = (f"MLP {w}×{d}" for w, d in (onnx_size, quant_size))
    size_rows = [(f"{r['variant']} state_dict ({quant_model})", r["file bytes"], _path_color(r["variant"]))
                 for r in quant.rows] + [(f".onnx file ({onnx_model})", onnx.file_bytes, COLORS["data"])]
    time_rows = [(f"{r['variant']} ({quant_model}, batch 256)", r["latency ms (batch 256)"],
                  _path_color(r["variant"])) for r in quant.rows] + [
        (f"eager ({onnx_model}, batch 32)", onnx.eager_ms, COLORS["parameter"]),
        (f"onnxruntime ({onnx_model}, batch 32)", onnx.ort_ms, COLORS["data"])]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("file size (bytes)", "median latency (ms)"),
                        horizontal_spacing=0.35)
    for col, rows, fmt in ((1, size_rows, "{:,.0f} B"), (2, time_rows, "{:.3f} ms")):
        fig.add_bar(y=[r[0] for r in rows], x=[r[1] for r in rows], orientation="h", showlegend=False,
                    marker_color=[r[2] for r in rows], text=[fmt.format(r[1]) for r in rows], textposition="outside",
                    cliponaxis=False, row=1, col=col)
        fig.update_xaxes(range=[0, 1.45 * max(r[1] for r in rows)], row=1, col=col)  # room for the labels
        fig.update_yaxes(autorange="reversed", row=1, col=col)
    return base_layout(fig, height=320)


def _path_color(variant: str) -> str:
    return COLORS["parameter"] if variant == "float32" else COLORS["optimizer_state"]
