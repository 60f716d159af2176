"""Page skeleton and whiteboard mode: large type, prose folded away, explanations one step at a time."""

from pathlib import Path

import streamlit as st

from pages.shell.registry import ROOT, by_slug

WHITEBOARD_KEY = "whiteboard"
_CSS = (ROOT / "assets" / "css" / "whiteboard.css").read_text()


def whiteboard_on() -> bool:
    """Whether the sidebar's whiteboard toggle is on (it is bound to the URL as ?whiteboard=true)."""
    return bool(st.session_state.get(WHITEBOARD_KEY, False))


def sidebar_controls() -> None:
    """The controls every page shares: the whiteboard toggle and how to share a view."""
    with st.sidebar:
        st.toggle(
            "Whiteboard mode", key=WHITEBOARD_KEY, bind="query-params",
            help="Large figures and type for a shared screen; prose folds away; explanations reveal step by step.",
        )
        st.caption("The open tab and its settings are kept in the address bar: copy the URL to share this view. "
                   "A result behind a button waits for its press.")
    if whiteboard_on():
        st.html(f"<style>{_CSS}</style>")


def page_header(slug: str) -> None:
    """Title and one-line summary from the registry."""
    topic = by_slug(slug)
    st.title(topic.title)
    st.caption(topic.summary)


def section_tabs(sections: dict, key: str) -> None:
    """One tab per section (title -> function), the open tab kept in the URL under `key`.

    Only the open tab's function runs: a rerun computes and sends one section, not the whole page.
    """
    for tab, section in zip(st.tabs(list(sections), key=key, bind="query-params"), sections.values(), strict=True):
        if tab.open:
            with tab:
                section()


def prose(markdown: str, label: str = "Explanation") -> None:
    """Explanatory text; in whiteboard mode it folds into an expander so the figure owns the screen."""
    if whiteboard_on():
        with st.expander(label, icon=":material/notes:"):
            st.markdown(markdown)
    else:
        st.markdown(markdown)


def steps(items: list[str], key: str) -> None:
    """A numbered explanation; in whiteboard mode one step more appears per click."""
    if not whiteboard_on():
        st.markdown("\n".join(f"{i}. {item}" for i, item in enumerate(items, 1)))
        return
    shown_key = f"{key}_shown"
    shown = min(st.session_state.get(shown_key, 1), len(items))
    st.markdown("\n".join(f"{i}. {item}" for i, item in enumerate(items[:shown], 1)))
    st.caption(f"Step {shown} of {len(items)}")
    left, right = st.columns(2)
    if shown < len(items) and left.button("Next step", key=f"{key}_next", icon=":material/arrow_forward:"):
        st.session_state[shown_key] = shown + 1
        st.rerun()
    if shown > 1 and right.button("Start over", key=f"{key}_reset"):
        st.session_state[shown_key] = 1
        st.rerun()


def read_asset(*parts: str) -> str:
    return Path(ROOT, "assets", *parts).read_text(encoding="utf-8")
