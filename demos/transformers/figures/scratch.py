"""Figure of the From scratch view: the from-scratch output against torch's, and their |difference| per element.

Colours: each output element a data-cyan dot, the line y = x (where equal outputs fall) the grey reference; the
|difference| on a sequential scale from 0 (light) to the largest difference (dark)."""

import plotly.graph_objects as go

from demos.style import COLORS, REFERENCE
from demos.transformers.figures.attention import grid
from demos.transformers.scratch import PieceResult


def _flat(rows) -> list[float]:
    return [float(f"{x:.6g}") for row in rows for x in row]


def scratch_figure(r: PieceResult) -> go.Figure:
    """Left: every element of the output, torch's value (x) against the from-scratch value (y). Right: |from scratch
    − torch| per element, one row per output row (the output's last dim across)."""
    titles = [f"from scratch vs torch, {r.dtype}: {sum(map(len, r.ours))} elements",
              f"|from scratch − torch| per element (max {r.max_abs_diff:.3g})"]
    layout = grid(1, 2, titles, gap_x=0.12, widths=[0.45, 0.55])
    layout["xaxis"]["title"], layout["yaxis"]["title"] = dict(text="torch's output"), dict(text="from scratch")
    layout["xaxis2"]["title"] = dict(text="last dim")
    layout["yaxis2"].update(title=dict(text="row"), autorange="reversed")
    x, y = _flat(r.theirs), _flat(r.ours)
    lo, hi = min(x + y), max(x + y)
    traces = [
        dict(type="scatter", x=[lo, hi], y=[lo, hi], mode="lines", line=dict(color=REFERENCE, dash="dot"),
             name="y = x", hoverinfo="skip"),
        dict(type="scatter", x=x, y=y, mode="markers", marker=dict(color=COLORS["data"], size=6),
             name="output element", hovertemplate="torch %{x:.6g}<br>from scratch %{y:.6g}<extra></extra>"),
        dict(type="heatmap", z=[[float(f"{d:.3g}") for d in row] for row in r.diffs], colorscale="Purples", zmin=0,
             zmax=max(r.max_abs_diff, 1e-300), xaxis="x2", yaxis="y2",
             colorbar=dict(title=dict(text="|diff|"), thickness=12, exponentformat="e"),
             hovertemplate="row %{y}, col %{x}: |diff| %{z:.3g}<extra></extra>"),
    ]
    legend = dict(orientation="h", yanchor="bottom", y=1.12, xanchor="left", x=0)
    return go.Figure(dict(data=traces, layout=dict(layout, height=400, legend=legend,
                                                   margin=dict(l=10, r=10, t=70, b=10))))
