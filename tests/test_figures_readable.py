"""Figures read in both themes and on a shared screen: text contrast (WCAG AA), distinct neighbouring colours,
reference marks visible, titles wrapped, the OOM line always drawn, unmapped memory marked.

The page scan runs every page (and each of its section tabs) in AppTest, takes every plotly and graphviz figure
it sends, and checks each explicitly coloured text against what it is drawn on, in the light and the dark theme
as .streamlit/config.toml defines them. Text without a colour of its own takes the theme's text colour.
"""

import itertools
import json
import math
import re
import tomllib

import plotly.graph_objects as go
import pytest

from demos.memory.cache_demo import PRESETS, run_script
from demos.memory.figures import BAND_ALPHA, blocks_figure, timeline_figure
from demos.memory.tracker import CATEGORIES
from demos.memory.training import CARDS, RunSpec, default_device, simulate
from demos.registry import ROOT, registered
from demos.style import (
    COLORS,
    PEN_COLORS,
    PRESENTER_FONT,
    PRESENTER_HEIGHT,
    REFERENCE,
    contrast,
    over,
    page_figure,
    presenter_figure,
    text_on,
    wrap_label,
)
from tests.conftest import open_page

AA_TEXT, AA_MARK = 4.5, 3.0
_CONFIG = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["theme"]
THEMES = {name: (_CONFIG[name]["backgroundColor"], _CONFIG[name]["textColor"]) for name in ("light", "dark")}
GRAPH_CARD = "#ffffff"  # graphviz draws its own white background (no graph sets bgcolor=transparent)
X11 = {"white": "#ffffff", "black": "#000000", "lightblue": "#add8e6", "lightgrey": "#d3d3d3",
       "lightgray": "#d3d3d3", "gray": "#bebebe", "grey": "#bebebe", "orange": "#ffa500",
       "darkolivegreen1": "#caff70", "darkolivegreen3": "#a2cd5a", "gold": "#ffd700"}


# ------------------------------------------------------------------------------------------------ the palette


@pytest.mark.parametrize("concept", list(COLORS))
def test_text_on_every_palette_colour_reaches_aa(concept):
    fill = COLORS[concept]
    assert contrast(text_on(fill), fill) >= AA_TEXT, (concept, fill, text_on(fill))


@pytest.mark.parametrize("theme", list(THEMES))
def test_pens_and_reference_marks_show_on_both_themes(theme):
    background = THEMES[theme][0]
    for name, pen in {**PEN_COLORS, "reference": REFERENCE}.items():
        assert contrast(pen, background) >= AA_MARK, (name, pen, theme)


def test_contrast_matches_the_wcag_definition():
    assert contrast("#000000", "#ffffff") == pytest.approx(21)
    assert contrast("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)
    assert over("rgba(255, 0, 0, 0.5)", "#ffffff") == "#ff8080"


def _lab(color: str) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of an opaque '#rrggbb'."""
    def lin(c: int) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (lin(int(color[i:i + 2], 16)) for i in (1, 3, 5))
    x, y, z = ((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b,
               (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883)
    f = [t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in (x, y, z)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


@pytest.fixture(scope="module")
def timeline():
    t = simulate(RunSpec(), default_device())
    return t, timeline_figure(t, CARDS["T4 16 GB"], "T4 16 GB")


@pytest.mark.parametrize("theme", list(THEMES))
def test_neighbouring_memory_bands_look_different(timeline, theme):
    """Each stacked category band, as drawn on the page, differs from the band next to it by ΔE*76 ≥ 30: the
    default run (no convolution: no workspace band) and a CNN run, whose cuDNN workspace band is drawn too."""
    cnn = simulate(RunSpec("Small CNN (CIFAR 32x32)", 4, 1, "fp32", "SGD", False, True, 1), "meta")
    for names, fig in ((CATEGORIES[:-1], timeline[1]), (CATEGORIES, timeline_figure(cnn))):
        bands = [t for t in fig.data if t.stackgroup]
        assert [b.name for b in bands] == [c.replace("_", " ") for c in names]
        seen = [_lab(over(b.fillcolor, THEMES[theme][0])) for b in bands]
        for (a, la), (b, lb) in itertools.pairwise(zip(bands, seen, strict=True)):
            assert math.dist(la, lb) >= 30, (a.name, b.name, theme, math.dist(la, lb))
        assert all(f" {BAND_ALPHA})" in b.fillcolor for b in bands)


def test_the_oom_line_is_drawn_when_the_card_is_far_larger_than_the_peak(timeline):
    t, fig = timeline
    capacity = CARDS["T4 16 GB"]
    assert capacity > 2.5 * t.peak, "the case the line used to be dropped for"
    lines = [s for s in fig.layout.shapes if s.type == "line" and s.line.color == COLORS["error"]]
    assert len(lines) == 1
    top = fig.layout.yaxis.range[1]
    assert lines[0].y0 < top, "the line is inside the plotted range"
    note = next(a for a in fig.layout.annotations if "OOM" in a.text)
    assert "headroom" in note.text


@pytest.mark.parametrize("preset", list(PRESETS))
def test_expandable_segments_draw_what_is_mapped_and_mark_the_rest(preset):
    """The mapped blocks add up to reserved at every step; unmapped pages are a kind of their own in the figure."""
    run = run_script(PRESETS[preset], 128, True)
    for blocks, reserved in zip(run.snapshots, run.reserved, strict=True):
        assert sum(b.size for b in blocks if b.mapped) == reserved
        assert reserved <= run.capacity
    fig = blocks_figure(run.snapshots[-1], capacity=run.capacity)
    assert "of the 128.00 MiB capacity" in fig.layout.title.text
    if any(not b.mapped for b in run.snapshots[-1]):
        assert any(t.name.startswith("unmapped") and t.marker.pattern.shape == "/" for t in fig.data)


def test_fragmentation_preset_leaves_unmapped_pages_in_the_expandable_run():
    assert any(not b.mapped for b in run_script(PRESETS["Fragmentation"], 128, True).snapshots[-1])


# ------------------------------------------------------------------------------------------------ titles, sizes


def test_long_titles_wrap_and_markup_is_left_alone():
    title = "Gradient norm per layer, one backward pass, measured on the whole batch for every layer"
    wrapped = wrap_label(title, 40)
    assert all(len(line) <= 40 for line in wrapped.split("<br>")) and wrapped.replace("<br>", " ") == title
    assert wrap_label("<span style='color:red'>a b c d e f</span>", 3).startswith("<span")
    assert wrap_label("short", 40) == "short"


def test_presenter_figure_keeps_every_row_label_of_a_dense_heatmap():
    rows = [f"row {i}" for i in range(12)]
    fig = go.Figure(go.Heatmap(z=[[i] for i in range(12)], x=["a"], y=rows), layout_height=560)
    big = presenter_figure(fig)
    assert big.layout.height == PRESENTER_HEIGHT and big.layout.yaxis.dtick == 1, "every row labelled"
    assert 10 <= big.layout.yaxis.tickfont.size < PRESENTER_FONT - 2, "in a type that fits a row"
    few = presenter_figure(go.Figure(go.Heatmap(z=[[1], [2]], x=["a"], y=["p", "q"])))
    assert few.layout.yaxis.dtick is None and few.layout.yaxis.tickfont.size == PRESENTER_FONT - 2


def test_presenter_figure_is_large_and_leaves_the_original_alone():
    fig = go.Figure(go.Bar(x=[1, 2], y=[3, 4], text=["a", "b"]))
    fig.update_layout(title="A title long enough to need two lines when the type is twenty pixels high on a screen",
                      height=300)
    big = presenter_figure(fig)
    assert big.layout.font.size == PRESENTER_FONT and big.layout.height == PRESENTER_HEIGHT
    assert "<br>" in big.layout.title.text and big.layout.title.yanchor == "top"
    assert big.layout.margin.t >= 2 * (PRESENTER_FONT + 12), "two title lines fit above the plot"
    assert big.data[0].textfont.size > 12 and big.layout.xaxis.tickfont.size >= PRESENTER_FONT - 2
    assert fig.layout.height == 300 and fig.layout.font.size is None, "the cached figure is not changed"
    short = go.Figure().update_layout(title="short")
    assert page_figure(short) is short, "nothing to wrap: no copy"


# ------------------------------------------------------------------------------------------------ every page


def _plotly_problems(fig: dict) -> list[str]:
    """Explicitly coloured text of a plotly figure that does not reach AA on what it is drawn on."""
    problems = []

    def check(text: str, color: str, on: str, where: str) -> None:
        ratio = contrast(over(color, on), on)
        if ratio < AA_TEXT:
            problems.append(f"{where}: {text!r} in {color} on {on} is {ratio:.2f}:1")

    for theme, (page, theme_text) in THEMES.items():
        for a in fig.get("layout", {}).get("annotations", []):
            color = a.get("font", {}).get("color")
            box = a.get("bgcolor")
            if box and box not in ("rgba(0,0,0,0)", "transparent"):
                check(a.get("text", ""), color or theme_text, over(box, page), f"{theme} annotation on a box")
            elif color:
                check(a.get("text", ""), color, page, f"{theme} annotation")
        for trace in fig.get("data", []):
            if trace.get("type") == "bar" and trace.get("text") is not None and trace.get("textposition") != "outside" \
                    and not (trace.get("insidetextfont") or trace.get("textfont") or {}).get("color"):
                problems.append(f"{theme} bar labels {trace.get('name')!r}: inside colour left to plotly's pick")
            if trace.get("type") == "heatmap" and trace.get("texttemplate") \
                    and not trace.get("textfont", {}).get("color"):
                problems.append(f"{theme} heatmap cell text: colour left to plotly's pick (use style.cell_text)")
            texts = trace.get("text")
            texts = [texts] if isinstance(texts, str) else list(texts or [""])
            colors = (trace.get("textfont") or trace.get("insidetextfont") or {}).get("color")
            if colors is None:
                continue
            colors = colors if isinstance(colors, list) else [colors] * len(texts)
            fills = trace["meta"].get("fills") if isinstance(trace.get("meta"), dict) else None
            if fills is None and (trace.get("type") == "bar" or "markers" in trace.get("mode", "")):
                fills = trace.get("marker", {}).get("color")  # text on its bar or marker
            if fills is None:
                fills = page  # text on the page itself
            fills = fills if isinstance(fills, list) else [fills] * len(colors)
            for text, color, fill in zip(texts, colors, fills, strict=False):
                check(text, color, over(fill, page), f"{theme} {trace.get('type', 'scatter')} text")
    return problems


def _x11(color: str) -> str:
    color = color.strip('"')
    if color.startswith("#"):
        return color if len(color) == 7 else over(
            f"rgba({int(color[1:3], 16)}, {int(color[3:5], 16)}, {int(color[5:7], 16)}, {int(color[7:9], 16) / 255})",
            GRAPH_CARD)
    assert color in X11, f"add the graphviz colour {color!r} to the test's table"
    return X11[color]


def _attrs(text: str) -> dict:
    return {k: v.strip('"') for k, v in re.findall(r'(\w+)\s*=\s*("[^"]*"|[^,\s\]]+)', text)}


def _dot_problems(dot: str) -> list[str]:
    """Labels of graphviz nodes whose font colour does not reach AA on their fill (or on the white card)."""
    assert "transparent" not in dot, "every graph draws on graphviz's white card, readable on both themes"
    problems, node_defaults = [], {}
    for head, body in re.findall(r"([^;{}\[\]]*)\[([^\]]*)\]", dot):
        attrs = _attrs(body)
        head = head.strip()
        if head == "node":
            node_defaults.update(attrs)
            continue
        if head in ("edge", "graph") or "->" in head or "--" in head:
            if "fontcolor" in attrs:
                ratio = contrast(_x11(attrs["fontcolor"]), GRAPH_CARD)
                if ratio < AA_TEXT:
                    problems.append(f"label of {head!r} in {attrs['fontcolor']}: {ratio:.2f}:1")
            continue
        merged = {**node_defaults, **attrs}
        filled = "filled" in merged.get("style", "")
        fill = _x11(merged.get("fillcolor", "lightgrey")) if filled else GRAPH_CARD
        font = _x11(merged.get("fontcolor", "black"))
        ratio = contrast(font, fill)
        if ratio < AA_TEXT:
            problems.append(f"node {head!r}: {merged.get('fontcolor', 'black')} on {fill} is {ratio:.2f}:1")
    return problems


@pytest.mark.parametrize("topic", registered(), ids=lambda t: t.slug)
def test_every_figure_on_every_page_has_readable_text_in_both_themes(topic):
    problems, figures = [], 0
    for query in topic.views():
        at = open_page(topic.file, query=query or None)
        for element in at.get("plotly_chart"):
            figures += 1
            problems += [f"{query} {p}" for p in _plotly_problems(json.loads(element.proto.spec))]
        for element in at.get("graphviz_chart"):
            figures += 1
            problems += [f"{query} {p}" for p in _dot_problems(element.proto.spec)]
        figures += len(at.get("vega_lite_chart"))  # Vega-Lite text takes the theme's colours
    assert figures or not topic.charts, "the page drew the figures it draws at its defaults"
    assert not problems, "\n".join(sorted(set(problems)))


def test_a_legend_under_the_plot_sits_at_the_presenter_figures_bottom_edge_below_the_axis_title():
    """The data page's Gantt puts its legend under the plot in paper units sized for its own height; at the
    presenter height and type that offset landed on the x-axis title."""
    from demos.data.figures import _legend_below
    from demos.style import PRESENTER_FONT, base_layout, presenter_figure

    gantt_like = go.Figure(go.Bar(x=[1, 2], y=["main", "worker 0"], orientation="h", name="read (I/O)"))
    gantt_like.update_xaxes(title_text="time since the run started (ms)")
    fig = presenter_figure(_legend_below(base_layout(gantt_like, height=400), 400))
    assert (fig.layout.legend.yref, fig.layout.legend.y, fig.layout.legend.yanchor) == ("container", 0, "bottom")
    room_for_ticks_and_title = 3 * PRESENTER_FONT
    assert fig.layout.margin.b >= 2 * (PRESENTER_FONT + 10) + room_for_ticks_and_title
