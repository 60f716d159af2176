"""Figures of the Multi-head view: where each number goes under both head splits, the attention weights per head
beside need_weights' average, and who attends to whom when batch_first is wrong."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from demos.style import SERIES, base_layout, category_scale
from demos.transformers.multihead import BatchFirstTrap, HeadSplit, ModuleCheck

WEIGHTS_SCALE = "Blues"


def split_figure(s: HeadSplit) -> go.Figure:
    """Two (T, E) grids, one per split: each number coloured by the head that reads it; hover names its row there."""
    titles = ("right: view(B, T, H, d).transpose(1, 2)", "trap: view(B, H, T, d)")
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.08)
    scale = category_scale({f"head {h}": SERIES[h % len(SERIES)] for h in range(s.heads)})
    for col, (heads, rows) in enumerate(((s.head_right, s.row_right), (s.head_wrong, s.row_wrong)), 1):
        hover = [[f"token {t}, feature {e}<br>→ head {heads[t][e]}, row {rows[t][e]}"
                  + ("" if rows[t][e] == t else " (another token's row)") for e in range(s.embed)]
                 for t in range(s.tokens)]
        fig.add_trace(go.Heatmap(z=heads, hovertext=hover, hoverinfo="text", xgap=1, ygap=1,
                                 **dict(scale, showscale=col == 2)), row=1, col=col)
    fig.update_xaxes(title="feature e of the input (B, T, E)")
    fig.update_yaxes(title="token t", autorange="reversed", row=1, col=1)
    fig.update_yaxes(autorange="reversed", row=1, col=2)
    fig = base_layout(fig, height=360)
    fig.update_layout(margin_t=50)  # the subplot titles sit above the grids
    return fig


def weights_figure(m: ModuleCheck) -> go.Figure:
    """Batch item 0: the attention weights of each head (by hand) and what need_weights=True returns, their mean."""
    panels = [*(f"head {h}" for h in range(m.heads)), "need_weights=True: the mean"]
    maps = [*m.weights_item0, m.averaged_item0]
    fig = make_subplots(rows=1, cols=len(maps), subplot_titles=panels, horizontal_spacing=0.02)
    top = max(max(max(row) for row in grid) for grid in maps)
    for col, grid in enumerate(maps, 1):
        fig.add_trace(go.Heatmap(z=grid, zmin=0, zmax=top, colorscale=WEIGHTS_SCALE, showscale=col == len(maps),
                                 colorbar=dict(title="weight", len=0.9),
                                 hovertemplate="query %{y} → key %{x}: %{z:.3f}<extra></extra>"), row=1, col=col)
    fig.update_xaxes(showticklabels=False, title=None)
    fig.update_yaxes(showticklabels=False, autorange="reversed")
    fig.update_xaxes(title="key →", row=1, col=1)
    fig.update_yaxes(title="query ↓", row=1, col=1)
    fig = base_layout(fig, height=260)
    fig.update_layout(margin_t=50)
    return fig


def batch_first_figure(t: BatchFirstTrap) -> go.Figure:
    """Every (sequence, token) against every other: the weight with which one attends to the other, for the right
    module and for the default one fed (B, T, E)."""
    size = t.batch * t.tokens
    right = [[0.0] * size for _ in range(size)]
    trap = [[0.0] * size for _ in range(size)]
    for b in range(t.batch):
        for q in range(t.tokens):
            for k in range(t.tokens):
                right[b * t.tokens + q][b * t.tokens + k] = t.right_weights[b][q][k]
            for other in range(t.batch):  # the trap's "sequences" are positions, its "tokens" are batch items
                trap[b * t.tokens + q][other * t.tokens + q] = t.trap_weights[q][b][other]
    labels = [f"s{b} t{q}" for b in range(t.batch) for q in range(t.tokens)]
    titles = ("batch_first=True: each token attends within its own sequence",
              "batch_first=False fed (B, T, E): each position attends across the batch")
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.1)
    for col, grid in enumerate((right, trap), 1):
        fig.add_trace(go.Heatmap(z=grid, x=labels, y=labels, zmin=0, zmax=1, colorscale=WEIGHTS_SCALE,
                                 showscale=col == 2, colorbar=dict(title="weight", len=0.9),
                                 hovertemplate="%{y} attends to %{x}: %{z:.3f}<extra></extra>"), row=1, col=col)
    starts = labels[::t.tokens]  # one tick per sequence keeps the axes readable at 64 rows
    fig.update_xaxes(tickvals=starts, title="attended to (sequence s, token t)")
    fig.update_yaxes(tickvals=starts, autorange="reversed")
    fig.update_yaxes(title="query", row=1, col=1)
    fig = base_layout(fig, height=380)
    fig.update_layout(margin_t=50)
    return fig
