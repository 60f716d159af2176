"""Figures of The block view: the hand-written block against nn.TransformerEncoderLayer, and one block's
parameters, FLOPs per token and bytes kept per token, formula part by part beside what torch measured."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from demos.style import COLORS, REFERENCE, SERIES, base_layout
from demos.transformers.block import FLOAT_BYTES, PARTS, RUNS, Costs, Equivalence

PART_COLORS = dict(zip(PARTS, (SERIES[0], SERIES[4], SERIES[2], SERIES[7]), strict=True))
NORM_COLORS = {False: COLORS["buffer"], True: COLORS["gradient"]}  # apart from the parts' colours
ZERO_FLOOR = 1e-10  # a difference of exactly 0 is drawn at this height on the log axis, labelled 0
RUN_LABELS = {RUNS[0]: "eval<br>no_grad", RUNS[1]: "train<br>p=0", RUNS[2]: "train<br>p=0.1"}  # p: dropout


def block_figure(e: Equivalence, c: Costs) -> go.Figure:
    """Four panels: max |difference| per run; parameters, FLOPs per token and bytes per token (stacked formula
    parts, a diamond where torch's measurement lands)."""
    titles = ("max |by hand − nn layer|", "parameters per block", "forward FLOPs per token",
              "saved bytes per token")
    fig = make_subplots(rows=1, cols=4, subplot_titles=titles, horizontal_spacing=0.07,
                        column_widths=(0.3, 0.16, 0.27, 0.27))
    _differences(fig, e)
    _stacked(fig, 2, {"nn layer": c.parameter_formula}, {"nn layer": c.parameter_count}, 1, "parameters")
    _stacked(fig, 3, {"by hand": c.flop_formula, "nn layer": c.flop_formula},
             {"by hand": c.flops_by_hand, "nn layer": c.flops_layer}, 1, "FLOPs")
    _stacked(fig, 4, {"by hand": c.memory_formula_by_hand, "nn layer": c.memory_formula_layer},
             {"by hand": c.bytes_by_hand, "nn layer": c.bytes_layer}, FLOAT_BYTES, "bytes")
    fig.update_layout(barmode="stack")
    fig.update_yaxes(type="log", range=[-10.5, 0.7], title="log scale (0 drawn at 10⁻¹⁰)", row=1, col=1)
    fig.update_xaxes(tickangle=0)
    fig = base_layout(fig, height=400)
    fig.update_layout(margin_t=50, legend=dict(orientation="h", yanchor="top", y=-0.22, x=0))
    return fig


def _differences(fig: go.Figure, e: Equivalence) -> None:
    """Grouped bars, one group per run: post-norm and pre-norm side by side, each labelled with its value."""
    for norm_first in (False, True):
        rows = [e.row(norm_first, run) for run in RUNS]
        fig.add_bar(x=[RUN_LABELS[r[1]] for r in rows], y=[max(r[2], ZERO_FLOOR) for r in rows],
                    customdata=[["0" if r[2] == 0 else f"{r[2]:.2g}", r[3]] for r in rows],
                    marker_color=NORM_COLORS[norm_first],
                    name="norm_first=True (pre-norm)" if norm_first else "norm_first=False (post-norm)",
                    offsetgroup=str(norm_first),
                    hovertemplate="%{x}: %{customdata[0]}<br>%{customdata[1]}<extra></extra>", row=1, col=1)


def _stacked(fig: go.Figure, col: int, formulas: dict, measured: dict, scale: int, unit: str) -> None:
    """One stacked bar per column label (the formula's parts) and a diamond at what torch measured."""
    labels = list(formulas)
    for part in PARTS:
        values = [formulas[label][part] * scale for label in labels]
        if not any(values):
            continue
        fig.add_bar(x=labels, y=values, marker_color=PART_COLORS[part], name=part, legendgroup=part,
                    legendrank=1000 + PARTS.index(part),
                    showlegend=part not in _named(fig),
                    hovertemplate=f"{part}: %{{y:,}} {unit} (formula)<extra></extra>", row=1, col=col)
    fig.add_scatter(x=labels, y=[measured[label] for label in labels], mode="markers", name="measured by torch",
                    marker=dict(symbol="diamond", size=13, color=REFERENCE, line=dict(width=1.5, color="#000000")),
                    legendgroup="measured", showlegend="measured by torch" not in _named(fig), legendrank=2000,
                    hovertemplate=f"%{{x}}: %{{y:,}} {unit} measured<extra></extra>", row=1, col=col)


def _named(fig: go.Figure) -> set[str]:
    """The legend entries already shown (each part is named once, whichever panel draws it first)."""
    return {t.name for t in fig.data if t.showlegend is not False}
