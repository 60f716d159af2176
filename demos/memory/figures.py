"""Figures for the memory page: plotly only, colours from demos.style. No streamlit here."""

import math

import plotly.graph_objects as go

from demos.memory.allocator import GiB, KiB, MiB, fmt_bytes
from demos.memory.tracker import CATEGORIES
from demos.memory.training import CARDS, largest_fitting, usable
from demos.style import COLORS, REFERENCE, SERIES, badge, base_layout, text_on

# Tracker categories to the shared palette: the input batch is "data".
# Inputs are data; a kernel's workspace is memory the kernel keeps for itself, drawn as a buffer.
CATEGORY_CONCEPT = {c: {"input": "data", "workspace": "buffer"}.get(c, c) for c in CATEGORIES}
CATEGORY_COLOR = {c: COLORS[concept] for c, concept in CATEGORY_CONCEPT.items()}
# The timeline's legend labels -> concepts, for the colour chips above it (one source for both).
def drawn_categories(t) -> list[str]:
    """Every category, except a workspace when no kernel in this run had one (most runs: no convolution)."""
    return [c for c in CATEGORIES if c != "workspace" or any(t.by_category[c])]


def category_legend(t) -> dict[str, str]:
    """The colour key over a timeline: the categories it draws."""
    return {c.replace("_", " "): CATEGORY_CONCEPT[c] for c in drawn_categories(t)}
PHASE_LABEL_CHARS = 95  # a phase label is drawn when it fits: about this many 20 px characters span the plot
PHASE_FILL = {"forward": "rgba(44,160,44,0.07)", "backward": "rgba(255,127,14,0.07)",
              "optimizer": "rgba(148,103,189,0.09)", "zero_grad": "rgba(158,158,158,0.12)"}
MAX_POINTS = 1200
BAND_ALPHA = 0.85
SWEEP_DASH = ("solid", "dash", "dot", "dashdot")
SWEEP_MARKER = ("circle", "square", "diamond", "triangle-up")


def unit_for(nbytes: float) -> tuple[str, float]:
    """The binary unit that keeps numbers readable on an axis."""
    for name, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if nbytes >= 2 * scale:
            return name, scale
    return "B", 1


def _thin(total, keep: int) -> list[int]:
    """At most MAX_POINTS event indices: the highest event of each bucket (so spikes survive), plus `keep` and the
    last event."""
    n = len(total)
    size = max(1, math.ceil(n / MAX_POINTS))
    picks = {max(range(i, min(i + size, n)), key=total.__getitem__) for i in range(0, n, size)}
    return sorted(picks | {keep, n - 1})


def timeline_figure(t, capacity: float | None = None, card: str = "") -> go.Figure:
    """Stacked bytes by category over op index; allocator-model allocated/reserved lines; phases shaded;
    the peak marked; the first optimizer-state allocation marked; a card's capacity as the OOM line."""
    top = max(max(t.reserved, default=0), t.peak, 1)
    unit, scale = unit_for(max(top, capacity or 0))
    idx = _thin(t.total, t.peak_event)
    x = [t.op_index[i] for i in idx]
    def ys(series):
        return [round(series[i] / scale, 4) for i in idx]  # short numbers keep the page's JSON small

    traces = [dict(type="scatter", x=x, y=ys(t.by_category[c]), name=c.replace("_", " "), stackgroup="bytes",
                   line=dict(width=0, shape="hv", color=CATEGORY_COLOR[c]), fillcolor=_tint(CATEGORY_COLOR[c]))
              for c in drawn_categories(t)]
    traces.append(dict(type="scatter", x=x, y=ys(t.reserved), name="reserved (allocator model)",
                       line=dict(color=COLORS["idle"], dash="dot", shape="hv")))
    traces.append(dict(type="scatter", x=x, y=ys(t.allocated),
                       name="allocated (allocator model)", line=dict(color=REFERENCE, width=1.5, shape="hv")))
    if t.measured:
        mx = [m[1] for m in t.measured]
        traces.append(dict(type="scatter", x=mx, y=[m[2] / scale for m in t.measured], mode="markers",
                           name="measured memory_allocated − start",
                           marker=dict(symbol="x", size=9, color=COLORS["error"])))
        traces.append(dict(type="scatter", x=mx, y=[m[3] / scale for m in t.measured], mode="markers",
                           name="measured memory_reserved − start",
                           marker=dict(symbol="circle-open", size=9, color=COLORS["error"])))
    fig = go.Figure(data=traces)
    shapes, notes = [], []  # collected and set once: plotly's add_vrect per phase is slow
    span = max(t.op_index[-1] if t.op_index else 1, 1)
    for name, start, end in t.phases:
        kind = name.split()[0]
        shapes.append(dict(type="rect", xref="x", yref="paper", x0=start, x1=max(end, start + 1), y0=0, y1=1,
                           fillcolor=PHASE_FILL[kind], line_width=0, layer="below"))
        label = _phase_label(name, (end - start) / span)
        if kind != "zero_grad" and label:
            notes.append(dict(x=start, y=1, xref="x", yref="paper", xanchor="left", yanchor="top", text=label,
                              showarrow=False, font_size=10))
    notes.append(dict(x=t.op_index[t.peak_event], y=t.peak / scale, text=f"peak {fmt_bytes(t.peak)}",
                      showarrow=True, arrowhead=2))
    if t.first_optimizer_state_op is not None:
        notes.append(dict(x=t.first_optimizer_state_op, y=0, yref="paper", yanchor="bottom", ax=0, ay=-40,
                          text="optimizer state appears (first step())", showarrow=True, font_size=11,
                          **badge("optimizer_state")))
    if capacity:  # the card's capacity is always drawn, however far above the peak: that gap is the headroom
        shapes.append(dict(type="line", xref="paper", x0=0, x1=1, y0=capacity / scale, y1=capacity / scale,
                           line=dict(color=COLORS["error"], dash="dash", width=2)))
        headroom = usable(capacity) - max(t.reserved, default=0)
        room = (f"headroom ≈ {fmt_bytes(headroom)} above the peak reserved, CUDA context and workspace allowance"
                if headroom >= 0 else f"the peak reserved, CUDA context and workspace allowance are ≈ "
                f"{fmt_bytes(-headroom)} over: OOM")
        notes.append(dict(x=1, xref="paper", y=capacity / scale, xanchor="right", yanchor="top", showarrow=False,
                          text=f"{card}: {fmt_bytes(capacity)}, OOM above ({room})", **badge("error")))
    fig.update_layout(shapes=shapes, annotations=notes)
    fig.update_xaxes(title="op index (aten ops dispatched)")
    fig.update_yaxes(title=f"memory ({unit})", rangemode="tozero",
                     range=[0, 1.12 * max(top, capacity or 0) / scale])
    return base_layout(fig, height=480)


def _tint(color: str) -> str:
    """A stacked band's fill: opaque enough that neighbouring categories stay apart on either theme."""
    return f"rgba({int(color[1:3], 16)}, {int(color[3:5], 16)}, {int(color[5:7], 16)}, {BAND_ALPHA})"


def _phase_label(name: str, width: float) -> str:
    """The phase's name where it fits its share of the plot's width, 'F1' / 'B2' / 'O1' where only that fits."""
    if len(name) + 1 <= width * PHASE_LABEL_CHARS:
        return name
    short = name[0].upper() + name.split()[-1]
    return short if len(short) + 1 <= width * PHASE_LABEL_CHARS else ""


def peak_figure(t) -> go.Figure:
    """What holds the peak: one horizontal bar per category."""
    unit, scale = unit_for(t.peak)
    cats = [c for c in CATEGORIES if t.peak_by_category[c]]
    fig = go.Figure(go.Bar(
        y=[c.replace("_", " ") for c in cats], x=[t.peak_by_category[c] / scale for c in cats], orientation="h",
        marker_color=[CATEGORY_COLOR[c] for c in cats],
        text=[fmt_bytes(t.peak_by_category[c]) for c in cats], textposition="auto",
        insidetextfont=dict(color=[text_on(CATEGORY_COLOR[c]) for c in cats]),
    ))
    fig.update_xaxes(title=f"bytes at the peak ({unit})")
    fig.update_yaxes(autorange="reversed")
    return base_layout(fig, height=300)


def sweep_figure(batches, peaks: dict, capacity: float, card: str, fits: dict) -> go.Figure:
    """Peak memory vs batch size for each variant, the card's capacity, and where each line crosses it."""
    top = max(max(max(v) for v in peaks.values()), capacity)
    unit, scale = unit_for(top)
    fig = go.Figure()
    # Variants can coincide (checkpointing changes nothing when activations are small): each has its own dash and
    # marker, and earlier ones are wider, so a line drawn over another leaves it showing at both edges.
    for i, (color, (name, values)) in enumerate(zip(SERIES, peaks.items(), strict=False)):
        fit = fits.get(name)
        label = (f"{name}: no swept batch fits" if fit is None else f"{name}: every swept batch fits"
                 if fit == float("inf") else f"{name}: fits up to batch ≈ {fit:.0f}")
        fig.add_scatter(x=list(batches), y=[v / scale for v in values], name=label, mode="lines+markers",
                        line=dict(color=color, width=2 + 2 * (len(peaks) - 1 - i), dash=SWEEP_DASH[i % 4]),
                        marker=dict(symbol=SWEEP_MARKER[i % 4], size=8 + 3 * (len(peaks) - 1 - i)))
    fig.add_hline(y=capacity / scale, line=dict(color=COLORS["error"], dash="dash"), annotation_text=f"{card}")
    fig.add_hline(y=usable(capacity) / scale, line=dict(color=COLORS["error"], dash="dot"),
                  annotation_text=f"less CUDA context and workspace allowance: {fmt_bytes(usable(capacity))}",
                  annotation_position="bottom right")
    # a linear axis, so the affine peak draws as a straight line, as the caption under the chart says
    fig.update_xaxes(title="batch size", type="linear", rangemode="tozero", tickvals=list(batches))
    fig.update_yaxes(title=f"peak reserved, allocator model ({unit})", rangemode="tozero")
    return base_layout(fig, height=420)


def card_sweep_figure(batches: tuple[int, ...], peaks: dict, card: str) -> go.Figure:
    """sweep_figure against `card`: each variant's largest fitting batch is read under the card's usable memory."""
    capacity = CARDS[card]
    fits = {name: largest_fitting(batches, values, usable(capacity)) for name, values in peaks.items()}
    return sweep_figure(batches, peaks, capacity, card, fits)


def allocator_figure(run) -> go.Figure:
    """Allocated vs reserved after each scripted action."""
    top = max(max(run.reserved, default=0), 1)
    unit, scale = unit_for(top)
    x = list(range(len(run.labels)))
    fig = go.Figure()
    fig.add_scatter(x=x, y=[r / scale for r in run.reserved], name="reserved (memory_reserved)",
                    line=dict(color=COLORS["idle"], shape="hv"), fill="tozeroy")
    fig.add_scatter(x=x, y=[a / scale for a in run.allocated], name="allocated (memory_allocated)",
                    line=dict(color=COLORS["parameter"], shape="hv"), fill="tozeroy")
    if run.capacity:
        fig.add_hline(y=run.capacity / scale, line=dict(color=COLORS["error"], dash="dash"),
                      annotation_text=f"capacity {fmt_bytes(run.capacity)}")
    fig.update_xaxes(title="action", tickvals=x, ticktext=run.labels, tickangle=-40)
    fig.update_yaxes(title=f"bytes ({unit})", rangemode="tozero")
    return base_layout(fig, height=380)


LEGEND_BELOW_MARGIN = 110  # px: tick labels, the axis title and two legend rows

BLOCK_KINDS = {  # legend label -> (fill, outline, pattern)
    "allocated": (COLORS["activation"], "white", ""),
    "cached (free, mapped)": (COLORS["idle"], "white", ""),
    "unmapped (no memory behind it)": ("rgba(0,0,0,0)", COLORS["idle"], "/"),
}


def blocks_figure(blocks, title: str = "", capacity: int | None = None) -> go.Figure:
    """Segments as rows, blocks along each row: allocated blocks named, cached (free) blocks grey, and the
    unmapped pages of an expandable segment hatched: virtual addresses that hold no memory. With `capacity`, the
    memory the segments hold (mapped) is set against the device's capacity above the rows."""
    fig = go.Figure()
    rows = sorted({(b.segment, b.small) for b in blocks})
    labels = {r: f"segment {r[0]} ({'small' if r[1] else 'large'} pool)" for r in rows}
    shown = set()
    for b in blocks:
        kind = "allocated" if b.owner else "cached (free, mapped)" if b.mapped else "unmapped (no memory behind it)"
        fill, outline, pattern = BLOCK_KINDS[kind]
        name = b.owner or ("free" if b.mapped else "unmapped")
        fig.add_bar(
            y=[labels[(b.segment, b.small)]], x=[b.size / MiB], base=[b.offset / MiB], orientation="h",
            marker=dict(color=fill, line=dict(color=outline, width=1), pattern=dict(shape=pattern, fgcolor=outline)),
            # Unmapped runs have no label (the legend names them): text on a see-through bar has no colour that
            # reads on both themes.
            text=f"{name} {fmt_bytes(b.size)}" if b.mapped else None, textposition="inside", insidetextanchor="middle",
            insidetextfont=dict(color=text_on(fill)) if b.mapped else None,
            hovertemplate=f"{kind}: {name}<br>offset {fmt_bytes(b.offset)}<br>size {fmt_bytes(b.size)}<extra></extra>",
            name=kind, legendgroup=kind, showlegend=kind not in shown,
        )
        shown.add(kind)
    mapped = sum(b.size for b in blocks if b.mapped)
    if capacity:
        title = (f"{title}: " if title else "") + f"{fmt_bytes(mapped)} mapped of the {fmt_bytes(capacity)} capacity"
    fig.update_xaxes(title="address within segment (MiB)", rangemode="tozero")
    fig.update_layout(barmode="overlay")
    fig = base_layout(fig, title=title or None, height=max(280, 180 + 50 * len(rows)))
    # In a half-width column three legend entries take two rows: above the plot they ran into the title, so the
    # legend sits at the figure's bottom edge, under the axis title, with the bottom margin sized for two rows.
    fig.update_layout(margin_t=50 if title else 20, margin_b=LEGEND_BELOW_MARGIN,
                      legend=dict(yref="container", y=0, yanchor="bottom", orientation="h", x=0))
    return fig


def streams_figure(recording: dict, scenario: str) -> go.Figure:
    """Gantt of one recorded scenario: host calls and GPU intervals on their lanes (ms from the start event), one bar
    per interval; the bars of one kind are one trace (one legend entry, one colour), so the figure carries each
    style once, not once per bar."""
    rows = [r for r in recording["intervals"] if r["scenario"] == scenario]
    color = {"copy": COLORS["data"], "kernel": COLORS["activation"], "host": COLORS["idle"], "sync": COLORS["error"]}
    label = {"copy": "copy (host ↔ GPU)", "kernel": "kernel", "host": "host call", "sync": "synchronize"}
    fig = go.Figure()
    for kind in dict.fromkeys(r["kind"] for r in rows):  # in order of first appearance, as the legend reads
        bars = [r for r in rows if r["kind"] == kind]
        fig.add_bar(y=[r["lane"] for r in bars], x=[max(r["end_ms"] - r["start_ms"], 1e-3) for r in bars],
                    base=[r["start_ms"] for r in bars], orientation="h", marker_color=color.get(kind, COLORS["idle"]),
                    name=label.get(kind, kind), customdata=[[r["name"], r["start_ms"], r["end_ms"]] for r in bars],
                    hovertemplate="%{customdata[0]}<br>%{customdata[1]:.3f} → %{customdata[2]:.3f} ms<extra></extra>")
    fig.update_xaxes(title="time (ms)")
    fig.update_layout(barmode="overlay")
    return base_layout(fig, height=260)


def compile_figure(result) -> go.Figure:
    """Eager vs compiled time per call after warm-up, and the one-off compile time."""
    fig = go.Figure()
    fig.add_bar(x=["eager", "compiled"], y=[result.eager_ms, result.compiled_ms],
                marker_color=[COLORS["idle"], COLORS["parameter"]],
                text=[f"{result.eager_ms:.3f} ms", f"{result.compiled_ms:.3f} ms"], textposition="auto",
                insidetextfont=dict(color=[text_on(COLORS["idle"]), text_on(COLORS["parameter"])]))
    fig.update_yaxes(title="ms per call (median after warm-up)")
    return base_layout(fig, title=f"compile took {result.compile_s:.1f} s once", height=320)
