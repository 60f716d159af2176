"""Figures on the page: theme-following charts with PNG/SVG downloads; in whiteboard mode, large and drawable.

Every figure sits in its own container with the figure tools under it (pages/ui/ink.py). Pages cache their
figures and share them read-only; the page view of a figure (wrapped titles, or the whiteboard copy with large
type) is built once per figure object and kept here, so a rerun pays neither the copy nor the fingerprint again.
"""

import hashlib
import json
import sys
import threading
from collections import OrderedDict

import plotly.graph_objects as go
import streamlit as st

from demos.style import COLORS, PRESENTER_FONT, PRESENTER_HEIGHT, presenter_figure
from demos.style import page_figure as _page_figure
from pages.ui import marks
from pages.ui.ink import figure_tools
from pages.ui.layout import whiteboard_on

PLOTLY_CONFIG = {"displaylogo": False}
_VIEWS: OrderedDict[tuple, tuple] = OrderedDict()  # (id(fig), whiteboard) -> (fig, view, fingerprint)
_PRESENTER_VIEWS: OrderedDict[str, go.Figure] = OrderedDict()  # content fingerprint -> whiteboard copy
_VIEWS_MAX = 64
_lock = threading.Lock()
VEGA_FRAME = 60  # px a Vega-Lite chart adds around its plot height in the browser: axis labels, legend


def figure_box(key: str):
    """The container a figure and its tools sit in, marked so whiteboard mode can show it first and frame it."""
    return st.container(key=marks.FIGURE + key)


def figure_pair(key: str, widths: tuple[int, int] = (1, 1)):
    """Two columns for two figures that are read together (an expression beside the graph autograd recorded).
    Whiteboard mode stacks every other row of columns that holds a figure; this pair stays side by side there, so
    both are on the screen at once."""
    with st.container(key=marks.PAIR + key):
        return st.columns(widths, gap="large")


def _fingerprint(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def _view(fig: go.Figure, whiteboard: bool) -> tuple[go.Figure, str]:
    """The figure as shown in this mode and its content fingerprint, built once per figure object.

    The entry holds the source figure too, so its id cannot be reused by another object while the entry lives. A
    figure a page builds anew on every run (a new object each time) finds its whiteboard copy by content: its JSON
    costs about a millisecond, the large-type copy tens.
    """
    key = (id(fig), whiteboard)
    with _lock:
        hit = _VIEWS.get(key)
        if hit is not None and hit[0] is fig:
            _VIEWS.move_to_end(key)
            return hit[1], hit[2]
    fingerprint = _fingerprint(fig.to_json()) if whiteboard else ""
    with _lock:
        view = _PRESENTER_VIEWS.get(fingerprint) if whiteboard else None
    if view is None:
        view = presenter_figure(fig) if whiteboard else _page_figure(fig)
    with _lock:
        _VIEWS[key] = (fig, view, fingerprint)
        if whiteboard:
            _PRESENTER_VIEWS[fingerprint] = view
            _PRESENTER_VIEWS.move_to_end(fingerprint)
        for cache in (_VIEWS, _PRESENTER_VIEWS):
            while len(cache) > _VIEWS_MAX:
                cache.popitem(last=False)
    return view, fingerprint


def plot(fig: go.Figure, key: str) -> None:
    """Show a plotly figure in the page theme with its tools; larger and drawable in whiteboard mode."""
    whiteboard = whiteboard_on()
    view, fingerprint = _view(fig, whiteboard)
    with figure_box(key):
        st.plotly_chart(view, key=key, theme="streamlit", config=PLOTLY_CONFIG)
        figure_tools("plotly", key, fingerprint, whiteboard)


def vega(spec: dict, key: str) -> None:
    """Show a Vega-Lite spec in the page theme with its tools, larger in whiteboard mode (as plot does)."""
    whiteboard = whiteboard_on()
    if whiteboard:
        big = {"labelFontSize": PRESENTER_FONT - 2, "titleFontSize": PRESENTER_FONT}
        spec = {**spec, "height": PRESENTER_HEIGHT - VEGA_FRAME,
                "config": {**spec.get("config", {}), "axis": big, "legend": big,
                           "title": {"fontSize": PRESENTER_FONT + 4}}}
    with figure_box(key):
        st.vega_lite_chart(spec, key=key, theme="streamlit")
        fingerprint = _fingerprint(json.dumps(spec, sort_keys=True, default=str)) if whiteboard else ""
        figure_tools("vega", key, fingerprint, whiteboard)


def graph(dot: str, key: str | None = None) -> None:
    """Show graphviz DOT source (rendered in the browser; no dot binary needed) with its tools.

    Without a key, one is derived from the calling line and the source, unique on a page in practice.
    """
    whiteboard = whiteboard_on()
    fingerprint = _fingerprint(dot)
    if key is None:
        caller = sys._getframe(1)
        key = "graph_" + _fingerprint(f"{caller.f_code.co_filename}:{caller.f_lineno}:{dot}")[:10]
    with figure_box(key):
        st.graphviz_chart(dot, width="stretch" if whiteboard else "content")
        figure_tools("graphviz", key, fingerprint if whiteboard else "", whiteboard)


def legend(concepts: list[str] | dict[str, str]) -> None:
    """A row of colour chips naming what each colour means, from the shared palette.

    A list names concepts (their names are the labels); a dict maps a chart's own series labels to concepts (or
    to colours), so the chips read exactly as that chart's legend does: pass the dict the figure was built from.
    """
    items = concepts.items() if isinstance(concepts, dict) else ((c.replace("_", " "), c) for c in concepts)
    chips = " ".join(
        f"<span style='display:inline-block;margin-right:14px'>"
        f"<span style='display:inline-block;width:0.8em;height:0.8em;border-radius:2px;background:{COLORS.get(c, c)};"
        f"margin-right:5px;vertical-align:middle'></span>{label}</span>"
        for label, c in items
    )
    st.html(f"<div class='wb-legend'>{chips}</div>")
