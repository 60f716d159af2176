"""Figures on the page: plotly follows the active theme; whiteboard mode enlarges type and height."""

import plotly.graph_objects as go
import streamlit as st

from demos.style import COLORS
from pages.ui.layout import whiteboard_on

WHITEBOARD_FONT = 20


def plot(fig: go.Figure, key: str) -> None:
    """Show a plotly figure in the page theme, larger in whiteboard mode."""
    if whiteboard_on():
        fig = go.Figure(fig)
        big = dict(size=WHITEBOARD_FONT)
        fig.update_layout(font=big, legend_font=big, title_font=dict(size=WHITEBOARD_FONT + 4),
                          height=int((fig.layout.height or 380) * 1.4))
        fig.update_xaxes(tickfont=big, title_font=big)
        fig.update_yaxes(tickfont=big, title_font=big)
        fig.update_annotations(font_size=WHITEBOARD_FONT)
    st.plotly_chart(fig, key=key, theme="streamlit", config={"displaylogo": False})


def vega(spec: dict, key: str) -> None:
    """Show a Vega-Lite spec in the page theme, larger in whiteboard mode (as plot does for plotly)."""
    if whiteboard_on():
        big = {"labelFontSize": WHITEBOARD_FONT, "titleFontSize": WHITEBOARD_FONT}
        spec = {**spec, "height": int(spec.get("height", 320) * 1.4),
                "config": {"axis": big, "legend": big}}
    st.vega_lite_chart(spec, key=key, theme="streamlit")


def graph(dot: str) -> None:
    """Show graphviz DOT source (rendered in the browser; no dot binary needed)."""
    st.graphviz_chart(dot, width="stretch" if whiteboard_on() else "content")


def legend(concepts: list[str]) -> None:
    """A row of colour chips naming what each colour means, from the shared palette."""
    chips = " ".join(
        f"<span style='display:inline-block;margin-right:14px'>"
        f"<span style='display:inline-block;width:12px;height:12px;border-radius:2px;background:{COLORS[c]};"
        f"margin-right:5px;vertical-align:middle'></span>{c.replace('_', ' ')}</span>"
        for c in concepts
    )
    st.html(f"<div style='font-size:0.9rem'>{chips}</div>")
