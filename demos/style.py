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
    "optimizer_state": "#9467bd",
    "buffer": "#8c564b",
    "communication": "#e377c2",
    "idle": "#9e9e9e",
    "temporary": "#bcbd22",
    "data": "#17becf",
    "error": "#d62728",
}

# A sequence for things that are only told apart (ranks, workers, runs), not typed by concept.
SERIES = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def color(concept: str) -> str:
    """The colour of a concept; an unknown name is a programming error, so it raises KeyError."""
    return COLORS[concept]


def base_layout(fig: go.Figure, title: str | None = None, height: int = 380) -> go.Figure:
    """Margins, height and legend placement shared by all figures; colours of the page theme are left to Streamlit."""
    fig.update_layout(
        title=title,
        height=height,
        margin=dict(l=10, r=10, t=50 if title else 20, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
    )
    return fig


# Pen colours for drawing on a figure or the blank board: palette colours that stand out on both themes.
PEN_COLORS = {
    "red": COLORS["error"],
    "blue": COLORS["parameter"],
    "green": COLORS["activation"],
    "orange": COLORS["gradient"],
    "purple": COLORS["optimizer_state"],
}

PRESENTER_FONT = 20  # px: body type of a figure on a shared screen
PRESENTER_TITLE_CHARS = 64  # a 24 px title wraps before this many characters (a full-width 1280 px figure)
PRESENTER_MIN_HEIGHT = 560  # px: a figure fills most of a 720 px screen, or keeps its own larger height
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
    """A copy of `fig` for a shared screen: 20 px type, a height that fills a 720 px screen, wrapped titles."""
    out = go.Figure(fig)
    size = PRESENTER_FONT
    title = out.layout.title.text
    out.update_layout(
        font_size=size, legend_font_size=size - 2, hoverlabel_font_size=size,
        title=dict(text=wrap_label(title, PRESENTER_TITLE_CHARS), font_size=size + 4, automargin=True) if title else {},
        height=max(out.layout.height or 450, PRESENTER_MIN_HEIGHT),
    )
    out.update_xaxes(tickfont_size=size - 2, title_font_size=size, automargin=True)
    out.update_yaxes(tickfont_size=size - 2, title_font_size=size, automargin=True)
    out.update_annotations(font_size=size)
    for trace in out.data:
        if "textfont" in trace:
            trace.textfont.size = round((trace.textfont.size or 12) * 1.4)
    return out


def page_figure(fig: go.Figure, title_chars: int = 70) -> go.Figure:
    """`fig` itself when every title fits; otherwise a copy whose long titles are wrapped (normal page view)."""
    title = fig.layout.title.text
    wrapped = wrap_label(title, title_chars) if title else title
    if wrapped == title:
        return fig
    return go.Figure(fig).update_layout(title=dict(text=wrapped, automargin=True))
