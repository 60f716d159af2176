"""Figures of the Attention view: the steps as heatmaps, the scaling curves, the fully masked rows, the T×T memory.

Colours: values on a diverging scale (blue below zero, red above), softmax weights on a blue scale from 0 to 1, a
masked score left blank (it is −∞); scaled attention in the parameter blue, unscaled in the error red, a uniform
softmax as the grey reference; the score matrix in red (error: what runs out), the fused kernel in green."""

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from demos.style import COLORS, REFERENCE, base_layout, category_scale, cell_text
from demos.transformers.attention import MaskedRowsResult, MemoryResult, ScalingResult, StepsResult, outcome

VALUES = "RdBu_r"  # diverging: the sign of a value reads at a glance
WEIGHTS = "Blues"


def _finite(rows) -> list[list[float | None]]:
    """Rows for a heatmap: −∞ (a masked score) as a gap."""
    return [[None if math.isinf(x) else round(x, 4) for x in row] for row in rows]


def steps_figure(r: StepsResult) -> go.Figure:
    """Top row: the input and its three projections; bottom row: scores, scaled and masked, weights, output.
    Rows are tokens (queries), top to bottom; every panel's title has the tensor's shape."""
    s = r.shapes
    panels = [
        ("x", f"x {s['x']}", VALUES), ("q", f"Q = x·W_q {s['q']}", VALUES), ("k", f"K = x·W_k {s['k']}", VALUES),
        ("v", f"V = x·W_v {s['v']}", VALUES), ("scores", f"QKᵀ {s['scores']}", VALUES),
        ("masked", f"÷√{r.d_k}, masked {s['scores']}", VALUES), ("weights", f"softmax {s['weights']}", WEIGHTS),
        ("out", f"out = weights·V {s['out']}", VALUES),
    ]
    fig = make_subplots(rows=2, cols=4, subplot_titles=[title for _, title, _ in panels], horizontal_spacing=0.05,
                        vertical_spacing=0.16)
    for i, (name, _, scale) in enumerate(panels):
        z = _finite(r.matrices[name])
        limit = 1.0 if scale == WEIGHTS else max((abs(x) for row in z for x in row if x is not None), default=1.0)
        fig.add_trace(go.Heatmap(
            z=z, colorscale=scale, zmin=0 if scale == WEIGHTS else -limit, zmax=limit, showscale=name == "weights",
            colorbar=dict(title="weight", len=0.42, y=0.2, thickness=12),
            hovertemplate=f"{name}[%{{y}}, %{{x}}] = %{{z:.3g}}<extra></extra>", xgap=1, ygap=1,
        ), row=i // 4 + 1, col=i % 4 + 1)
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_xaxes(showticklabels=False)
    fig.update_yaxes(title_text="token", row=1, col=1)
    fig.update_yaxes(title_text="query", row=2, col=1)
    for col in (1, 2, 3):
        fig.update_xaxes(title_text="key", row=2, col=col)
    fig = base_layout(fig, height=470)
    fig.update_layout(margin_t=40)
    return fig


def scaling_figure(r: ScalingResult) -> go.Figure:
    """Entropy, largest weight and the gradient reaching the scores against d_k (log axis), with and without the
    1/√d_k; the uniform softmax's entropy and weight as grey references."""
    titles = ("softmax entropy (nats)", "largest weight (mean over queries)", "‖∂loss/∂scores‖ per query")
    fig = make_subplots(rows=1, cols=3, subplot_titles=titles, horizontal_spacing=0.08)
    for label, color, name in (("scaled", COLORS["parameter"], "QKᵀ/√d_k"), ("unscaled", COLORS["error"], "QKᵀ")):
        for col, stat in enumerate(("entropy", "top_weight", "grad_norm"), 1):
            fig.add_scatter(x=list(r.d_k), y=list(r.series(label, stat)), mode="lines+markers", name=name,
                            line_color=color, legendgroup=label, showlegend=col == 1, row=1, col=col,
                            hovertemplate=f"{name}, d_k %{{x}}: %{{y:.3g}}<extra></extra>")
    for col, value in ((1, math.log(r.keys)), (2, 1 / r.keys)):
        fig.add_scatter(x=[r.d_k[0], r.d_k[-1]], y=[value, value], mode="lines", name=f"uniform over {r.keys} keys",
                        line=dict(color=REFERENCE, dash="dot"), legendgroup="uniform", showlegend=col == 1,
                        row=1, col=col, hovertemplate=f"uniform: {value:.3g}<extra></extra>")
    ticks = r.d_k[::2] if len(r.d_k) > 7 else r.d_k
    fig.update_xaxes(type="log", title_text="d_k", tickvals=list(ticks), ticktext=[str(d) for d in ticks])
    fig.update_yaxes(type="log", row=1, col=3)
    fig = base_layout(fig, height=360)
    fig.update_layout(margin_t=70, legend=dict(y=1.14))
    return fig


MASK_CELLS = {"may attend": COLORS["activation"], "masked": COLORS["idle"], "row with no key": COLORS["error"]}
OUTCOME_CELLS = {"NaN": COLORS["error"], "zeros": COLORS["idle"], "numbers": COLORS["data"]}


def short_method(method: str) -> str:
    """A method's name as a row label: 'SDPA FLASH_ATTENTION, bool mask' -> 'FLASH, bool'."""
    for long, short in (("SDPA ", ""), ("_ATTENTION", ""), (" mask", ""), ("masked_fill(", ""), (")", ""),
                        ("padding queries see themselves", "padding sees itself"), ("-inf float", "−∞ float"),
                        ("-inf", "−∞"), ("SDPA, bool (SDPA picks", "SDPA picks, bool")):
        method = method.replace(long, short)
    return method


def masked_rows_figure(r: MaskedRowsResult) -> go.Figure:
    """Left: the left-padded causal mask, rows with no allowed key in red. Right: each method that ran, the first
    fully masked query's output row (its d values), coloured by what came out: NaN, zeros or numbers. The colours
    are named by a legend beside the figure (ui.legend of MASK_CELLS and OUTCOME_CELLS)."""
    fig = make_subplots(rows=1, cols=2, column_widths=[0.32, 0.68], horizontal_spacing=0.2,
                        subplot_titles=(f"mask: {r.pad} padding token{'s' if r.pad > 1 else ''} first, causal",
                                        "output of query 0, which may attend to no key"))
    kinds = list(MASK_CELLS)
    z = [[kinds.index("may attend" if ok else "row with no key" if not any(row) else "masked") for ok in row]
         for row in r.allowed]
    fig.add_trace(go.Heatmap(z=z, x=[f"k{j}" for j in range(r.tokens)], y=[f"q{i}" for i in range(r.tokens)],
                             xgap=2, ygap=2, hoverinfo="skip", **dict(category_scale(MASK_CELLS), showscale=False)),
                  row=1, col=1)
    ran = r.ran
    names = [short_method(row["method"]) for row in ran]
    outcomes = list(OUTCOME_CELLS)
    values = [row["masked_rows"][0] for row in ran]
    z = [[outcomes.index(outcome(row))] * len(vals) for row, vals in zip(ran, values, strict=True)]
    columns = [f"out[{c}]" for c in range(len(values[0]))]
    fig.add_trace(go.Heatmap(z=z, x=columns, y=names, xgap=2, ygap=2, hoverinfo="skip",
                             **dict(category_scale(OUTCOME_CELLS), showscale=False)), row=1, col=2)
    cells = [(columns[c], name, _short(v), OUTCOME_CELLS[outcome(row)])
             for row, name, vals in zip(ran, names, values, strict=True) for c, v in enumerate(vals)]
    fig.add_trace(cell_text(*map(list, zip(*cells, strict=True)), size=12), row=1, col=2)
    fig.update_yaxes(autorange="reversed")
    fig = base_layout(fig, height=110 + 30 * len(names))
    fig.update_layout(margin_t=50)
    return fig


def legend_colors() -> dict[str, str]:
    """The figure's colours by meaning, for the legend chips under it."""
    return {"may attend": MASK_CELLS["may attend"], "masked": MASK_CELLS["masked"],
            "row with no key / NaN": COLORS["error"], "zeros": OUTCOME_CELLS["zeros"],
            "other numbers": OUTCOME_CELLS["numbers"]}


def _short(x: float) -> str:
    return "nan" if math.isnan(x) else "0" if x == 0 else f"{x:.2f}"


def memory_figure(r: MemoryResult) -> go.Figure:
    """Bytes against T (log-log): the (B, H, T, T) scores in float32 and bfloat16 against what the fused CPU flash
    kernel returns (output and logsumexp), all read from meta tensors."""
    fig = go.Figure()
    for dtype, dash in (("float32", "solid"), ("bfloat16", "dash")):
        rows = r.by_dtype[dtype]
        for key, color, name in (("scores", COLORS["error"], "T×T scores"),
                                 ("fused", COLORS["activation"], "fused kernel: out + logsumexp")):
            fig.add_scatter(x=list(r.lengths), y=[row[key] / 2**30 for row in rows], mode="lines+markers",
                            name=f"{name}, {dtype}", line=dict(color=color, dash=dash),
                            hovertemplate=f"{name}, {dtype}, T %{{x}}: %{{y:.3g}} GiB<extra></extra>")
    fig.update_xaxes(type="log", title_text=f"sequence length T (B = {r.batch}, H = {r.heads}, d = {r.head_dim})",
                     tickvals=list(r.lengths),
                     ticktext=[f"{t // 1024}k" if t >= 1024 else str(t) for t in r.lengths])
    fig.update_yaxes(type="log", title_text="GiB", dtick=1)
    return base_layout(fig, height=380)
