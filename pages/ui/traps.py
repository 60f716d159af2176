"""A trap beside its correct form: what each side returned when it ran, the sentence read from it, the code."""

import streamlit as st

from demos.traps import TrapPair
from pages.ui.code import show_code


def _printed(values: dict) -> str:
    """One line per returned name, as the snippet's print shows the same dict."""
    return "\n".join(f"{name}: {value}" for name, value in values.items())


def trap_pair(pair: TrapPair, key: str) -> None:
    """Trap on the left, correct form on the right, both as just executed; the measured sentence; the code."""
    st.markdown(f"**{pair.title}**")
    wrong, right = st.columns(2, gap="medium")
    with wrong:
        st.markdown(f":red[**{pair.trap_label}**]")
        st.code(_printed(pair.trap), language="text", wrap_lines=True)
    with right:
        st.markdown(f":green[**{pair.correct_label}**]")
        st.code(_printed(pair.correct), language="text", wrap_lines=True)
    st.markdown(pair.sentence)
    show_code(pair.code, key=f"{key}_code", file_name=f"trap_{pair.key}.py")
