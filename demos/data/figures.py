"""Figures for the data loading page: plotly only, colours from demos.style."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from demos.data.collate import BucketResult, PadResult
from demos.data.samplers import DistributedResult, OrderResult, WeightedResult, repeats
from demos.data.streams import StreamRun
from demos.data.timeline import MAIN, MAIN_LOADING, Comparison, EpochRuns, LoaderRun
from demos.style import COLORS, SERIES, base_layout, category_scale, cell_text

# Gantt series: a read (I/O) = data, CPU transform = activation, training step = parameter,
# main process starved (waiting for a batch) = error, worker start-up inside iter(loader) = idle, the dataset's
# once-per-process setup = temporary.
KIND_STYLE = {
    "io": ("read (I/O)", "data"),
    "transform": ("CPU transform", "activation"),
    "step": ("training step", "parameter"),
    "wait": ("main starved: waiting for a batch", "error"),
    "startup": ("iter(loader): worker start-up", "idle"),
    "setup": ("dataset setup in a new process", "temporary"),
}
GANTT_LEGEND = dict(KIND_STYLE.values())  # the chart's legend labels -> concepts, for the page's colour chips


def _legend_below(fig: go.Figure, height: int) -> go.Figure:
    """Legend under the x-axis title, so it never collides with subplot titles at the top."""
    top, bottom = 40, 100
    fig.update_layout(margin=dict(t=top, b=bottom),
                      legend=dict(orientation="h", yanchor="top", y=-58 / (height - top - bottom), x=0))
    return fig


def _cell_labels(z, text, xs, ys, fills) -> go.Scatter:
    """Each cell's text in the colour that reads on its category's fill."""
    cells = [(xs[c], ys[r], label, fills[z[r][c]]) for r, row in enumerate(text) for c, label in enumerate(row)]
    return cell_text(*map(list, zip(*cells, strict=True)))


def _rows(run: LoaderRun) -> list[str]:
    workers = sorted({s.row for s in run.spans if s.row.startswith("worker")}, key=lambda r: int(r.split()[1]))
    loading = [MAIN_LOADING] if any(s.row == MAIN_LOADING for s in run.spans) else []
    return [MAIN, *loading, *workers]


def _add_gantt(fig: go.Figure, run: LoaderRun, row: int, shown: set) -> None:
    for kind, (name, concept) in KIND_STYLE.items():
        spans = [s for s in run.spans if s.kind == kind]
        if not spans:
            continue
        fig.add_trace(
            go.Bar(
                y=[s.row for s in spans], x=[1000 * (s.end - s.start) for s in spans],
                base=[1000 * s.start for s in spans], orientation="h", name=name, marker_color=COLORS[concept],
                marker_line_width=0.5, marker_line_color="white", hovertext=[s.text for s in spans],
                hoverinfo="text", legendgroup=kind, showlegend=kind not in shown,
            ),
            row=row, col=1,
        )
        shown.add(kind)
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(_rows(run))), row=row, col=1)


def gantt_figure(runs: list[LoaderRun], titles: list[str], recorded: str = "") -> go.Figure:
    """One Gantt panel per run on a shared time axis (ms): a row per worker, one for the main process. `recorded`:
    where and when the runs were recorded, if they were (written under the time axis)."""
    heights = [len(_rows(r)) + 1 for r in runs]
    fig = make_subplots(rows=len(runs), cols=1, shared_xaxes=True, subplot_titles=titles,
                        row_heights=heights, vertical_spacing=0.12)
    shown: set = set()
    for i, run in enumerate(runs, 1):
        _add_gantt(fig, run, i, shown)
    fig.update_layout(barmode="overlay", bargap=0.25)
    fig.update_xaxes(title="time since the run started (ms)" + (f" · {recorded}" if recorded else ""),
                     row=len(runs), col=1)
    height = 160 + 34 * sum(heights)
    return _legend_below(base_layout(fig, height=height), height)


def comparison_gantt(r: Comparison, recorded: str = "") -> go.Figure:
    """The two configurations of a comparison, A above B, on one time axis."""
    return gantt_figure([r.a, r.b], [f"A: {r.a.config.label}", f"B: {r.b.config.label}"], recorded)


def epochs_gantt(r: EpochRuns, recorded: str = "") -> go.Figure:
    """Two epochs with persistent_workers off, above the same two epochs with it on."""
    return gantt_figure([r.off, r.on], ["persistent_workers=False", "persistent_workers=True"], recorded)


def stream_figure(r: StreamRun) -> go.Figure:
    """Which worker produced which sample id: unsharded (every worker replays) vs sharded by worker id."""
    naive, sharded, num_workers = r.naive, r.sharded, r.num_workers
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, subplot_titles=(
        f"No sharding: {len(naive)} samples, {len(naive) - len({i for i, _ in naive})} duplicates",
        f"Sharded by get_worker_info(): {len(sharded)} samples, {len(sharded) - len({i for i, _ in sharded})} "
        "duplicates"))
    for col, seen in ((1, naive), (2, sharded)):
        for w in range(num_workers):
            ids = [i for i, wid in seen if wid == w]
            fig.add_scatter(x=ids, y=[f"worker {w}"] * len(ids), mode="markers", marker=dict(
                color=SERIES[w], size=11, symbol="square"), name=f"worker {w}", legendgroup=str(w),
                showlegend=col == 1, row=1, col=col)
    fig.update_xaxes(title="sample id")
    height = 200 + 40 * num_workers
    return _legend_below(base_layout(fig, height=height), height)


def order_figure(r: OrderResult) -> go.Figure:
    """Each sampler's index order as a row of cells; a draw of an index already drawn earlier is marked."""
    orders, length = r.orders, r.length
    names = list(orders)
    z, text = [], []
    for name in names:
        seq = orders[name]
        z.append([int(again) for again in repeats(seq)])
        text.append([str(i) for i in seq])
    kinds = {"first draw of an index": COLORS["data"], "drawn again": COLORS["error"]}
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(length)), y=names, text=text, xgap=2, ygap=2, **category_scale(kinds),
        hovertemplate="position %{x}: index %{text}<extra>%{y}</extra>"))
    fig.add_trace(_cell_labels(z, text, list(range(length)), names, list(kinds.values())))
    fig.update_xaxes(title="position in the epoch", dtick=1)
    fig.update_yaxes(autorange="reversed")
    return base_layout(fig, height=240)


def weighted_figure(r: WeightedResult) -> go.Figure:
    """Class shares: the dataset, one epoch with shuffle=True, one epoch with WeightedRandomSampler."""
    sizes, drawn_plain, drawn_weighted = r.class_sizes, r.drawn_plain, r.drawn_weighted
    labels = [f"class {i}" for i in range(len(sizes))]
    total = sum(sizes)
    fig = go.Figure()
    for name, counts, colour in (("dataset", sizes, COLORS["idle"]), ("shuffle=True", drawn_plain, COLORS["data"]),
                                 ("WeightedRandomSampler", drawn_weighted, COLORS["activation"])):
        fig.add_bar(x=labels, y=[c / total for c in counts], name=name, marker_color=colour,
                    text=[str(c) for c in counts], textposition="outside")
    fig.update_yaxes(title="share of samples drawn", tickformat=".0%")
    return base_layout(fig, height=340)


def distributed_figure(r: DistributedResult) -> go.Figure:
    """Each rank's indices per epoch; a padded (repeated) index is marked in the error colour."""
    epochs = r.epochs
    fig = make_subplots(rows=1, cols=len(epochs), subplot_titles=list(epochs), shared_yaxes=True,
                        horizontal_spacing=0.04)
    kinds = {"first time": COLORS["communication"], "padding (repeat)": COLORS["error"]}
    for col, per_rank in enumerate(epochs.values(), 1):
        ranks = [f"rank {r}" for r in range(len(per_rank))]
        seen: set = set()
        z, text = [], []
        for rank_indices in per_rank:
            row = []
            for i in rank_indices:
                row.append(1 if i in seen else 0)
                seen.add(i)
            z.append(row)
            text.append([str(i) for i in rank_indices])
        fig.add_trace(go.Heatmap(
            z=z, y=ranks, text=text, xgap=2, ygap=2, **category_scale(kinds),
            hovertemplate="%{y}, position %{x}: index %{text}<extra></extra>"), row=1, col=col)
        fig.data[-1].showscale = col == 1
        fig.add_trace(_cell_labels(z, text, list(range(len(z[0]))), ranks, list(kinds.values())), row=1, col=col)
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title="position", dtick=1)
    return base_layout(fig, height=160 + 32 * len(next(iter(epochs.values()))))


def pad_figure(r: PadResult) -> go.Figure:
    """The padded batch: real tokens coloured, padding grey, token ids written in the cells."""
    padded, mask = r.padded, r.mask
    z, text = [[1 if m else 0 for m in row] for row in mask], [[str(t) for t in row] for row in padded]
    kinds, seqs = {"padding": COLORS["idle"], "token": COLORS["data"]}, [f"seq {i}" for i in range(len(padded))]
    fig = go.Figure(go.Heatmap(
        z=z, text=text, xgap=2, ygap=2, **category_scale(kinds), y=seqs,
        hovertemplate="%{y}, position %{x}: token %{text}<extra></extra>"))
    fig.add_trace(_cell_labels(z, text, list(range(len(z[0]))), seqs, list(kinds.values())))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title="position (grey = padding, mask False)", dtick=1)
    return base_layout(fig, height=120 + 34 * len(padded))


def bucket_figure(r: BucketResult) -> go.Figure:
    """Padded width of every batch: shuffled batches vs length buckets."""
    random_max, bucketed_max, random_pad, bucketed_pad = (r.random_max_lengths, r.bucketed_max_lengths,
                                                          r.random_padding, r.bucketed_padding)
    fig = go.Figure()
    fig.add_bar(y=list(random_max), name=f"shuffled batches: {random_pad:.0%} padding", marker_color=COLORS["error"])
    fig.add_bar(y=list(bucketed_max), name=f"bucketed by length: {bucketed_pad:.0%} padding",
                marker_color=COLORS["activation"])
    fig.update_xaxes(title="batch")
    fig.update_yaxes(title="padded length (longest in batch)")
    return base_layout(fig, height=320)
