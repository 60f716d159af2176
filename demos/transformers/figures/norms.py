"""Figures of the Norms & residuals view: the outputs one input reaches, one sample across batches, LayerNorm
against RMSNorm, and pre-norm against post-norm stacks."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from demos.style import COLORS, SERIES, base_layout, category_scale, legend_on_top
from demos.transformers.norms import Axes, BatchDependence, PrePost, RmsVsLayer

CELLS = {"output unchanged": "#e0e0e0", "output changed": COLORS["activation"], "the nudged input": COLORS["data"]}
PRE, POST = SERIES[0], SERIES[1]


def axes_figure(a: Axes) -> go.Figure:
    """One row of panels per norm, one panel per sample (token × channel): green where an output moved when the
    cyan input was nudged, so the green cells are the group that input shares its statistics with."""
    names = [name for name, _ in a.moved]
    fig = make_subplots(rows=len(names), cols=a.batch, row_titles=names, vertical_spacing=0.08,
                        horizontal_spacing=0.03, column_titles=[f"sample {b}" for b in range(a.batch)])
    nb, nt, nc = a.cell
    for row, (name, moved) in enumerate(a.moved, 1):
        for b in range(a.batch):
            z = [[2 if (b, t, c) == (nb, nt, nc) else moved[b][t][c] for c in range(a.channels)]
                 for t in range(a.tokens)]
            fig.add_trace(go.Heatmap(z=z, xgap=2, ygap=2, **category_scale(CELLS),
                                     hovertemplate=f"{name}, sample {b}, token %{{y}}, channel %{{x}}"
                                                   "<extra></extra>"), row=row, col=b + 1)
    for trace in fig.data[1:]:
        trace.showscale = False
    fig.update_yaxes(autorange="reversed", tickmode="linear", dtick=1)
    fig.update_xaxes(tickmode="linear", dtick=1)
    fig.update_xaxes(title="channel c", row=len(names))
    for row in range(1, len(names) + 1):
        fig.update_yaxes(title="token t", row=row, col=1)
    fig = base_layout(fig, title=f"Outputs that move when x[{nb}, {nt}, {nc}] is nudged", height=400)
    return fig.update_layout(margin_t=80)  # the title above the column titles


def batch_figure(d: BatchDependence) -> go.Figure:
    """Sample 0's normalized features, one line per batch it was put in, for each norm."""
    titles = [f"{name} (spread {d.spread(name):.2g})" for name, _ in d.outputs]
    fig = make_subplots(rows=1, cols=len(d.outputs), subplot_titles=titles, shared_yaxes=True,
                        horizontal_spacing=0.04)
    features = list(range(d.features))
    for col, (_, outputs) in enumerate(d.outputs, 1):
        for i, line in enumerate(outputs):
            fig.add_scatter(x=features, y=line, mode="lines+markers", line_color=SERIES[i % len(SERIES)],
                            name=f"batch {i + 1}", legendgroup=str(i), showlegend=col == 1, row=1, col=col,
                            hovertemplate=f"batch {i + 1}, feature %{{x}}: %{{y:.4f}}<extra></extra>")
    fig.update_xaxes(title="feature")
    fig.update_yaxes(title="sample 0's output", row=1, col=1)
    return legend_on_top(base_layout(fig, height=380), top=80)


def rms_figure(r: RmsVsLayer) -> go.Figure:
    """The chosen row and both norms' outputs; the largest LayerNorm-RMSNorm gap against the mean added."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        f"a zero-mean row + {r.offset:g}, and both norms of it", "max |LayerNorm − RMSNorm| by the mean added"))
    features = list(range(r.features))
    for values, name, color, dash in ((r.shifted, "input row", COLORS["data"], "dot"),
                                      (r.layer, "LayerNorm", PRE, "solid"), (r.rms, "RMSNorm", POST, "dash")):
        fig.add_scatter(x=features, y=values, mode="lines+markers", name=name, line=dict(color=color, dash=dash),
                        row=1, col=1, hovertemplate=f"{name}, feature %{{x}}: %{{y:.4f}}<extra></extra>")
    fig.add_scatter(x=r.offsets, y=r.curve, mode="lines+markers", line_color=COLORS["error"], showlegend=False,
                    row=1, col=2, hovertemplate="mean %{x:g}: max gap %{y:.3g}<extra></extra>")
    fig.add_scatter(x=[r.offset], y=[r.gap_shifted], mode="markers", marker=dict(size=14, color=COLORS["error"],
                    symbol="circle-open", line_width=3), name="your mean", row=1, col=2,
                    hovertemplate="mean %{x:g}: max gap %{y:.3g}<extra></extra>")
    fig.update_xaxes(title="feature", row=1, col=1)
    fig.update_xaxes(title="mean added to the zero-mean row", row=1, col=2)
    fig.update_yaxes(title="value", row=1, col=1)
    return legend_on_top(base_layout(fig, height=380), top=80)


def prepost_figure(p: PrePost) -> go.Figure:
    """Per-layer gradient norms at init, and the residual stream's RMS after each layer, for both placements."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        "‖gradient‖ of each layer's parameters, at init", "RMS of the residual stream, at init"))
    layers = list(range(1, p.depth + 1))
    for run, name, color in ((p.pre, "pre-norm (norm_first=True)", PRE), (p.post, "post-norm (norm_first=False)",
                                                                          POST)):
        fig.add_scatter(x=layers, y=run.grad_norms, mode="lines+markers", line_color=color, name=name,
                        legendgroup=name, row=1, col=1, hovertemplate="layer %{x}: ‖grad‖ %{y:.4g}<extra></extra>")
        fig.add_scatter(x=list(range(p.depth + 1)), y=run.stream_rms, mode="lines+markers", line_color=color,
                        name=name, legendgroup=name, showlegend=False, row=1, col=2,
                        hovertemplate="after layer %{x}: RMS %{y:.4g}<extra></extra>")
    fig.update_xaxes(title="layer (1 = next to the input)", row=1, col=1)
    fig.update_xaxes(title="after layer (0 = the input)", row=1, col=2)
    fig.update_yaxes(rangemode="tozero")
    return legend_on_top(base_layout(fig, height=380), top=80)
