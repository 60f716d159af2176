"""Figures of the Multi-head view: where each number goes under both head splits, the attention weights per head
beside need_weights' average, and who attends to whom when batch_first is wrong.

Each figure is built in one go from plain dicts (traces and a layout with its axes), its grids as numpy arrays and
its hover text from templates: make_subplots, per-axis updates and nested lists of per-cell strings cost several
times the torch work behind the figure, and a 64×64 grid of strings weighs hundreds of kilobytes on the wire."""

import numpy as np
import plotly.graph_objects as go

from demos.style import SERIES, base_layout, category_scale
from demos.transformers.multihead import BatchFirstTrap, HeadSplit, ModuleCheck

WEIGHTS_SCALE = "Blues"
PLAIN_AXIS = dict(showgrid=False, zeroline=False)


def two_panels(titles: tuple[str, str], x_title: str, y_title: str, gap: float = 0.07) -> dict:
    """A layout with two x/y axis pairs side by side (room on the right for a colour bar), each titled above; the
    rows read top to bottom and the right panel shares the left one's rows."""
    width = (1 - 0.06 - gap) / 2
    layout = {"annotations": []}
    for i, title in enumerate(titles):
        suffix = "" if i == 0 else "2"
        left = i * (width + gap)
        layout["xaxis" + suffix] = dict(PLAIN_AXIS, domain=[left, left + width], anchor="y" + suffix,
                                        title=x_title)
        layout["yaxis" + suffix] = dict(PLAIN_AXIS, anchor="x" + suffix, autorange="reversed",
                                        title=y_title if i == 0 else None)
        layout["annotations"].append(dict(text=title, x=left + width / 2, xref="paper", y=1, yref="paper",
                                          yanchor="bottom", showarrow=False))
    return layout


def split_figure(s: HeadSplit) -> go.Figure:
    """Two (T, E) grids, one per split: each number coloured by the head that reads it; hover names the row (the
    token, as the head sees it) where it lands."""
    scale = category_scale({f"head {h}": SERIES[h % len(SERIES)] for h in range(s.heads)})
    traces = [dict(type="heatmap", z=np.array(heads), customdata=np.array(rows), xgap=1, ygap=1,
                   xaxis="x" if i == 0 else "x2", yaxis="y" if i == 0 else "y2", **dict(scale, showscale=i == 1),
                   hovertemplate="token %{y}, feature %{x}<br>→ head %{z}, row %{customdata}<extra></extra>")
              for i, (heads, rows) in enumerate(((s.head_right, s.row_right), (s.head_wrong, s.row_wrong)))]
    layout = two_panels(("right: view(B, T, H, d).transpose(1, 2)", "trap: view(B, H, T, d)"),
                        "feature e of the input (B, T, E)", "token t")
    fig = base_layout(go.Figure(data=traces, layout=layout), height=360)
    fig.update_layout(margin_t=40)
    return fig


def weights_figure(m: ModuleCheck) -> go.Figure:
    """Batch item 0: the attention weights of each head (by hand) and, last, what need_weights=True returns, their
    mean; one heatmap whose panels are separated by an empty column, the panels named above them."""
    titles = [*(f"head {h}" for h in range(m.heads)), "need_weights: mean"]
    maps = np.array([*m.weights_item0, m.averaged_item0]).round(4)  # (H + 1, T, T)
    T = m.tokens
    gap = np.full((len(titles), T, 1), np.nan)
    z = np.concatenate([maps, gap], axis=2).transpose(1, 0, 2).reshape(T, -1)[:, :-1]
    columns = [label for i, title in enumerate(titles)
               for label in [f"{title}, key {k}" for k in range(T)] + [" " * (i + 1)]][:-1]  # gaps: unique blanks
    trace = dict(type="heatmap", z=z, x=columns, y=[f"query {q}" for q in range(T)], zmin=0,
                 colorscale=WEIGHTS_SCALE, colorbar=dict(title="weight", len=0.9),
                 hovertemplate="%{x} ← %{y}: %{z:.3f}<extra></extra>")
    layout = dict(xaxis=dict(PLAIN_AXIS, showticklabels=False, title="key → (one panel per head)"),
                  yaxis=dict(PLAIN_AXIS, showticklabels=False, title="query ↓", autorange="reversed"),
                  annotations=[dict(text=title, x=columns[i * (T + 1) + (T - 1) // 2], xref="x", y=1, yref="paper",
                                    yanchor="bottom", showarrow=False) for i, title in enumerate(titles)])
    fig = base_layout(go.Figure(data=[trace], layout=layout), height=260)
    fig.update_layout(margin_t=40)
    return fig


def attention_grids(t: BatchFirstTrap) -> tuple[np.ndarray, np.ndarray]:
    """Every (sequence, token) against every other: the weight with which one attends to the other, for the right
    module and for the default one fed (B, T, E)."""
    B, T = t.batch, t.tokens
    right, trap = np.zeros((B * T, B * T)), np.zeros((B * T, B * T))
    right_w, trap_w = np.array(t.right_weights), np.array(t.trap_weights)  # (B, T, T) and (T, B, B)
    for b in range(B):
        right[b * T:(b + 1) * T, b * T:(b + 1) * T] = right_w[b]
        for q in range(T):  # the trap's "sequences" are positions, its "tokens" are the batch's sequences
            trap[b * T + q, q::T] = trap_w[q, b]
    return right, trap


def batch_first_figure(t: BatchFirstTrap) -> go.Figure:
    """The two who-attends-to-whom grids side by side, on one colour scale."""
    labels = [f"s{b} t{q}" for b in range(t.batch) for q in range(t.tokens)]
    grids = attention_grids(t)
    top = float(max(grid.max() for grid in grids))
    traces = [dict(type="heatmap", z=grid.round(3), x=labels, y=labels, zmin=0, zmax=top, colorscale=WEIGHTS_SCALE,
                   showscale=i == 1, colorbar=dict(title="weight", len=0.9), xaxis="x" if i == 0 else "x2",
                   yaxis="y" if i == 0 else "y2", hovertemplate="%{y} attends to %{x}: %{z:.3f}<extra></extra>")
              for i, grid in enumerate(grids)]
    layout = two_panels(("batch_first=True", "batch_first=False, fed (B, T, E)"),
                        "attended to (sequence s, token t)", "query (sequence s, token t)")
    firsts = labels[::t.tokens]  # one tick per sequence keeps the axes readable at 64 rows
    for axis in ("xaxis", "xaxis2", "yaxis", "yaxis2"):
        layout[axis]["tickvals"] = firsts
    fig = base_layout(go.Figure(data=traces, layout=layout), height=380)
    fig.update_layout(margin_t=40)
    return fig
