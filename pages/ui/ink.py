"""Drawing on figures, figure downloads and presenter keys: components that run in the browser.

Each is an `st.components.v2` component with inline JavaScript (assets/js), mounted in the page's own DOM (no
iframe): the figure tools find the figure drawn just above them in the same container, serialize its SVG for the
PNG and SVG downloads, and lay an ink canvas over it. No server round trip and no image renderer on the server:
the browser that drew the figure also turns it into an image, so the hosted demo and CI need nothing extra.
"""

import json

import streamlit as st

from demos.registry import ROOT
from demos.style import PEN_COLORS
from pages.ui import marks

_JS = ROOT / "assets" / "js"
_CSS = (ROOT / "assets" / "css" / "ink.css").read_text(encoding="utf-8")


def _module(name: str) -> str:
    """The shared ink engine followed by one component's own script (a single ES module)."""
    return (_JS / "ink.js").read_text(encoding="utf-8") + "\n" + (_JS / name).read_text(encoding="utf-8")


_figure_tools = st.components.v2.component(
    "wb_figure_tools", js=_module("figure_tools.js"), css=_CSS, isolate_styles=False
)
_presenter = st.components.v2.component("wb_presenter", js=marks.script_constant() + _module("presenter.js"), css=_CSS,
                                        isolate_styles=False)
# As JSON text: Streamlit checks every non-scalar value a component is given for a data frame, which imports pandas
# (about 0.4 s) on the first figure of a fresh server.
_PEN_COLORS = json.dumps([{"name": name, "hex": hex_} for name, hex_ in PEN_COLORS.items()])


def figure_tools(kind: str, key: str, fingerprint: str, drawing: bool) -> None:
    """PNG/SVG downloads under a figure; with `drawing`, a Draw button and an ink layer over it.

    Call it right after the figure, inside the same st.container. `fingerprint` names the figure's content: a
    drawing is kept (in the browser's session storage) while it stays the same and dropped when it changes.
    """
    _figure_tools(
        key=f"{key}-tools",
        data={"kind": kind, "id": key, "fp": fingerprint, "draw": drawing, "name": key, "colors": _PEN_COLORS},
    )


def presenter_bar(page: str) -> None:
    """Keyboard shortcuts for steps and sections, and the blank board (whiteboard mode only)."""
    _presenter(key="wb_presenter", data={"page": page, "colors": _PEN_COLORS})
