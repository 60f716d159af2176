"""Figures of the Embeddings & dropout view.

Colours follow demos.style: data = cyan (the one-hot ids), parameter = blue (the table and its rows' gradients
without padding_idx), gradient = orange (with padding_idx), error = red (the trap), activation =
green (dropout's kept values and the correct modules), idle = grey (dropped values, the mask alone).
"""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from demos.style import COLORS, REFERENCE, base_layout, category_scale
from demos.transformers.embeddings import DropoutResult, LookupResult, PaddingResult, TrapResult

VALUES = "RdBu"  # signed values: blue above zero, red below, white at zero


def lookup_figure(r: LookupResult) -> go.Figure:
    """one_hot(ids) @ emb.weight = emb(ids): three heatmaps, the looked-up rows framed in the table."""
    rows = [f"{t}: id {i}" for t, i in enumerate(r.ids)]
    table_rows = [f"row {v}" for v in range(r.vocab)]
    cols = [f"d{j}" for j in range(r.dim)]
    bound = max(abs(v) for row in r.weight for v in row) or 1.0
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.07,
                        column_widths=[r.vocab / (r.vocab + 2 * r.dim), r.dim / (r.vocab + 2 * r.dim),
                                       r.dim / (r.vocab + 2 * r.dim)],
                        subplot_titles=(f"one_hot(ids): {len(r.ids)} × {r.vocab}",
                                        f"@ emb.weight: {r.vocab} × {r.dim}", f"= emb(ids): {len(r.ids)} × {r.dim}"))
    fig.add_trace(go.Heatmap(z=r.one_hot, x=[f"{v}" for v in range(r.vocab)], y=rows, xgap=1, ygap=1,
                             hovertemplate="position %{y}, column %{x}: %{z:.0f}<extra></extra>",
                             **category_scale({"0": "rgba(158,158,158,0.15)", "1": COLORS["data"]}) | dict(
                                 showscale=False)), row=1, col=1)
    fig.add_trace(go.Heatmap(z=r.weight, x=cols, y=table_rows, zmin=-bound, zmax=bound, colorscale=VALUES,
                             showscale=False, hovertemplate="%{y}, %{x}: %{z:.4f}<extra></extra>"), row=1, col=2)
    fig.add_trace(go.Heatmap(z=r.looked_up, x=cols, y=rows, zmin=-bound, zmax=bound, colorscale=VALUES,
                             colorbar=dict(title="value", thickness=12),
                             hovertemplate="position %{y}, %{x}: %{z:.4f}<extra></extra>"), row=1, col=3)
    for v in sorted(set(r.ids)):  # frame each table row the lookup read
        fig.add_shape(type="rect", x0=-0.5, x1=r.dim - 0.5, y0=v - 0.5, y1=v + 0.5, xref="x2", yref="y2",
                      line=dict(color=COLORS["data"], width=2))
    for axis in ("yaxis", "yaxis2", "yaxis3"):
        fig.update_layout({axis: dict(autorange="reversed", type="category")})
    fig.update_xaxes(title="column of one_hot = token id", dtick=1 if r.vocab <= 12 else 4, row=1, col=1)
    height = 120 + 18 * max(r.vocab, len(r.ids))
    return base_layout(fig, height=min(max(height, 280), 700))


def padding_figure(r: PaddingResult) -> go.Figure:
    """‖weight.grad[v]‖ per row v after one backward, without and with padding_idx; the padding row's value written
over its bar."""
    rows = [f"row {v}" + (" (padding_idx)" if v == r.padding_idx else "") for v in range(r.vocab)]
    counts = [f"looked up {n}×" for n in r.occurrences]
    fig = go.Figure()
    fig.add_bar(x=rows, y=r.grad_without, name="nn.Embedding(V, E)", marker_color=COLORS["parameter"],
                customdata=counts, hovertemplate="%{x}, %{customdata}: ‖grad‖ = %{y:.4g}<extra></extra>")
    fig.add_bar(x=rows, y=r.grad_with_padding_idx, name=f"nn.Embedding(V, E, padding_idx={r.padding_idx})",
                marker_color=COLORS["gradient"], customdata=counts, textposition="outside",
                text=[f"{g:g}" if v == r.padding_idx else "" for v, g in enumerate(r.grad_with_padding_idx)],
                hovertemplate="%{x}, %{customdata}: ‖grad‖ = %{y:.4g}<extra></extra>")
    fig.update_xaxes(tickangle=-45 if r.vocab > 12 else 0)
    fig.update_yaxes(title="‖weight.grad[row]‖")
    return base_layout(fig, height=320)


def masks_figure(r: DropoutResult) -> go.Figure:
    """nn.Dropout(p) applied to a 6 × 16 tensor of ones, in train() and in eval(): each cell is its output."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.08,
                        subplot_titles=(f"train(): values {', '.join(f'{v:g}' for v in r.train_values)}",
                                        "eval(): x unchanged" if r.eval_equals_input else "eval(): x changed"))
    top = max(r.scale, 1.0)
    scale = [[0, COLORS["idle"]], [1 / top if top > 1 else 0.5, "#c7e9c0"], [1, COLORS["activation"]]]
    for col, z in ((1, r.train_out), (2, r.eval_out)):
        fig.add_trace(go.Heatmap(z=z, zmin=0, zmax=top, colorscale=scale, xgap=1, ygap=1, showscale=col == 2,
                                 colorbar=dict(title="output", thickness=12),
                                 hovertemplate="[%{y}, %{x}] = %{z:.4g}<extra></extra>"), row=1, col=col)
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_xaxes(showticklabels=False)
    return base_layout(fig, height=260)


def expectation_figure(r: DropoutResult) -> go.Figure:
    """Running mean over draws: the scaled output settles at 1 (the input), the mask alone at 1 − p."""
    fig = go.Figure()
    fig.add_scatter(x=r.curve_at, y=r.curve_scaled, mode="lines", name="mask / (1 − p): what nn.Dropout returns",
                    line_color=COLORS["activation"])
    fig.add_scatter(x=r.curve_at, y=r.curve_mask, mode="lines", name="mask alone (no scaling)",
                    line=dict(color=COLORS["idle"], dash="dash"))
    fig.add_hline(y=1, line_dash="dot", line_color=REFERENCE, annotation_text="input: 1",
                  annotation_position="top right")
    if r.p > 0:
        fig.add_hline(y=1 - r.p, line_dash="dot", line_color=REFERENCE, annotation_text=f"1 − p = {1 - r.p:g}",
                      annotation_position="bottom right")
    fig.update_xaxes(title="number of draws averaged", type="log")
    fig.update_yaxes(title="running mean of the output")
    return base_layout(fig, height=300)


def trap_figure(r: TrapResult) -> go.Figure:
    """Fraction of values zeroed in train() and eval() by three modules that drop with the same p."""
    names = [f"{row.module}<br>{row.forward.split('  #')[0]}" for row in r.rows]
    fig = go.Figure()
    fig.add_bar(x=names, y=[row.train_zeroed for row in r.rows], name="train()", marker_color=COLORS["idle"],
                text=[f"{row.train_zeroed:.1%}" for row in r.rows], textposition="outside")
    fig.add_bar(x=names, y=[row.eval_zeroed for row in r.rows], name="eval()",
                marker_color=[COLORS["error"] if row.eval_zeroed > 0 else COLORS["activation"] for row in r.rows],
                text=[f"{row.eval_zeroed:.1%}" for row in r.rows], textposition="outside")
    if r.p > 0:
        fig.add_hline(y=r.p, line_dash="dot", line_color=REFERENCE, annotation_text=f"p = {r.p:g}",
                      annotation_position="top left")
    fig.update_yaxes(title="fraction of values zeroed", range=[0, 1.05], tickformat=".0%")
    return base_layout(fig, height=320)
