"""Heavy work behind a button, whose result stays on screen until its own inputs change."""

import streamlit as st

from pages.ui.layout import whiteboard_on

_NO_DEFAULT = object()
STALE = "The settings changed since the last run: press the button to run them."


def run_button(label: str, key: str, params=(), icon: str = ":material/play_arrow:", default=_NO_DEFAULT,
               **button) -> bool:
    """A button for heavy work; True while the result for exactly `params` should be on screen.

    The parameters of the last press are kept in `st.session_state[key]` and the result is computed on them
    through ui.compute, so it survives reruns caused by other widgets and goes away when its own inputs change.
    After a change the visitor is told to press again instead of the work starting by itself (in whiteboard mode,
    where the button sits in a figure's key row, the button turns primary and says so in its tooltip).

    `default`: the parameters of the view's default case. While `params` equal them the result is shown without
    a press: the case runs once per server (the cache is shared by every visitor) so the view opens on its
    figure, and any other setting still waits for the button.
    """
    last = st.session_state.get(key)
    stale = last is not None and last != params and params != default
    if stale and whiteboard_on():  # in a key row a notice box would not fit: the button itself stands out
        button = {**button, "type": "primary", "help": STALE}
    if st.button(label, key=f"{key}_button", icon=icon, **button):
        st.session_state[key] = last = params
    if last == params or params == default:
        return True
    if stale and not whiteboard_on():
        st.info(STALE, icon=":material/info:")
    return False


def ran_with(key: str):
    """The parameters of the button's last press (None if it was never pressed in this session)."""
    return st.session_state.get(key)
