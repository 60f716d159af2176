"""The tiny model's figure: its loss and held-out scores over the run, and each head's attention map at one
checkpoint, with the cells the task needs outlined.

Built as one dict (axes placed by hand, no make_subplots and no add_shape per cell): plotly validates a dict
once, where a figure grown call by call is validated at every call, 5x slower, and a step slider draws it anew.
"""

import math

import plotly.graph_objects as go
from plotly.colors import sequential

from demos.style import COLORS, REFERENCE, SERIES, base_layout
from demos.transformers.tiny_model import VOCAB, TinyRun, head_share, pct

HEAD_COLORS = (SERIES[1], SERIES[4], SERIES[5], SERIES[6])  # orange, purple, brown, pink: apart from loss and score
LOSS_COLOR, ACCURACY_COLOR = COLORS["parameter"], COLORS["activation"]
VIRIDIS = [[i / (len(sequential.Viridis) - 1), c] for i, c in enumerate(sequential.Viridis)]
CURVES_WIDTH, GAP = 0.3, 0.07  # share of the width: the two curve panels, and the gap before the maps
MAPS_END = 0.93  # the colour bar sits right of the maps


def training_figure(run: TinyRun, index: int) -> go.Figure:
    """Left: the loss at every step and the held-out scores at every checkpoint, the shown checkpoint marked;
    right: one heatmap per head of where the output positions look at that checkpoint."""
    c = run.checkpoints[index]
    data, layout = _curves(run, c.step)
    start, width = CURVES_WIDTH + GAP, (MAPS_END - CURVES_WIDTH - GAP) / run.heads
    for h in range(run.heads):
        domain = [start + h * width + (0.02 if h else 0), start + (h + 1) * width]
        maps, axes = _head_map(run, index, h, domain)
        data += maps
        for name, value in axes.items():
            layout[name] = layout[name] + value if name in ("shapes", "annotations") else value
    title = f"{run.task.capitalize()}, step {c.step} of {run.steps}: {pct(c.token_accuracy)} of held-out tokens right"
    fig = base_layout(go.Figure(dict(data=data, layout=layout)), title=title, height=480)
    return fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, xanchor="left", x=0),
                             margin=dict(b=20, t=70 if run.heads > 2 else 50))  # room for two-line map titles


def _title(text: str, x: float, y: float) -> dict:
    """A panel's title, centred over it (as make_subplots writes one)."""
    return dict(text=text, x=x, y=y, xref="paper", yref="paper", xanchor="center", yanchor="bottom",
                showarrow=False)


def _curves(run: TinyRun, step: int) -> tuple[list[dict], dict]:
    """The loss panel (x, y: log scale, with the loss of uniform guessing) over the scores panel (x2, y2)."""
    marks = [c.step for c in run.checkpoints]
    data = [dict(type="scatter", x=list(range(1, len(run.losses) + 1)), y=list(run.losses), name="training loss",
                 mode="lines", line=dict(color=LOSS_COLOR), xaxis="x", yaxis="y",
                 hovertemplate="step %{x}: loss %{y:.3g}<extra></extra>"),
            dict(type="scatter", x=marks, y=[c.token_accuracy for c in run.checkpoints], name="held-out accuracy",
                 mode="lines+markers", line=dict(color=ACCURACY_COLOR, width=3), xaxis="x2", yaxis="y2",
                 hovertemplate="step %{x}: %{y:.1%} of held-out tokens right<extra></extra>")]
    data += [dict(type="scatter", x=marks, y=[c.head_mass[h] for c in run.checkpoints], xaxis="x2", yaxis="y2",
                  name=f"head {h + 1}: share on the pattern", mode="lines+markers", marker=dict(size=5),
                  line=dict(color=HEAD_COLORS[h], dash="dot"),
                  hovertemplate=f"step %{{x}}: head {h + 1} puts %{{y:.1%}} on the pattern<extra></extra>")
             for h in range(run.heads)]
    chance = math.log(VOCAB)  # the loss of a model that spreads its guess evenly over the tokens
    panel = [0, CURVES_WIDTH]
    layout = dict(
        xaxis=dict(domain=panel, range=[0, run.steps], anchor="y", matches="x2", showticklabels=False),
        yaxis=dict(domain=[0.58, 1], type="log", anchor="x"),
        xaxis2=dict(domain=panel, range=[0, run.steps], anchor="y2", title=dict(text="step")),
        yaxis2=dict(domain=[0, 0.42], range=[-0.03, 1.03], tickformat=".0%", anchor="x2"),
        shapes=[dict(type="line", x0=0, x1=1, xref="x domain", y0=chance, y1=chance, yref="y",
                     line=dict(color=REFERENCE, dash="dash", width=1)),
                *(dict(type="line", x0=step, x1=step, y0=0, y1=1, xref=x, yref=f"{y} domain",
                       line=dict(color=REFERENCE, width=2)) for x, y in (("x", "y"), ("x2", "y2")))],
        annotations=[_title("training loss (log)", CURVES_WIDTH / 2, 1),
                     _title("held-out scores", CURVES_WIDTH / 2, 0.42),
                     dict(text=f"guessing: ln {VOCAB}", x=1, xref="x domain", y=math.log10(chance), yref="y",
                          xanchor="right", yanchor="bottom", showarrow=False)],  # the theme's text colour
    )
    return data, layout


def _head_map(run: TinyRun, index: int, h: int, domain: list[float]) -> tuple[list[dict], dict]:
    """Head h's attention from each output position (rows) to each of the 2n positions (columns), averaged over
    the held-out sequences; the expected cell of every row outlined, the blanks right of a dotted line."""
    n, c = run.length, run.checkpoints[index]
    x, y = f"x{3 + h}", f"y{3 + h}"
    heatmap = dict(type="heatmap", z=[list(row) for row in c.maps[h]], x=list(range(2 * n)), y=list(range(n)),
                   zmin=0, zmax=1, colorscale=VIRIDIS, showscale=h == run.heads - 1, xaxis=x, yaxis=y,
                   colorbar=dict(title=dict(text="weight"), thickness=12, len=0.9, x=MAPS_END + 0.01),
                   hovertemplate=f"head {h + 1}: output %{{y}} reads position %{{x}} with weight %{{z:.3f}}"
                                 "<extra></extra>")
    cells = [dict(type="rect", x0=s - 0.5, x1=s + 0.5, y0=row - 0.5, y1=row + 0.5, xref=x, yref=y,
                  line=dict(color=REFERENCE, width=2)) for row, s in enumerate(run.expected)]
    divider = dict(type="line", x0=n - 0.5, x1=n - 0.5, y0=0, y1=1, xref=x, yref=f"{y} domain",
                   line=dict(color=REFERENCE, width=1, dash="dot"))
    axes = {
        f"xaxis{3 + h}": dict(domain=domain, anchor=y, tickvals=list(range(0, 2 * n, 2 if run.heads <= 2 else 4)),
                              tickangle=0,
                              title=dict(text=f"tokens 0–{n - 1} | blanks" if h == 0 else "")),
        f"yaxis{3 + h}": dict(domain=[0, 1], anchor=x, autorange="reversed", dtick=1, showticklabels=h == 0,
                              title=dict(text="output position" if h == 0 else "")),
        "shapes": [*cells, divider],
        # the same words at every head count; a narrow map (4 heads) takes them on two lines
        "annotations": [_title(head_share(h + 1, c.head_mass[h]).replace(": ", ":<br>" if run.heads > 2 else ": "),
                               sum(domain) / 2, 1)],
    }
    return [heatmap], axes
