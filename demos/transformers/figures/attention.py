"""Figures of the Attention view: the steps as heatmaps, the scaling curves, the fully masked rows, the T×T memory.

Colours: values on a diverging scale (blue below zero, red above), softmax weights on a blue scale from 0 to 1, a
masked score left blank (it is −∞); scaled attention in the parameter blue, unscaled in the error red, a uniform
softmax as the grey reference; the score matrix in red (error: what runs out), the fused kernel in green."""

import math

import plotly.graph_objects as go

from demos.style import COLORS, REFERENCE, base_layout, category_scale, cell_text
from demos.transformers.attention import MaskedRowsResult, MemoryResult, ScalingResult, StepsResult, outcome

VALUES = "RdBu_r"  # diverging: the sign of a value reads at a glance
WEIGHTS = "Blues"


def _finite(rows) -> list[list[float | None]]:
    """Rows for a heatmap: −∞ (a masked score) as a gap."""
    return [[None if math.isinf(x) else round(x, 4) for x in row] for row in rows]


def grid(rows: int, cols: int, titles: list[str], gap_x: float = 0.05, gap_y: float = 0.16,
         widths: list[float] | None = None, x: dict | None = None, y: dict | None = None) -> dict:
    """Layout entries of a rows×cols grid of subplots (axes xaxis, xaxis2, ... and a title above each), built as
    plain dicts: plotly's make_subplots and update_*axes validate every axis object in Python, which cost more
    than the figure's data here. `widths`: the columns' shares of the width; `x`, `y`: settings of every axis."""
    shares = widths or [1] * cols
    widths = [(1 - gap_x * (cols - 1)) * w / sum(shares) for w in shares]
    height = (1 - gap_y * (rows - 1)) / rows
    layout, titles_out = {}, []
    for i, title in enumerate(titles):
        row, col = divmod(i, cols)
        x0, y1 = sum(widths[:col]) + col * gap_x, 1 - row * (height + gap_y)
        n = axis_suffix(i)
        layout[f"xaxis{n}"] = dict(x or {}, domain=[x0, x0 + widths[col]], anchor=f"y{n}", automargin=True)
        layout[f"yaxis{n}"] = dict(y or {}, domain=[y1 - height, y1], anchor=f"x{n}", automargin=True)
        titles_out.append(dict(text=title, x=x0 + widths[col] / 2, y=y1, xref="paper", yref="paper",
                               xanchor="center", yanchor="bottom", showarrow=False, font=dict(size=16)))
    return dict(layout, annotations=titles_out)


def axis_suffix(i: int) -> str:
    """The i-th subplot's axis suffix: '' for the first, then '2', '3', ..."""
    return "" if i == 0 else str(i + 1)


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
    traces = []
    for i, (name, _, scale) in enumerate(panels):
        z = _finite(r.matrices[name])
        limit = 1.0 if scale == WEIGHTS else max((abs(x) for row in z for x in row if x is not None), default=1.0)
        n = axis_suffix(i)
        traces.append(dict(
            type="heatmap", z=z, colorscale=scale, zmin=0 if scale == WEIGHTS else -limit, zmax=limit,
            showscale=name == "weights", colorbar=dict(title=dict(text="weight"), len=0.42, y=0.2, thickness=12),
            hovertemplate=f"{name}[%{{y}}, %{{x}}] = %{{z:.3g}}<extra></extra>", xgap=1, ygap=1, xaxis=f"x{n}",
            yaxis=f"y{n}"))
    hidden = dict(showticklabels=False)
    layout = grid(2, 4, [title for _, title, _ in panels], x=hidden, y=dict(hidden, autorange="reversed"))
    layout["yaxis"]["title"] = dict(text="token")
    layout["yaxis5"]["title"] = dict(text="query")
    for n in (5, 6, 7):
        layout[f"xaxis{n}"]["title"] = dict(text="key")
    return go.Figure(dict(data=traces, layout=dict(layout, height=470, margin=dict(l=10, r=10, t=40, b=10))))


def scaling_figure(r: ScalingResult) -> go.Figure:
    """Entropy, largest weight, the gradient with respect to q (the same tensor both ways) and the share of keys
    left with almost no gradient against d_k (log axis), with and without the 1/√d_k; the uniform softmax's entropy
    and weight as grey references."""
    titles = ["softmax entropy (nats)", "largest weight (mean over queries)",
              "‖∂loss/∂q‖ per query (same q both ways)", "keys with < 1/1000 of the top score gradient"]
    ticks = r.d_k[::2] if len(r.d_k) > 7 else r.d_k
    layout = grid(2, 2, titles, gap_x=0.1, gap_y=0.26, x=dict(type="log", title=dict(text="d_k"),
                                                              tickvals=list(ticks), ticktext=[str(d) for d in ticks]))
    for top_row in ("xaxis", "xaxis2"):  # d_k is named under the bottom row: the titles below stay clear of it
        layout[top_row] = {k: v for k, v in layout[top_row].items() if k != "title"}
    layout["yaxis3"].update(type="log", nticks=4, tickformat=".2g")  # a few readable ticks on a short log range
    layout["yaxis4"].update(range=[0, 1], tickformat=".0%")
    traces = []
    for label, color, name in (("scaled", COLORS["parameter"], "QKᵀ/√d_k"), ("unscaled", COLORS["error"], "QKᵀ")):
        for i, stat in enumerate(("entropy", "top_weight", "grad_q", "starved")):
            traces.append(dict(type="scatter", x=list(r.d_k), y=list(r.series(label, stat)), mode="lines+markers",
                               name=name, line=dict(color=color), legendgroup=label, showlegend=i == 0,
                               xaxis=f"x{axis_suffix(i)}", yaxis=f"y{axis_suffix(i)}",
                               hovertemplate=f"{name}, d_k %{{x}}: %{{y:.3g}}<extra></extra>"))
    for i, value in ((0, math.log(r.keys)), (1, 1 / r.keys)):
        traces.append(dict(type="scatter", x=[r.d_k[0], r.d_k[-1]], y=[value, value], mode="lines",
                           name=f"uniform over {r.keys} keys", line=dict(color=REFERENCE, dash="dot"),
                           legendgroup="uniform", showlegend=i == 0, xaxis=f"x{axis_suffix(i)}",
                           yaxis=f"y{axis_suffix(i)}", hovertemplate=f"uniform: {value:.3g}<extra></extra>"))
    legend = dict(orientation="h", yanchor="bottom", y=1.08, xanchor="left", x=0)
    return go.Figure(dict(data=traces, layout=dict(layout, height=600, legend=legend,
                                                   margin=dict(l=10, r=10, t=70, b=10))))


MASK_CELLS = {"may attend": COLORS["activation"], "masked": COLORS["idle"], "row with no key": COLORS["error"]}
OUTCOME_CELLS = {"NaN": COLORS["error"], "zeros": COLORS["idle"], "numbers": COLORS["data"]}


SHORT_LABELS = {"by hand, masked_fill(-inf)": "by hand, −∞", "by hand, masked_fill(finfo.min)": "by hand, finfo.min",
                "by hand, padding queries see themselves": "by hand, padding sees itself",
                "SDPA, bool mask (SDPA picks)": "SDPA picks, bool"}


def short_method(method: str) -> str:
    """A method's name as a row label: 'SDPA FLASH_ATTENTION, -inf float mask' -> 'FLASH, −∞ float'."""
    if method in SHORT_LABELS:
        return SHORT_LABELS[method]
    return method.removeprefix("SDPA ").replace("_ATTENTION", "").replace(" mask", "").replace("-inf", "−∞")


def masked_rows_figure(r: MaskedRowsResult) -> go.Figure:
    """Left: the left-padded causal mask, rows with no allowed key in red. Right: each method that ran, the first
    fully masked query's output row (its d values), coloured by what came out: NaN, zeros or numbers. The colours
    are named by a legend beside the figure (ui.legend of legend_colors())."""
    titles = [f"mask: {r.pad} padding token{'s' if r.pad > 1 else ''} first, causal",
              "output of query 0, which may attend to no key"]
    layout = grid(1, 2, titles, gap_x=0.2, widths=[0.32, 0.68], y=dict(autorange="reversed"))
    kinds, outcomes = list(MASK_CELLS), list(OUTCOME_CELLS)
    mask = [[kinds.index("may attend" if ok else "row with no key" if not any(row) else "masked") for ok in row]
            for row in r.allowed]
    ran = r.ran
    names = [short_method(row["method"]) for row in ran]
    values = [row["masked_rows"][0] for row in ran]
    columns = [f"out[{c}]" for c in range(len(values[0]))]
    cells = [(columns[c], name, _short(v), OUTCOME_CELLS[outcome(row)])
             for row, name, vals in zip(ran, names, values, strict=True) for c, v in enumerate(vals)]
    text = cell_text(*map(list, zip(*cells, strict=True)), size=12)
    text.update(xaxis="x2", yaxis="y2")
    traces = [
        dict(type="heatmap", z=mask, x=[f"k{j}" for j in range(r.tokens)], y=[f"q{i}" for i in range(r.tokens)],
             xgap=2, ygap=2, hoverinfo="skip", **dict(category_scale(MASK_CELLS), showscale=False)),
        dict(type="heatmap", z=[[outcomes.index(outcome(row))] * len(vals) for row, vals in zip(ran, values,
                                                                                           strict=True)],
             x=columns, y=names, xgap=2, ygap=2, hoverinfo="skip", xaxis="x2", yaxis="y2",
             **dict(category_scale(OUTCOME_CELLS), showscale=False)),
        text,
    ]
    return go.Figure(dict(data=traces, layout=dict(layout, height=110 + 30 * len(names),
                                                   margin=dict(l=10, r=10, t=50, b=10))))


def legend_colors() -> dict[str, str]:
    """The figure's colours by meaning, for the legend chips under it."""
    assert MASK_CELLS["masked"] == OUTCOME_CELLS["zeros"] and MASK_CELLS["row with no key"] == OUTCOME_CELLS["NaN"]
    return {"may attend": MASK_CELLS["may attend"], "masked / output zeros": MASK_CELLS["masked"],
            "row with no key / output NaN": MASK_CELLS["row with no key"],
            "output other numbers": OUTCOME_CELLS["numbers"]}


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
