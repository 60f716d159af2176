"""Tables: an interactive grid on the page; whole, wrapped HTML at body size on a shared screen."""

import pandas as pd
import streamlit as st

from pages.ui.layout import whiteboard_on


def table(data, *, whole: bool = False, hide_index: bool = True, **dataframe_options) -> None:
    """Show a table: st.dataframe (sortable, scrollable) normally; st.table in whiteboard mode or with `whole`.

    st.dataframe draws on a canvas at a fixed small size and cuts long cells; st.table is HTML, so every cell is
    shown whole (wrapped) and grows with the whiteboard's type. Use `whole` for tables of sentences or code.
    `dataframe_options` (width, height, column_config, ...) apply to the grid only.
    """
    if whole or whiteboard_on():
        st.table(_readable(data), hide_index=hide_index)
    else:
        st.dataframe(data, hide_index=hide_index, **dataframe_options)


def _readable(data) -> pd.DataFrame:
    """Floats to four significant digits (an HTML table prints every digit a float has)."""
    frame = data if isinstance(data, pd.DataFrame) else pd.DataFrame(data)
    return frame.map(lambda v: f"{v:.4g}" if isinstance(v, float) else v)
