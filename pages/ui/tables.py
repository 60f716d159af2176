"""Tables: an interactive grid on the page; whole, wrapped HTML at body size on a shared screen."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import streamlit as st

from demos.errors import showable
from pages.ui.layout import whiteboard_on

if TYPE_CHECKING:
    import pandas as pd

# st.table renders every cell and header as markdown (links, images, emphasis, math, colour directives, icons),
# and table cells can hold visitor text (an uploaded result file, a shared link): every ASCII punctuation mark
# is backslash-escaped (CommonMark lets any of them be), so a cell shows its text as written.
_MARKUP = re.compile(r"""([!-/:-@\[-`{-~])""")
# GFM also links bare URLs and e-mail addresses found in the text after parsing, escapes or not: a word joiner
# (U+2060, invisible) after "://", "www" and "@" keeps them plain text.
_AUTOLINK = re.compile(r"(?<=://)|(?<=www)(?=\.)|(?<=@)", re.IGNORECASE)


def table(data, *, whole: bool = False, hide_index: bool = True, **dataframe_options) -> None:
    """Show a table: st.dataframe (sortable, scrollable) normally; st.table in whiteboard mode or with `whole`.

    st.dataframe draws on a canvas at a fixed small size and cuts long cells; st.table is HTML, so every cell is
    shown whole (wrapped) and grows with the whiteboard's type. Use `whole` for tables of sentences or code.
    `dataframe_options` (width, height, column_config, ...) apply to the grid only. Text is shown literally in
    both: never as markdown, and with lone surrogates and bidi controls replaced (demos.errors.showable).
    """
    import pandas as pd  # here, not at app start: the first page a visitor opens needs no table

    frame = data if isinstance(data, pd.DataFrame) else pd.DataFrame(data)
    if whole or whiteboard_on():
        st.table(_readable(frame), hide_index=hide_index)
    else:
        st.dataframe(_texts(frame, showable), hide_index=hide_index, **dataframe_options)


def literal(text: str) -> str:
    """Text that st.table's markdown shows exactly as written."""
    return _MARKUP.sub(r"\\\1", _AUTOLINK.sub("\u2060", showable(text)))


def _texts(frame: pd.DataFrame, fix) -> pd.DataFrame:
    """fix() applied to every text cell, column header and index label."""
    def cell(v):
        return fix(v) if isinstance(v, str) else v

    return frame.map(cell).rename(columns=cell, index=cell)


def _readable(frame: pd.DataFrame) -> pd.DataFrame:
    """Floats to four significant digits (an HTML table prints every digit a float has), every text literal."""
    def label(v):
        return literal(v) if isinstance(v, str) else v

    def cell(v):  # one pass over the cells: a table is redrawn on every rerun
        return label(f"{v:.4g}" if isinstance(v, float) else v)

    return frame.map(cell).rename(columns=label, index=label)
