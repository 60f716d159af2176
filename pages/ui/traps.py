"""A trap beside its correct form: what each side returned when it ran, the sentence read from it, the code."""

import streamlit as st

from demos.errors import code_span
from demos.traps import TrapPair


def returned(values: dict) -> str:
    """One line per returned name and value, the same values the snippet's print shows."""
    return "  \n".join(f"{name}: {code_span(str(value))}" for name, value in values.items())


def trap_pair(pair: TrapPair, key: str) -> None:
    """Trap on the left, correct form on the right, both as just executed; the measured sentence; the code."""
    from pages import ui  # at call time: tests replace ui.show_code to collect every snippet a page shows

    st.markdown(f"**{pair.title}**")
    wrong, right = st.columns(2, gap="medium")
    with wrong.container(border=True):
        st.markdown(f":red[**{pair.trap_label}**]")
        st.markdown(returned(pair.trap))
    with right.container(border=True):
        st.markdown(f":green[**{pair.correct_label}**]")
        st.markdown(returned(pair.correct))
    st.markdown(pair.sentence)
    ui.show_code(pair.code, key=f"{key}_code", file_name=f"trap_{pair.key}.py")
