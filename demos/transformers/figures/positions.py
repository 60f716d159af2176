"""Figures of the Positions view: outputs of a permuted input, encoding tables, and score matrices by position."""

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from demos.style import base_layout
from demos.transformers.positions import ENCODING_LABELS, Equivariance, OffsetScores, Tables

DIVERGING = "RdBu_r"  # negative blue, positive red, 0 white: values of either sign around zero
MAGNITUDE = "Greys"  # a difference's size, 0 white


def _limit(*matrices) -> float:
    return max(abs(v) for m in matrices for row in m for v in row) or 1.0


def _bar_beside(fig: go.Figure, col: int) -> dict:
    """A slim colour bar just right of panel `col` (in the gap before the next panel)."""
    axis = fig.layout["xaxis" if col == 1 else f"xaxis{col}"]
    return dict(x=axis.domain[1] + 0.008, xanchor="left", len=0.9, thickness=10)


def _matrix_axes(fig: go.Figure, x_title: str, y_title: str, cols: int) -> None:
    """Row 0 at the top, as a matrix is read; axis titles on the first panel only."""
    fig.update_yaxes(autorange="reversed")
    for col in range(1, cols + 1):
        fig.update_xaxes(title=x_title, row=1, col=col)
    fig.update_yaxes(title=y_title, row=1, col=1)


def _titled(fig: go.Figure, title: str) -> go.Figure:
    """The shared layout, with room between the title and the panels' own titles."""
    return base_layout(fig, title=title, height=400).update_layout(margin_t=80)


def equivariance_figure(r: Equivariance) -> go.Figure:
    """P·f(x) beside f(P·x) on one colour scale, and their difference on the same scale (blank when equal)."""
    mask = " + causal mask" if r.causal else ""
    titles = ("P·f(x): attend, then permute", "f(P·x): permute, then attend", f"|difference| (max {r.gap:.2g})")
    fig = make_subplots(rows=1, cols=3, subplot_titles=titles, horizontal_spacing=0.1)
    limit = _limit(r.permuted_outputs, r.outputs_of_permuted)
    difference = [[abs(a - b) for a, b in zip(p, q, strict=True)]
                  for p, q in zip(r.permuted_outputs, r.outputs_of_permuted, strict=True)]
    for col, z in ((1, r.permuted_outputs), (2, r.outputs_of_permuted)):
        fig.add_trace(go.Heatmap(z=np.asarray(z), zmin=-limit, zmax=limit, zmid=0, colorscale=DIVERGING,
                                 showscale=col == 1, colorbar=dict(_bar_beside(fig, 2), title="value"),
                                 hovertemplate="row %{y}, dim %{x}: %{z:.4f}<extra></extra>"), row=1, col=col)
    fig.add_trace(go.Heatmap(z=np.asarray(difference), zmin=0, zmax=limit, colorscale=MAGNITUDE, showscale=True,
                             colorbar=dict(_bar_beside(fig, 3), title="|diff|"),
                             hovertemplate="row %{y}, dim %{x}: %{z:.2g}<extra></extra>"), row=1, col=3)
    _matrix_axes(fig, "dim", f"row (token order {', '.join(map(str, r.perm))})", 3)
    return _titled(fig, f"{ENCODING_LABELS[r.encoding].capitalize()}{mask}: f(P·x) against P·f(x)")


def _heatmap_pair(titles: tuple[str, str], matrices: tuple, hover: str, axes: tuple[str, str],
                  title: str) -> go.Figure:
    """Two matrices side by side, each on its own symmetric scale with its colour bar beside it."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14, subplot_titles=titles)
    for col, z in enumerate(matrices, start=1):
        limit = _limit(z)
        fig.add_trace(go.Heatmap(z=np.asarray(z), zmin=-limit, zmax=limit, zmid=0, colorscale=DIVERGING,
                                 colorbar=_bar_beside(fig, col), hovertemplate=hover), row=1, col=col)
    _matrix_axes(fig, *axes, 2)
    return _titled(fig, title)


def tables_figure(t: Tables) -> go.Figure:
    """The sinusoidal table and a learned table at init, position × dimension, each on its own symmetric scale."""
    return _heatmap_pair(("sinusoidal: sin/cos of p / 10000^(2i/d)", "learned: nn.Embedding at init, N(0, 1)"),
                         (t.sinusoidal, t.learned), "position %{y}, dim %{x}: %{z:.4f}<extra></extra>",
                         ("dimension", "position"),
                         f"Positional encodings: {t.positions} positions × {t.dim} dimensions")


def dots_figure(t: Tables) -> go.Figure:
    """PE[m]·PE[n] / d for both tables: constant along diagonals means it depends on m − n alone."""
    return _heatmap_pair((f"sinusoidal (diagonal spread {t.sinusoidal_diagonal_spread:.2g})",
                          f"learned at init (diagonal spread {t.learned_diagonal_spread:.2g})"),
                         (t.sinusoidal_dots, t.learned_dots), "m %{y}, n %{x}: %{z:.4f}<extra></extra>",
                         ("position n", "position m"), "Dot products of two positions' encodings, PE[m]·PE[n] / d")


def offsets_figure(o: OffsetScores) -> go.Figure:
    """q_m·k_n for one token placed at every position: RoPE against the added sinusoidal encoding."""
    return _heatmap_pair((f"RoPE on q and k (diagonal spread {o.rope_spread:.2g})",
                          f"sinusoidal added to x (diagonal spread {o.added_spread:.2g})"),
                         (o.rope_scores, o.added_scores), "q at %{y}, k at %{x}: %{z:.4f}<extra></extra>",
                         ("k's position n", "q's position m"), "q_m·k_n / √d for one token placed at every position")
