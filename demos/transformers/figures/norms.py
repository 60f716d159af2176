"""Figures of the Norms & residuals view: the outputs one input reaches, one sample across batches, LayerNorm
against RMSNorm, and pre-norm against post-norm stacks."""

import itertools

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from demos.style import COLORS, SERIES, base_layout, category_scale, legend_on_top
from demos.transformers.norms import Axes, BatchDependence, PrePost, RmsVsLayer

CELLS = {"output unchanged": "#e0e0e0", "output changed": COLORS["activation"], "the nudged input": COLORS["data"]}
PRE, POST = SERIES[0], SERIES[1]


def axes_figure(a: Axes) -> go.Figure:
    """One block per norm (rows) and sample (columns), token × channel inside, drawn as one heatmap with blank
    gaps: green where an output moved when the cyan input was nudged, so the green cells are the group that input
    shares its statistics with."""
    nb, nt, nc = a.cell
    names = [name for name, _ in a.moved]
    rows, cols = len(names) * (a.tokens + 1) - 1, a.batch * (a.channels + 1) - 1
    z = np.full((rows, cols), np.nan)
    hover = np.full((rows, cols), "", dtype=object)
    for n, (name, moved) in enumerate(a.moved):
        for b, t, c in itertools.product(range(a.batch), range(a.tokens), range(a.channels)):
            y, x = n * (a.tokens + 1) + t, b * (a.channels + 1) + c
            z[y, x] = 2 if (b, t, c) == (nb, nt, nc) else moved[b][t][c]
            hover[y, x] = f"{name}: sample {b}, token {t}, channel {c}"
    fig = go.Figure(go.Heatmap(z=z, customdata=hover, xgap=2, ygap=2, hoverongaps=False, **category_scale(CELLS),
                               hovertemplate="%{customdata}<extra></extra>"))
    channel_x = [b * (a.channels + 1) + c for b in range(a.batch) for c in range(a.channels)]
    token_y = [n * (a.tokens + 1) + t for n in range(len(names)) for t in range(a.tokens)]
    fig.update_xaxes(tickvals=channel_x, ticktext=[f"c{x % (a.channels + 1)}" for x in channel_x], showgrid=False,
                     zeroline=False)
    fig.update_yaxes(tickvals=token_y, ticktext=[f"t{y % (a.tokens + 1)}" for y in token_y], autorange="reversed",
                     showgrid=False, zeroline=False)
    for b in range(a.batch):  # sample names above their blocks, norm names left of theirs
        fig.add_annotation(x=b * (a.channels + 1) + (a.channels - 1) / 2, y=1.0, yref="paper", yanchor="bottom",
                           text=f"sample {b}", showarrow=False)
    for n, name in enumerate(names):
        fig.add_annotation(x=0, xref="paper", xanchor="right", xshift=-40, y=n * (a.tokens + 1) + (a.tokens - 1) / 2,
                           text=f"<b>{name}</b>", showarrow=False)
    fig = base_layout(fig, title=f"Outputs that move when x[{nb}, {nt}, {nc}] is nudged", height=400)
    return fig.update_layout(margin=dict(t=80, l=180))  # the title above the sample names; the norm names (20 px)


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
