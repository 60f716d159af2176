"""Figures of the distributed page, built from run results (plotly) and shapes (graphviz DOT). No streamlit.

Colour legend: a block's colour is the rank its value came from (demos.style.SERIES, rank 0 first); a value
mixed from every rank by a reduction is pink (communication). Timelines: backward compute is green (activation),
bucket all_reduce is pink (communication), pipeline forward is green, backward is orange (gradient), idle is grey.
"""

import html

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from demos.distributed import views
from demos.distributed.calculators import STAGE_NAMES, WORLD_SIZES, human_bytes
from demos.distributed.models import ENV_KEYS
from demos.distributed.pipeline import Schedule
from demos.style import COLORS, REFERENCE, SERIES, badge, base_layout, dot_fill, legend_on_top, text_on

_BLOCK = 26
# Series label -> palette concept, one source for a chart's legend and the colour chips the page shows above it.
MEMORY_LEGEND = {"parameters": "parameter", "gradients": "gradient", "optimizer state": "optimizer_state"}
DDP_LEGEND = {"layer backward": "activation", "bucket all_reduce": "communication"}
PIPELINE_LEGEND = {"forward": "activation", "backward": "gradient"}


def collective_legend(world: int) -> dict[str, str]:
    """Chips for the collective blocks: each rank's own colour, pink for a value reduced from every rank, grey for
    an undefined (scratch) value."""
    return {**{f"from rank {r}": SERIES[r % len(SERIES)] for r in range(world)},
            "reduced from every rank": COLORS["communication"], "undefined (non-root scratch)": COLORS["idle"]}


def _rank_color(origin) -> str:
    if origin == views.SCRATCH:
        return COLORS["idle"]
    return COLORS["communication"] if origin is None else SERIES[origin % len(SERIES)]


def collective_figure(view: dict) -> go.Figure:
    """Each rank's tensor before (left) and after (right) the collective, one coloured block per element."""
    rows = view["rows"]
    width_before = max([len(r["before"]) for r in rows] + [1])
    gap = 2.5
    xs, ys, colors, texts = [], [], [], []
    for r in rows:
        y = -r["rank"]
        for j, v in enumerate(r["before"]):
            xs.append(j), ys.append(y), colors.append(_rank_color(r["rank"])), texts.append(f"{v:g}")
        for j, (v, origin) in enumerate(zip(r["after"], r["origins"], strict=False)):
            xs.append(width_before + gap + j), ys.append(y), colors.append(_rank_color(origin))
            texts.append("?" if origin == views.SCRATCH else f"{v:g}")  # gloo's leftover is not a result
    fig = go.Figure(go.Scatter(
        x=xs, y=ys, mode="markers+text", text=texts, textfont=dict(color=[text_on(c) for c in colors], size=12),
        hoverinfo="text", showlegend=False,
        marker=dict(symbol="square", size=_BLOCK, color=colors, line=dict(width=1, color="white")),
    ))
    width_after = max([len(r["after"]) for r in rows] + [1])
    fig.add_annotation(x=(width_before - 1) / 2, y=0.8, text="<b>before</b>", showarrow=False)
    fig.add_annotation(x=width_before + gap + (width_after - 1) / 2, y=0.8, text="<b>after</b>", showarrow=False)
    fig.add_annotation(x=width_before + gap / 2 - 0.5, y=-(len(rows) - 1) / 2, text=f"<b>{view['op']}</b>",
                       showarrow=False, font=dict(size=13))
    for r in rows:
        if r["error"]:
            fig.add_annotation(x=width_before + gap, y=-r["rank"], text=html.escape(r["error"][:60]), showarrow=False,
                               xanchor="left", **badge("error"))
    fig.update_yaxes(tickvals=[-r["rank"] for r in rows], ticktext=[f"rank {r['rank']}" for r in rows],
                     range=[-len(rows) + 0.4, 1.2], showgrid=False, zeroline=False)
    fig.update_xaxes(visible=False, range=[-1, width_before + gap + width_after + 0.5])
    return base_layout(fig, height=110 + 60 * len(rows))


def ring_figure(rows: list[dict]) -> go.Figure:
    """Bytes each rank sent in the ring all_reduce, next to the message size and the 2(N-1)/N formula."""
    ranks = [f"rank {r['rank']}" for r in rows]
    fig = go.Figure()
    fig.add_bar(x=ranks, y=[r["message bytes"] for r in rows], name="message size", marker_color=COLORS["idle"])
    fig.add_bar(x=ranks, y=[r["sent bytes (measured)"] for r in rows], name="sent (measured)",
                marker_color=COLORS["communication"])
    fig.add_scatter(x=ranks, y=[r["2(N-1)/N × size"] for r in rows], name="2(N-1)/N × size", mode="markers",
                    marker=dict(symbol="line-ew-open", size=40, color=REFERENCE, line=dict(width=3)))
    fig.update_yaxes(title="bytes")
    return base_layout(fig, height=300)


def ddp_timeline_figure(view: dict, picks: tuple[int, ...]) -> go.Figure:
    """Backward of each layer (green) and each bucket's all_reduce (pink), ms since backward started."""
    titles = [f"iteration {i + 1}" + (" (buckets not yet rebuilt)" if i == 0 else " (buckets rebuilt)") for i in picks]
    fig = make_subplots(rows=len(picks), cols=1, subplot_titles=titles, vertical_spacing=0.24)
    for row, i in enumerate(picks, 1):
        it = view["iterations"][i]
        labels = [f"backward {layer['name']}" for layer in it["layers"]]
        backward, reduce = DDP_LEGEND.items()
        fig.add_bar(y=labels, x=[max(layer["end"] - layer["start"], 0.02) for layer in it["layers"]],
                    base=[layer["start"] for layer in it["layers"]], orientation="h", marker_color=COLORS[backward[1]],
                    name=backward[0], showlegend=row == 1, row=row, col=1,
                    hovertemplate="%{y}: %{base:.2f} → %{x:.2f} ms long<extra></extra>")
        for b in it["buckets"]:
            label = f"bucket {b['index']} ({human_bytes(b['bytes'])})"
            fig.add_bar(y=[label], x=[max(b["end"] - b["start"], 0.02)], base=[b["start"]], orientation="h",
                        marker_color=COLORS[reduce[1]], name=reduce[0],
                        showlegend=row == 1 and b is it["buckets"][0], row=row, col=1,
                        hovertext=", ".join(b["params"]), hovertemplate="%{hovertext}<extra></extra>")
        fig.add_vline(x=it["backward_end"], line_dash="dot", line_color=COLORS["idle"], row=row, col=1)
        fig.update_yaxes(autorange="reversed", row=row, col=1)
        fig.update_xaxes(title="ms since loss.backward() began", row=row, col=1)
    fig.update_layout(barmode="overlay")
    return legend_on_top(base_layout(fig, height=260 * len(picks) + 60))


def sampler_figure(view: dict, label: str) -> go.Figure:
    """The indices each rank reads in one epoch; a repeated (padding) index is outlined in red."""
    data = view["views"][label]
    seen, xs, ys, colors, texts, outline = set(), [], [], [], [], []
    for r, indices in enumerate(data["indices"]):
        for j, idx in enumerate(indices):
            xs.append(j), ys.append(-r), colors.append(SERIES[r % len(SERIES)]), texts.append(str(idx))
            outline.append(COLORS["error"] if idx in seen else "white")
            seen.add(idx)
    fig = go.Figure(go.Scatter(
        x=xs, y=ys, mode="markers+text", text=texts, textfont=dict(color=[text_on(c) for c in colors], size=12),
        showlegend=False,
        marker=dict(symbol="square", size=_BLOCK, color=colors, line=dict(width=3, color=outline)), hoverinfo="text",
    ))
    n = len(data["indices"])
    fig.update_yaxes(tickvals=[-r for r in range(n)], ticktext=[f"rank {r}" for r in range(n)], range=[-n + 0.4, 0.6],
                     showgrid=False, zeroline=False)
    fig.update_xaxes(title="position in the rank's epoch", showgrid=False, range=[-0.7, max(len(xs) // max(n, 1), 1)])
    return base_layout(fig, title=label, height=110 + 50 * n)


def fsdp_shard_figure(view: dict) -> go.Figure:
    """Rows of dim 0 of each parameter held by each rank (stacked): together they are the whole parameter."""
    fig = go.Figure()
    world = len(view["memory"])
    for r in range(world):
        fig.add_bar(y=view["names"], x=[view["shards"][n][r]["local"][0] if view["shards"][n][r]["local"] else 0
                                        for n in view["names"]],
                    orientation="h", name=f"rank {r}", marker_color=SERIES[r % len(SERIES)],
                    hovertemplate="%{y}: %{x} rows<extra></extra>")
    fig.update_layout(barmode="stack")
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title="rows of dim 0 held (FSDP2 shards dim 0 with torch.chunk)")
    fig = base_layout(fig, height=120 + 28 * len(view["names"]))
    fig.update_layout(legend=dict(traceorder="normal"))
    return fig


def memory_figure(view: dict) -> go.Figure:
    """Measured bytes per rank: parameters, gradients, Adam state, FSDP beside a DDP replica."""
    fig = go.Figure()
    labels = [f"rank {r} {kind}" for r in range(len(view["memory"])) for kind in ("FSDP", "DDP")]
    for (name, concept), cat in zip(MEMORY_LEGEND.items(), ("parameters", "gradients", "optimizer_state"), strict=True):
        ys = [m[kind.lower()][cat] for m in view["memory"] for kind in ("FSDP", "DDP")]
        fig.add_bar(x=labels, y=ys, name=name, marker_color=COLORS[concept],
                    hovertemplate="%{y} bytes<extra></extra>")
    fig.update_layout(barmode="stack")
    fig.update_yaxes(title="bytes on this rank (measured from local tensors)")
    return base_layout(fig, height=340)


def _byte_unit(largest: float) -> tuple[str, int]:
    """The binary unit that shows `largest` as a number of at least 1."""
    for name, power in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if largest >= 2**power:
            return name, 2**power
    return "B", 1


def zero_figure(rows: list[dict], marker_world: int) -> go.Figure:
    """Bytes per rank against world size for DDP and ZeRO stages 1-3 (log axes, binary units)."""
    fig = go.Figure()
    unit, scale = _byte_unit(max(r["bytes"] for r in rows))
    palette = (COLORS["idle"], COLORS["optimizer_state"], COLORS["gradient"], COLORS["parameter"])
    for stage, name in STAGE_NAMES.items():
        pts = [r for r in rows if r["stage"] == stage]
        fig.add_scatter(x=[r["world"] for r in pts], y=[r["bytes"] / scale for r in pts], name=name,
                        mode="lines+markers", line=dict(color=palette[stage]),
                        hovertemplate=f"%{{x}} ranks: %{{y:.3f}} {unit} per rank<extra></extra>")
    fig.add_vline(x=marker_world, line_dash="dot", line_color=COLORS["idle"])
    fig.update_xaxes(type="log", title="ranks", tickvals=list(WORLD_SIZES))
    values = [r["bytes"] / scale for r in rows]
    ticks = [2.0**k for k in range(-12, 40) if min(values) / 2 <= 2.0**k <= max(values) * 2]
    fig.update_yaxes(type="log", title=f"{unit} per rank (params + grads + optimizer state)", tickvals=ticks,
                     ticktext=[f"{t:g}" for t in ticks], minor=dict(showgrid=False))
    return legend_on_top(base_layout(fig, height=380), top=70)


def pipeline_figure(schedules: list[Schedule]) -> go.Figure:
    """Each stage's forwards (green) and backwards (orange) over time; the gaps are the bubble."""
    fig = make_subplots(rows=len(schedules), cols=1, vertical_spacing=0.26,
                        subplot_titles=[f"{s.kind}: bubble {s.bubble:.3f} (formula {s.formula:.3f}), "
                                        f"peak micro-batches in flight {max(s.peak_in_flight)}" for s in schedules])
    for row, s in enumerate(schedules, 1):
        for what, (name, concept) in zip("FB", PIPELINE_LEGEND.items(), strict=True):
            tasks = [t for t in s.tasks if t[2] == what]
            fig.add_bar(y=[f"stage {t[0]}" for t in tasks], x=[1] * len(tasks), base=[t[1] for t in tasks],
                        orientation="h", marker=dict(color=COLORS[concept], line=dict(color="white", width=1)),
                        text=[f"{what}{t[3]}" for t in tasks], textposition="inside", insidetextanchor="middle",
                        name=name, showlegend=row == 1, row=row, col=1)
        fig.update_yaxes(autorange="reversed", row=row, col=1)
        fig.update_xaxes(title="time slot (one forward or backward of one micro-batch)", range=[0, s.makespan],
                         row=row, col=1)
    fig.update_layout(barmode="overlay")  # a stage's forwards and backwards share its row
    return legend_on_top(base_layout(fig, height=(100 + 34 * schedules[0].stages) * len(schedules) + 60))


def tp_dot(view: dict, world: int) -> str:
    """Column- and row-parallel Linear as graphviz: which slice of W each rank holds and the one collective."""
    first = view["ranks"][0]
    col, row = first["column"], first["row"]
    lines = ["digraph TP {", "rankdir=LR; node [shape=box, style=filled, fontname=Helvetica];",
             f'x [label="x (full, every rank)", {dot_fill(COLORS["data"])}];']
    for r in range(world):
        c = SERIES[r % len(SERIES)]
        lines.append(f'c{r} [label="rank {r}: W[{r}] rows\\n{tuple(col["weight_local"])} → y[:, {r}-th slice]", '
                     f'{dot_fill(c)}];')
        lines.append(f'r{r} [label="rank {r}: W[:, {r}] cols\\n{tuple(row["weight_local"])} → partial y", '
                     f'{dot_fill(c)}];')
        lines.append(f"x -> c{r}; x -> r{r};")
        lines.append(f"c{r} -> ag; r{r} -> ar;")
    lines.append(f'ag [label="all_gather → y\\nmax |y − full| = {col["max_diff"]:.1e}", '
                 f'{dot_fill(COLORS["communication"])}];')
    lines.append(f'ar [label="all_reduce(sum) + b → y\\nmax |y − full| = {row["max_diff"]:.1e}", '
                 f'{dot_fill(COLORS["communication"])}];')
    lines.append("}")
    return "\n".join(lines)


def _dot_text(text: str) -> str:
    """Text safe inside a quoted DOT label (a loaded file's values are shown, never interpreted)."""
    return str(text).replace("\\", "\\\\").replace('"', '\\"')


def launch_label(live: bool) -> str:
    """Who started the ranks: this server's launcher for a live run; for a loaded file, whatever started its run."""
    if live:
        return "launcher on this server\nforks each rank from its fork server\nand sets torchrun's environment"
    return "the launcher of the loaded run\n(torchrun for demos.distributed.run)"


def launch_legend(world: int) -> dict[str, str]:
    """Chips for launch_dot: the launcher, each rank's own colour, the process group."""
    return {"launcher": COLORS["data"], **{f"rank {r}": SERIES[r % len(SERIES)] for r in range(world)},
            "process group": COLORS["communication"]}


LEFT = "\\l"  # DOT's line break that left-aligns the line before it


def launch_dot(rows: list[dict], launcher: str) -> str:
    """The launcher -> one node per rank with the environment that rank read (views.env_view's rows) -> the process
    group the ranks then joined, as they reported it (dist.get_rank(), dist.get_world_size(), the backend).
    Node colour: the rank's own colour; the launcher is cyan (data), the process group pink (communication)."""
    def label(*lines: str, align: str = "\\n") -> str:  # one DOT line break after each line
        return align.join(_dot_text(line) for line in lines) + align

    out = ["digraph Launch {", "rankdir=TB; node [shape=box, style=filled, fontname=Helvetica];",
           f'launcher [label="{label(*launcher.splitlines())}", {dot_fill(COLORS["data"])}];']
    for i, row in enumerate(rows):
        head = f"rank {row['dist.get_rank()']}, pid {row['pid']}"
        env = [f"{k}={row[k] or '(unset)'}" for k in ENV_KEYS]
        text = label(head, *env, align=LEFT)  # left-aligned lines: the values line up under each other
        out.append(f'r{i} [label="{text}", {dot_fill(SERIES[i % len(SERIES)])}];')
        out.append(f"launcher -> r{i}; r{i} -> pg;")
    backends = ", ".join(sorted({row["backend"] for row in rows}))
    worlds = ", ".join(sorted({str(row["dist.get_world_size()"]) for row in rows}))
    out.append(f'pg [label="{label("process group", f"backend {backends}, world size {worlds}")}", '
               f'{dot_fill(COLORS["communication"])}];')
    out.append("}")
    return "\n".join(out)


def run_figures(run) -> list:
    """Every figure (plotly or DOT) the page draws for one run, from the same views: for a loaded file, this is
    what the file costs to draw."""
    if run.demo == "collectives":
        return ([collective_figure(views.collective_view(run, op)) for op in views.OPS]
                + [ring_figure(views.ring_rows(run))])
    if run.demo == "ddp":
        view = views.ddp_view(run)
        return [ddp_timeline_figure(view, (0, len(view["iterations"]) - 1))]
    if run.demo == "sampler":
        view = views.sampler_view(run)
        return [sampler_figure(view, label) for label in view["views"]]
    if run.demo == "fsdp":
        view = views.fsdp_view(run)
        return [fsdp_shard_figure(view), memory_figure(view)]
    if run.demo == "tensor_parallel":
        return [tp_dot(views.tp_view(run), run.world_size)]
    return [launch_dot(views.env_view(run), launch_label(run.wall_s is not None))]
