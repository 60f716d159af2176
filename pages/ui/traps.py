"""A trap beside its correct form: what each side returned when it ran, the sentence read from it, the code."""

import re

import streamlit as st

from demos.traps import TrapPair


def code_span(value) -> str:
    """A value as inline code, literally (a fence longer than any backtick run inside it)."""
    text = str(value)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def returned(values: dict) -> str:
    """One line per returned name and value, the same values the snippet's print shows."""
    return "  \n".join(f"{name}: {code_span(value)}" for name, value in values.items())


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
