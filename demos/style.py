"""Visual constants shared by every figure: one colour per concept, one base layout.

Colour legend (the same meaning on every page):
parameter = blue, gradient = orange, activation = green, optimizer_state = purple,
buffer = brown, communication = pink, idle = grey, temporary = olive, data = cyan,
error = red.
"""

import re
import textwrap

import plotly.graph_objects as go

COLORS = {
    "parameter": "#1f77b4",
    "gradient": "#ff7f0e",
    "activation": "#2ca02c",
    "optimizer_state": "#8c5fb8",
    "buffer": "#8c564b",
    "communication": "#e377c2",
    "idle": "#9e9e9e",
    "temporary": "#bcbd22",
    "data": "#17becf",
    "error": "#d62728",
}

# Reference marks (a true line, a target, a formula's value): a mid grey that stands out at 3:1 or more on both the
# white and the near-black page, where black or white would vanish on one of them.
REFERENCE = "#808080"

# A sequence for things that are only told apart (ranks, workers, runs), not typed by concept.
SERIES = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")


DARK_TEXT = "#1f2328"  # the light theme's text colour (.streamlit/config.toml)
LIGHT_TEXT = "#ffffff"


def _rgb(color: str) -> tuple[float, float, float, float]:
    """'#rrggbb', 'rgb(r, g, b)' or 'rgba(r, g, b, a)' as (r, g, b, alpha), channels 0-255."""
    color = {"white": "#ffffff", "black": "#000000"}.get(color.strip(), color.strip())
    if color.startswith("#"):
        return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16), 1.0
    parts = [float(p) for p in color[color.index("(") + 1 : color.rindex(")")].split(",")]
    return parts[0], parts[1], parts[2], parts[3] if len(parts) > 3 else 1.0


def over(color: str, background: str) -> str:
    """A (possibly translucent) colour as seen on `background`, as '#rrggbb'."""
    r, g, b, a = _rgb(color)
    br, bg, bb, _ = _rgb(background)
    return "#" + "".join(f"{round(a * c + (1 - a) * d):02x}" for c, d in ((r, br), (g, bg), (b, bb)))


def luminance(color: str) -> float:
    """WCAG relative luminance of an opaque colour."""
    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b, _ = _rgb(color)
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two opaque colours (AA asks 4.5 for text, 3 for large text and marks)."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def text_on(fill: str) -> str:
    """The text colour that reads on a filled mark of colour `fill`: white or the page's dark text, whichever
    contrasts more, or pure black for the mid-tones where neither reaches 4.5:1."""
    best = max((LIGHT_TEXT, DARK_TEXT), key=lambda text: contrast(text, fill))
    if contrast(best, fill) >= 4.5:
        return best
    return max((LIGHT_TEXT, "#000000"), key=lambda text: contrast(text, fill))


def darkened(color: str, background: str = LIGHT_TEXT, ratio: float = 4.5) -> str:
    """`color` mixed towards black until text in it reaches `ratio` on `background` (a label in its series' hue)."""
    r, g, b, _ = _rgb(color)
    for step in range(21):
        k = 1 - step / 20
        shade = f"#{round(r * k):02x}{round(g * k):02x}{round(b * k):02x}"
        if contrast(shade, background) >= ratio:
            return shade
    return "#000000"


def cell_text(x: list, y: list, text: list[str], fills: list[str], size: int = 14) -> go.Scatter:
    """Labels drawn over cells or blocks, each in the text colour that reads on its own fill (a heatmap's own
    text takes one colour for every cell)."""
    return go.Scatter(x=x, y=y, text=text, mode="text", hoverinfo="skip", showlegend=False, meta={"fills": fills},
                      textfont=dict(size=size, color=[text_on(f) for f in fills]))


def category_scale(categories: dict[str, str]) -> dict:
    """Heatmap arguments for cells whose value is a category index (0, 1, ...): one flat colour per category and a
    colour scale that names them, so the heatmap carries its own key."""
    n = len(categories)
    scale = []
    for i, fill in enumerate(categories.values()):
        scale += [[i / n, fill], [(i + 1) / n, fill]]
    return dict(colorscale=scale, zmin=-0.5, zmax=n - 0.5, showscale=True,
                colorbar=dict(tickvals=list(range(n)), ticktext=list(categories), thickness=12, len=1,
                              outlinewidth=0))


def dot_fill(fill: str) -> str:
    """Graphviz node attributes for a filled node whose label reads on its fill."""
    return f'fillcolor="{fill}", fontcolor="{text_on(fill)}"'


def badge(concept: str) -> dict:
    """Annotation style for a coloured note (an error, a limit): text on a filled box, readable on either theme
    (a palette colour as plain text cannot reach 4.5:1 on both a white and a near-black page)."""
    fill = COLORS[concept]
    return dict(bgcolor=fill, borderpad=3, font=dict(color=text_on(fill)))


def color(concept: str) -> str:
    """The colour of a concept; an unknown name is a programming error, so it raises KeyError."""
    return COLORS[concept]


def legend_on_top(fig: go.Figure, top: int = 90) -> go.Figure:
    """Legend in the top margin, above subplot titles, so the two never overlap."""
    fig.update_layout(margin=dict(t=top), legend=dict(yref="container", y=0.99, yanchor="top", traceorder="normal"))
    return fig


def base_layout(fig: go.Figure, title: str | None = None, height: int = 380) -> go.Figure:
    """Margins, height and legend placement shared by all figures; colours of the page theme are left to Streamlit.

    Axes grow the margins to fit their labels (a right-hand axis is never clipped), and a log axis writes its
    powers of ten as 10⁻⁶ rather than SI prefixes (1µ, 1n read as units).
    """
    fig.update_layout(
        title=title,
        height=height,
        margin=dict(l=10, r=10, t=50 if title else 20, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
    )
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    return readable_bar_labels(readable_log_axes(fig))


def readable_bar_labels(fig: go.Figure) -> go.Figure:
    """Labels inside bars in the text colour that reads on each bar (plotly's own pick is white on mid-tones such
    as the palette's green, below 4.5:1)."""
    for trace in fig.data:
        if trace.type != "bar" or trace.text is None or trace.textposition == "outside":
            continue
        fills = trace.marker.color
        if trace.insidetextfont.color is None and isinstance(fills, str) and fills.startswith("#"):
            trace.insidetextfont.color = text_on(fills)
        elif trace.insidetextfont.color is None and isinstance(fills, (list, tuple)) and all(
                isinstance(f, str) and f.startswith("#") for f in fills):
            trace.insidetextfont.color = [text_on(f) for f in fills]
    return fig


def readable_log_axes(fig: go.Figure) -> go.Figure:
    """Log axes label powers of ten as 10ⁿ (plotly's default SI prefixes print 1µ and 1n)."""
    fig.update_xaxes(exponentformat="power", selector=dict(type="log"))
    fig.update_yaxes(exponentformat="power", selector=dict(type="log"))
    return fig


# Pen colours for drawing on a figure or the blank board: palette colours at 3:1 or more on both themes.
PEN_COLORS = {
    "red": COLORS["error"],
    "blue": COLORS["parameter"],
    "green": COLORS["activation"],
    "purple": COLORS["optimizer_state"],
    "brown": COLORS["buffer"],
}

PRESENTER_FONT = 20  # px: body type of a figure on a shared screen
PRESENTER_TITLE_CHARS = 64  # a 24 px title wraps before this many characters (a full-width 1280 px figure)
# px: a figure's height on a 1280x720 shared screen, where it sits whole under the header strip, the tab labels
# and its tools bar (whiteboard.css keeps those short)
PRESENTER_HEIGHT = 400
HEATMAP_FRAME = 170  # px of the presenter height that a heatmap's title and column labels take, about
_MARKUP = re.compile(r"<(?!br\b|/?b>|/?i>|/?sup>|/?sub>)[^>]*>")  # tags other than <br>, <b>, <i>, <sup>, <sub>


def wrap_label(text: str, width: int) -> str:
    """Break a plotly label into lines of at most `width` characters (plotly never wraps; it clips).

    Existing <br> breaks are kept; text with other markup (a styled span) is left as it is.
    """
    if not text or _MARKUP.search(text):
        return text
    lines = re.split(r"<br\s*/?>", text)
    return "<br>".join("<br>".join(textwrap.wrap(line, width)) or line for line in lines)


def presenter_figure(fig: go.Figure) -> go.Figure:
    """A copy of `fig` for a shared screen: 20 px type, the presenter height (whole on a 720 px screen), wrapped
    titles."""
    out = go.Figure(fig)
    size = PRESENTER_FONT
    title = wrap_label(out.layout.title.text, PRESENTER_TITLE_CHARS) if out.layout.title.text else None
    out.update_layout(
        font_size=size, legend_font_size=size - 2, hoverlabel_font_size=size,
        height=PRESENTER_HEIGHT,
    )
    if title:  # pinned to the top edge, below it the legend when that sits above the plot: room for both
        out.update_layout(title=dict(text=title, font_size=size + 4, yref="container", y=1, yanchor="top",
                                     pad=dict(t=10)),
                          margin_t=max(out.layout.margin.t or 0, _top_room(out, title, size)))
    out.update_xaxes(tickfont_size=size - 2, title_font_size=size, automargin=True)
    out.update_yaxes(tickfont_size=size - 2, title_font_size=size, automargin=True)
    out.update_annotations(font_size=size)
    if any(a.yref == "paper" and (a.y or 0) >= 0.98 for a in out.layout.annotations):
        out.update_layout(margin_t=max(out.layout.margin.t or 0, 2 * size + 10))  # subplot titles fit above
    _keep_every_row_label(out, size)
    _legend_at_the_bottom_edge(out, size)
    for trace in out.data:
        if "textfont" in trace:
            trace.textfont.size = round((trace.textfont.size or 12) * 1.4)
        if "colorbar" in trace:
            trace.colorbar.tickfont.size = size - 4
            trace.colorbar.title.font.size = size - 2
    return out


def _legend_at_the_bottom_edge(fig: go.Figure, size: int) -> None:
    """A legend placed under the plot (a negative paper y, sized for the figure's own height and type) would land
    on the x-axis title at the presenter height and type: pin it to the figure's bottom edge instead, with room
    above it for the tick labels and the axis title."""
    legend = fig.layout.legend
    if legend.orientation != "h" or legend.y is None or legend.y >= 0:
        return
    rows = 2  # a horizontal legend of a few entries wraps to two lines at presenter type on a 1280 px screen
    fig.update_layout(legend=dict(yref="container", y=0, yanchor="bottom"),
                      margin_b=max(fig.layout.margin.b or 0, rows * (size + 10) + 3 * size + 20))


def _keep_every_row_label(fig: go.Figure, size: int) -> None:
    """A heatmap whose named rows are denser than its labels at the presenter height keeps every row's label, in a
    type that fits its row, instead of plotly dropping every other one."""
    for trace in fig.data:
        rows = trace.y if trace.type == "heatmap" and trace.y is not None else ()
        if not 1 < len(rows) <= 40 or not all(isinstance(r, str) for r in rows):
            continue
        row = (PRESENTER_HEIGHT - HEATMAP_FRAME) / len(rows)
        if row < 1.25 * (size - 2):
            fig.layout["yaxis" + (trace.yaxis or "y")[1:]].update(dtick=1, tickfont_size=max(10, int(row / 1.25)))


def _top_room(fig: go.Figure, title: str, size: int) -> int:
    """Pixels above the plot for the title's lines and, if the legend sits above the plot, its rows (estimated
    from the entries' lengths on a 1100 px wide plot)."""
    room = (title.count("<br>") + 1) * (size + 12) + 20
    legend = fig.layout.legend
    if (legend.orientation == "h" and (legend.y or 0) >= 1 and legend.yref != "container"
            and fig.layout.showlegend is not False):
        names = [t.name or "" for t in fig.data if t.showlegend is not False and t.name]
        width = sum(len(n) * 0.55 * (size - 2) + 50 for n in names)
        room += max(1, -(-int(width) // 1100)) * (size + 8) if names else 0
    return room


def page_figure(fig: go.Figure, title_chars: int = 70) -> go.Figure:
    """`fig` itself when every title fits; otherwise a copy whose long titles are wrapped (normal page view)."""
    title = fig.layout.title.text
    wrapped = wrap_label(title, title_chars) if title else title
    if wrapped == title:
        return fig
    return go.Figure(fig).update_layout(title=dict(text=wrapped, automargin=True))
