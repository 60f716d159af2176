"""Figures for the gradient-flow page: log-scale norms across depth, heatmap, histograms, clipping, dead units."""

import math

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sequential

from demos.gradient_flow.clipping import ClipCompare, ClipRun
from demos.gradient_flow.dead_relu import INIT_LABELS, DeadResult
from demos.gradient_flow.flow import TINY, FlowResult
from demos.gradient_flow.network import label
from demos.style import COLORS, SERIES, badge, base_layout


def layout(fig: go.Figure, title: str | None = None, height: int = 380) -> go.Figure:
    """The shared layout with the legend under the plot, so long legends never cover the title."""
    base_layout(fig, title=title, height=height + 60)
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.22, xanchor="left", x=0),
                      margin=dict(b=20))
    return fig

VIRIDIS = sequential.Viridis
VARIANT_NAMES = ("your setting", "+ residual", "+ LayerNorm", "full fix: right init + LayerNorm + residual")
VARIANT_DASH = ("solid", "dot", "dash", "solid")
# Your setting is red and the full fix green on every chart of the page.
YOURS_COLOR, FIX_COLOR = COLORS["error"], COLORS["activation"]
VARIANT_COLORS = (YOURS_COLOR, SERIES[4], SERIES[5], FIX_COLOR)


def _floor(v: float) -> float:
    """Zero cannot sit on a log axis: draw it at the smallest float32 and say so in the hover."""
    return v if v > 0 and math.isfinite(v) else TINY


def grad_norm_figure(r: FlowResult) -> go.Figure:
    """Per-layer ||dL/dW|| (log scale) for your setting and each fix; layer 1 is next to the input."""
    fig = go.Figure()
    layers = list(range(1, r.cfg.depth + 1))
    for p, name, dash, colour in zip(r.variants, VARIANT_NAMES, VARIANT_DASH, VARIANT_COLORS, strict=True):
        fig.add_scatter(
            x=layers, y=[_floor(v) for v in p.grad_norms], name=name, mode="lines+markers",
            line=dict(dash=dash, color=colour, width=3 if name == VARIANT_NAMES[0] else 2), marker=dict(size=4),
            customdata=[f"{v:.3g}" for v in p.grad_norms],
            hovertemplate=f"{label(p.cfg)}<br>layer %{{x}}: ||grad|| = %{{customdata}}<extra></extra>",
        )
    fig.update_yaxes(type="log", title="‖∂loss/∂W‖ (log)", exponentformat="power")
    fig.update_xaxes(title="layer (1 = next to the input)")
    return layout(fig, title="Gradient norm per layer, one backward pass", height=420)


def act_std_figure(r: FlowResult) -> go.Figure:
    """Std of each block's output for your setting and the full fix."""
    fig = go.Figure()
    layers = list(range(1, r.cfg.depth + 1))
    for p, name, colour in ((r.yours, VARIANT_NAMES[0], YOURS_COLOR), (r.fixed, VARIANT_NAMES[3], FIX_COLOR)):
        fig.add_scatter(x=layers, y=[_floor(v) for v in p.act_stds], name=name, mode="lines+markers",
                        line=dict(color=colour), marker=dict(size=4),
                        hovertemplate="layer %{x}: std = %{y:.3g}<extra></extra>")
    fig.update_yaxes(type="log", title="activation std (log)", exponentformat="power")
    fig.update_xaxes(title="layer")
    return layout(fig, title="Activation std across depth", height=420)


def heatmap_figure(r: FlowResult) -> go.Figure:
    """log10 gradient norm, layer x training step: a dark band at the bottom is vanishing."""
    z = [[math.log10(_floor(v)) for v in row] for row in r.heatmap]
    text = [[f"{v:.3g}" for v in row] for row in r.heatmap]
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(1, len(r.step_losses) + 1)), y=list(range(1, r.cfg.depth + 1)), customdata=text,
        colorscale=[[i / (len(VIRIDIS) - 1), c] for i, c in enumerate(VIRIDIS)], colorbar=dict(title="log10 ‖g‖"),
        hovertemplate="step %{x}, layer %{y}: ‖g‖ = %{customdata}<extra></extra>",
    ))
    fig.update_xaxes(title="training step (SGD, lr 0.1)", dtick=1)
    fig.update_yaxes(title="layer")
    return layout(fig, title="Gradient norm while training: layer × step", height=420)


def histogram_figure(r: FlowResult) -> go.Figure:
    """Overlaid histograms of log10 |gradient entry| for four layers of your setting."""
    fig = go.Figure()
    for i, h in enumerate(r.histograms):
        centres = [(a + b) / 2 for a, b in zip(h.edges[:-1], h.edges[1:], strict=True)]
        zero_note = f" ({h.zeros} exact zeros)" if h.zeros else ""
        fig.add_bar(x=centres, y=h.counts, name=f"layer {h.layer}{zero_note}", marker_color=SERIES[i % len(SERIES)],
                    opacity=0.6, hovertemplate="log10|g| ≈ %{x:.1f}: %{y} entries<extra></extra>")
    fig.update_layout(barmode="overlay", bargap=0)
    fig.update_xaxes(title="log10 |gradient entry|")
    fig.update_yaxes(title="entries")
    return layout(fig, title="Gradient histograms (your setting)", height=420)


def clip_scatter_figure(c: ClipCompare) -> go.Figure:
    """Each gradient entry before (x) and after (y) clipping: norm clipping is a line, value clipping a plateau.

    The entries are float32 gradients: as float32 arrays they reach the browser as the same values in binary, a
    third of the JSON text their digits take."""
    entries = _float32(c.entries)
    fig = go.Figure()
    fig.add_scatter(x=entries, y=_float32(c.after_norm), mode="markers",
                    name=f"clip_grad_norm_(max_norm={c.max_norm:g})", marker=dict(color=COLORS["gradient"], size=5))
    fig.add_scatter(x=entries, y=_float32(c.after_value), mode="markers",
                    name=f"clip_grad_value_(clip_value={c.clip_value:g})",
                    marker=dict(color=COLORS["parameter"], size=5))
    fig.update_xaxes(title="gradient entry before clipping")
    fig.update_yaxes(title="after clipping")
    return layout(fig, title="Same gradients, two clippers", height=400)


def _float32(values: tuple[float, ...]) -> np.ndarray:
    """Values read from float32 tensors, as float32 again: exactly the same numbers."""
    return np.asarray(values, dtype=np.float32)


def clip_run_figure(c: ClipRun) -> go.Figure:
    """Full-data loss per step without and with clipping; a diverged run stops where it became NaN/inf."""
    fig = go.Figure()
    finite = [v if math.isfinite(v) else None for v in c.loss_plain]
    fig.add_scatter(y=finite, x=list(range(1, len(finite) + 1)), name="no clipping", mode="lines+markers",
                    line=dict(color=COLORS["error"]), marker=dict(size=4))
    fig.add_scatter(y=list(c.loss_clipped), x=list(range(1, len(c.loss_clipped) + 1)),
                    name=f"clip_grad_norm_({c.max_norm:g})", line=dict(color=COLORS["gradient"]))
    if c.plain_diverged:
        fig.add_annotation(x=len(c.loss_plain), y=0, yref="paper", yanchor="bottom", showarrow=False,
                           text="loss became inf/NaN here", **badge("error"))
    fig.update_yaxes(type="log", title="MSE on all data (log)", exponentformat="power")
    fig.update_xaxes(title="step")
    return layout(fig, title=f"SGD lr {c.lr:g}, momentum 0.9, unnormalized inputs", height=400)


def dead_figure(d: DeadResult) -> go.Figure:
    """Share of dead units per layer, before and after training, yours vs the good setting."""
    layers = [f"layer {i}" for i in range(1, len(d.yours.dead_after) + 1)]
    y = d.yours
    you = f"lr {y.lr:g}, {INIT_LABELS[y.init]}"
    fig = go.Figure()
    fig.add_bar(x=layers, y=d.good.dead_after, name=f"good: lr {d.good.lr:g}, Kaiming (after)",
                marker_color=COLORS["activation"])
    fig.add_bar(x=layers, y=y.dead_before, name=f"{you} (before)", marker_color=COLORS["idle"])
    fig.add_bar(x=layers, y=y.dead_after, name=f"{you} (after {'— diverged, NaN' if not y.finite else 'training'})",
                marker_color=COLORS["error"])
    fig.update_yaxes(title="units silent on all 1024 inputs", range=[0, 1.05], tickformat=".0%")
    return layout(fig, title="Dead ReLUs per layer", height=380)
