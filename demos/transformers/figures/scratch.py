"""Figure of the From scratch view: the from-scratch output against torch's, and their |difference| per element.

Colours: each output element a data-cyan dot, the line y = x (where equal outputs fall) the grey reference; the
|difference| on a sequential scale from 0 (light) to the largest difference (dark)."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from demos.style import COLORS, REFERENCE, base_layout
from demos.transformers.scratch import PieceResult


def _flat(rows) -> list[float]:
    return [float(f"{x:.6g}") for row in rows for x in row]


def scratch_figure(r: PieceResult) -> go.Figure:
    """Left: every element of the output, torch's value (x) against the from-scratch value (y). Right: |from scratch
    − torch| per element, one row per output row (the output's last dim across)."""
    diffs = r.diffs
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, column_widths=[0.45, 0.55], subplot_titles=(
        f"from scratch vs torch, {r.dtype}: {sum(map(len, r.ours))} elements",
        f"|from scratch − torch| per element (max {r.max_abs_diff:.3g})"))
    x, y = _flat(r.theirs), _flat(r.ours)
    lo, hi = min(x + y), max(x + y)
    fig.add_scatter(x=[lo, hi], y=[lo, hi], mode="lines", line=dict(color=REFERENCE, dash="dot"), name="y = x",
                    hoverinfo="skip", row=1, col=1)
    fig.add_scatter(x=x, y=y, mode="markers", marker=dict(color=COLORS["data"], size=6), name="output element",
                    hovertemplate="torch %{x:.6g}<br>from scratch %{y:.6g}<extra></extra>", row=1, col=1)
    fig.add_trace(go.Heatmap(z=[[float(f"{d:.3g}") for d in row] for row in diffs], colorscale="Purples", zmin=0,
                             zmax=max(r.max_abs_diff, 1e-300),
                             colorbar=dict(title="|diff|", thickness=12, exponentformat="e"),
                             hovertemplate="row %{y}, col %{x}: |diff| %{z:.3g}<extra></extra>"), row=1, col=2)
    fig.update_xaxes(title_text="torch's output", row=1, col=1)
    fig.update_yaxes(title_text="from scratch", row=1, col=1)
    fig.update_xaxes(title_text="last dim", row=1, col=2)
    fig.update_yaxes(title_text="row", autorange="reversed", row=1, col=2)
    fig = base_layout(fig, height=400)
    fig.update_layout(margin_t=70, legend=dict(y=1.12))
    return fig
