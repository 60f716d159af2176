"""Figures for the debugging page: loss curves of the seed runs, leak growth, overfit curve, profiler Gantt."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from demos.debugging.leaks import LeakResult
from demos.debugging.model_tests import BUG_LABELS, TestReport
from demos.debugging.profiling import PHASES, ProfileResult
from demos.debugging.repro import SeedResult
from demos.style import COLORS, SERIES, base_layout


def layout(fig: go.Figure, title: str | None = None, height: int = 380) -> go.Figure:
    """The shared layout with the legend under the plot, so long legends never cover the title."""
    base_layout(fig, title=title, height=height + 60)
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.22, xanchor="left", x=0),
                      margin=dict(b=20))
    return fig

PHASE_COLORS = {"forward": COLORS["activation"], "backward": COLORS["gradient"], "optimizer": COLORS["optimizer_state"],
                "": COLORS["idle"]}


def seed_figure(r: SeedResult) -> go.Figure:
    """Four runs' losses: the unseeded pair apart, the seeded pair on top of each other."""
    fig = go.Figure()
    styles = (dict(color=SERIES[0]), dict(color=SERIES[1]), dict(color=SERIES[2], width=6),
              dict(color=SERIES[3], dash="dot", width=2))
    for run, style in zip(r.runs, styles, strict=True):
        fig.add_scatter(y=list(run.losses), x=list(range(1, len(run.losses) + 1)), name=run.label, line=style,
                        mode="lines")
    fig.update_xaxes(title="step")
    fig.update_yaxes(title="training loss")
    return layout(fig, title="Same code, four runs", height=360)


def leak_figure(r: LeakResult) -> go.Figure:
    """Four panels: each leak pattern (red) against its fix (green), measured after every step."""
    series = (r.nodes, r.saved_bytes, r.outputs, r.hooks)
    fig = make_subplots(rows=2, cols=2, subplot_titles=[s.name for s in series], vertical_spacing=0.2)
    steps = list(range(1, r.steps + 1))
    for i, s in enumerate(series):
        row, col = i // 2 + 1, i % 2 + 1
        fig.add_scatter(x=steps, y=list(s.leak), name="trap", line=dict(color=COLORS["error"]),
                        legendgroup="trap", showlegend=i == 0, row=row, col=col)
        fig.add_scatter(x=steps, y=list(s.fixed), name="fix", line=dict(color=COLORS["activation"]),
                        legendgroup="fix", showlegend=i == 0, row=row, col=col)
        fig.update_yaxes(title_text=s.unit, row=row, col=col, rangemode="tozero")
        fig.update_xaxes(title_text="step", row=row, col=col)
    fig.update_annotations(font_size=13)
    return layout(fig, height=560)


def overfit_figure(good: TestReport, bad: TestReport) -> go.Figure:
    """Loss of the overfit-one-batch test for the correct model and the one with a planted bug, log scale."""
    fig = go.Figure()
    for rep, label, colour in ((good, "correct model", COLORS["activation"]),
                               (bad, BUG_LABELS[bad.bug], COLORS["error"])):
        fig.add_scatter(y=list(rep.overfit_losses), name=label, line=dict(color=colour))
    fig.update_yaxes(type="log", title="loss on the one batch (log)", exponentformat="power")
    fig.update_xaxes(title="Adam step")
    return layout(fig, title="Overfit one batch", height=320)


def gantt_figure(r: ProfileResult) -> go.Figure:
    """Every profiled op as a bar on its nesting lane; colour = the record_function phase it ran in."""
    fig = go.Figure()
    for phase in (*PHASES, ""):
        spans = [s for s in r.spans if s.phase == phase]
        if not spans:
            continue
        fig.add_bar(
            base=[s.start_us for s in spans], x=[s.end_us - s.start_us for s in spans],
            y=[f"depth {s.depth}" for s in spans], orientation="h", name=phase or "outside the labels",
            marker=dict(color=PHASE_COLORS[phase], line=dict(width=0.5, color="white")),
            customdata=[[s.name, s.end_us - s.start_us] for s in spans],
            hovertemplate="%{customdata[0]}<br>%{base:.0f} µs, %{customdata[1]:.0f} µs long<extra></extra>",
        )
    depths = sorted({s.depth for s in r.spans})
    fig.update_yaxes(categoryorder="array", categoryarray=[f"depth {d}" for d in reversed(depths)],
                     title="depth 0 = phase label")  # short: whole beside the presenter-height plot
    fig.update_xaxes(title="µs since the step started")
    fig.update_layout(barmode="overlay")
    return layout(fig, title="Op timeline of one training step (CPU)", height=380)


def nan_graph(r) -> str:
    """DOT of the NaN model: modules in call order, the first non-finite one in red with the op anomaly mode named."""
    error, ok = COLORS["error"], COLORS["activation"]
    lines = ["digraph nan {", "rankdir=LR;", 'node [shape=box, style="rounded,filled", fontname="Helvetica"];',
             f'x [label="x\\n(6, 8), row 0 all zeros", fillcolor="#e8f7fa", color="{COLORS["data"]}"];']
    prev = "x"
    for row in r.hook_rows:
        bad = not row.finite
        extra = f"\\n{row.nonfinite}/{row.numel} not finite" if bad else "\\nfinite"
        if bad and r.origin is not None:
            extra += f"\\nfirst non-finite op: {r.origin.op}"
        if bad and r.node:
            extra += f"\\nanomaly mode: {r.node} → nan"
        colour = error if bad else ok
        fill = "#fde8e8" if bad else "#eaf6ea"
        lines.append(f'{row.module} [label="{row.module} ({row.kind}){extra}", color="{colour}", fillcolor="{fill}"];')
        lines.append(f"{prev} -> {row.module};")
        prev = row.module
    lines.append(f'loss [label="loss = mean\\n{r.loss:.4g}", shape=ellipse, fillcolor="white"];')
    lines.append(f"{prev} -> loss;")
    lines.append("}")
    return "\n".join(lines)
