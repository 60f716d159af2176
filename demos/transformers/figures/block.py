"""Figures of The block view: the hand-written block against nn.TransformerEncoderLayer, and one block's
parameters, FLOPs per token and bytes kept per token, formula part by part beside what torch measured.

The four panels are laid out by hand (axis domains and title annotations in one layout dict) rather than with
make_subplots, whose per-panel updates cost more than the torch work behind the figure."""

import plotly.graph_objects as go

from demos.style import COLORS, REFERENCE, SERIES, base_layout
from demos.transformers.block import FLOAT_BYTES, PARTS, RUNS, Costs, Equivalence

PART_COLORS = dict(zip(PARTS, (SERIES[0], SERIES[4], SERIES[2], SERIES[7]), strict=True))
NORM_COLORS = {False: COLORS["buffer"], True: COLORS["gradient"]}  # apart from the parts' colours
ZERO_FLOOR = 1e-10  # a difference of exactly 0 is drawn at this height on the log axis, labelled 0
RUN_LABELS = {RUNS[0]: "eval<br>no_grad", RUNS[1]: "train<br>p=0", RUNS[2]: "train<br>p=0.1"}  # p: dropout
TITLES = ("|by hand − nn layer|", "parameters", "forward FLOPs per token", "saved bytes per token")
WIDTHS = (0.3, 0.16, 0.27, 0.27)  # of the plot width, before the gaps
GAP = 0.07


def domains() -> list[tuple[float, float]]:
    """Each panel's horizontal extent in paper coordinates."""
    usable = 1 - GAP * (len(WIDTHS) - 1)
    spans, left = [], 0.0
    for width in WIDTHS:
        spans.append((left, left + width * usable))
        left += width * usable + GAP
    return spans


def block_figure(e: Equivalence, c: Costs) -> go.Figure:
    """Four panels: max |difference| per run; parameters, FLOPs per token and bytes per token (stacked formula
    parts, a diamond where torch's measurement lands)."""
    traces = _differences(e)
    traces += _stacked(2, {"nn layer": c.parameter_formula}, {"nn layer": c.parameter_count}, 1, "parameters")
    traces += _stacked(3, {"by hand": c.flop_formula, "nn layer": c.flop_formula},
                       {"by hand": c.flops_by_hand, "nn layer": c.flops_layer}, 1, "FLOPs")
    traces += _stacked(4, {"by hand": c.memory_formula_by_hand, "nn layer": c.memory_formula_layer},
                       {"by hand": c.bytes_by_hand, "nn layer": c.bytes_layer}, FLOAT_BYTES, "bytes")
    named = set()
    for trace in traces:  # each legend entry once, from the first panel that draws it
        trace["showlegend"] = trace["name"] not in named
        named.add(trace["name"])
    layout = dict(barmode="stack", annotations=[
        dict(text=title, x=(a + b) / 2, xref="paper", y=1, yref="paper", yanchor="bottom", showarrow=False)
        for title, (a, b) in zip(TITLES, domains(), strict=True)])
    for i, span in enumerate(domains(), 1):
        suffix = "" if i == 1 else str(i)
        layout["xaxis" + suffix] = dict(domain=span, anchor="y" + suffix, tickangle=0)
        layout["yaxis" + suffix] = dict(anchor="x" + suffix)
    layout["yaxis"].update(type="log", range=[-10.5, 0.7], title="log scale (0 drawn at 10⁻¹⁰)")
    fig = base_layout(go.Figure(data=traces, layout=layout), height=400)
    fig.update_layout(margin_t=40, legend=dict(orientation="h", yanchor="top", y=-0.22, x=0))
    return fig


def _differences(e: Equivalence) -> list[dict]:
    """Grouped bars, one group per run: post-norm and pre-norm side by side; hover gives the value and the path."""
    traces = []
    for norm_first in (False, True):
        rows = [e.row(norm_first, run) for run in RUNS]
        traces.append(dict(
            type="bar", x=[RUN_LABELS[r[1]] for r in rows], y=[max(r[2], ZERO_FLOOR) for r in rows],
            customdata=[["0" if r[2] == 0 else f"{r[2]:.2g}", r[3]] for r in rows],
            marker_color=NORM_COLORS[norm_first], offsetgroup=str(norm_first), xaxis="x", yaxis="y",
            name="norm_first=True (pre-norm)" if norm_first else "norm_first=False (post-norm)",
            hovertemplate="%{x}: %{customdata[0]}<br>%{customdata[1]}<extra></extra>"))
    return traces


def _stacked(panel: int, formulas: dict, measured: dict, scale: int, unit: str) -> list[dict]:
    """One stacked bar per column label (the formula's parts) and a diamond at what torch measured."""
    axes = dict(xaxis=f"x{panel}", yaxis=f"y{panel}")
    labels = list(formulas)
    traces = []
    for rank, part in enumerate(PARTS):
        values = [formulas[label][part] * scale for label in labels]
        if any(values):
            traces.append(dict(type="bar", x=labels, y=values, marker_color=PART_COLORS[part], name=part,
                               legendgroup=part, legendrank=1000 + rank, offsetgroup="formula", **axes,
                               hovertemplate=f"{part}: %{{y:,}} {unit} (formula)<extra></extra>"))
    traces.append(dict(type="scatter", x=labels, y=[measured[label] for label in labels], mode="markers",
                       name="measured by torch", legendgroup="measured", legendrank=2000, **axes,
                       marker=dict(symbol="diamond", size=13, color=REFERENCE, line=dict(width=1.5, color="#000000")),
                       hovertemplate=f"%{{x}}: %{{y:,}} {unit} measured<extra></extra>"))
    return traces
