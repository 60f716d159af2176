"""Page skeleton and whiteboard (presenter) mode: the sidebar folded, the full width, each section's figure first
(whiteboard.css), large type, prose and settings folded away, explanations one step at a time, and keys for the
next step, figure and section (pages/ui/ink.py)."""

from collections.abc import Callable, Sequence
from pathlib import Path

import streamlit as st

from demos.registry import ROOT, by_slug
from pages.ui.ink import presenter_bar

WHITEBOARD_KEY = "whiteboard"
_CSS = (ROOT / "assets" / "css" / "whiteboard.css").read_text()


def whiteboard_on() -> bool:
    """Whether the sidebar's whiteboard toggle is on (it is bound to the URL as ?whiteboard=true)."""
    return bool(st.session_state.get(WHITEBOARD_KEY, False))


def whiteboard_requested() -> bool:
    """Whiteboard mode as this run will have it, readable before the toggle exists (from the URL on a first run)."""
    if WHITEBOARD_KEY in st.session_state:
        return whiteboard_on()
    return st.query_params.get(WHITEBOARD_KEY, "").lower() == "true"


def sidebar_controls(page: str = "") -> None:
    """The controls every page shares: the whiteboard toggle and how to share a view; in whiteboard mode, the
    presenter's stylesheet and bar (keys, blank board) at the top of the page."""
    with st.sidebar:
        st.toggle(
            "Whiteboard mode", key=WHITEBOARD_KEY, bind="query-params",
            help="For a shared screen: the sidebar folds, each section opens on its figure with the controls and "
                 "prose folded under it, type grows, → and ← reveal explanations step by step and move figure by "
                 "figure, ] and [ switch sections, and every figure has Draw.",
        )
        st.caption("The open tab and its settings are kept in the address bar: copy the URL to share this view. "
                   "A result behind a button waits for its press.")
    if whiteboard_on():
        st.html(f"<style>{_CSS}</style>")
        presenter_bar(page)


def page_header(slug: str) -> None:
    """Title and one-line summary from the registry."""
    topic = by_slug(slug)
    st.title(topic.title)
    st.caption(topic.summary)


def section_tabs(slug: str, key: str, sections: Sequence[Callable[[], None]]) -> None:
    """One tab per section, labelled as the registry declares page `slug`'s tab set `key`, the open tab kept in the
    URL under `key`; `sections` are the sections' functions in the registry's order.

    Only the open tab's function runs: a rerun computes and sends one section, not the whole page. The tabs sit in
    a container marked for the presenter keys (] and [ switch sections).
    """
    labels = by_slug(slug).tabs(key)
    with st.container(key=f"wbsections-{key}"):
        tabs = st.tabs(list(labels), key=key, bind="query-params")
        for tab, section in zip(tabs, sections, strict=True):
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


def key_controls(key: str):
    """A view's few key controls (the ones a presenter changes while talking): in place on the page; in whiteboard
    mode one compact row that whiteboard.css moves above the view's figure, so they can be changed with the figure
    on the screen. The view's other controls go in `settings`. Use as `with ui.key_controls(key): ...`."""
    if whiteboard_on():
        return st.container(key=f"wbkeys-{key}", horizontal=True, vertical_alignment="bottom", gap="small")
    return st.container(key=f"keys-{key}")


def settings(key: str, label: str = "Settings"):
    """A block of controls: in place on the page; in whiteboard mode folded into one line under the figure (an
    expander), so the figure and its few key controls own the screen. Use as `with ui.settings(key): ...`."""
    if whiteboard_on():
        return st.expander(label, icon=":material/tune:", key=f"wbsettings-{key}")
    return st.container(key=f"settings-{key}")


def steps(items: list[str], key: str) -> None:
    """A numbered explanation; in whiteboard mode one step more appears per click (or → key, ← to go back)."""
    if not whiteboard_on():
        st.markdown("\n".join(f"{i}. {item}" for i, item in enumerate(items, 1)))
        return
    shown_key = f"{key}_shown"
    shown = max(1, min(st.session_state.get(shown_key, 1), len(items)))
    with st.container(key=f"wbsteps-{key}"):  # the presenter keys look for this mark
        st.markdown("\n".join(f"{i}. {item}" for i, item in enumerate(items[:shown], 1)))
        with st.container(horizontal=True, vertical_alignment="center"):
            st.caption(f"Step {shown} of {len(items)}", width="content")
            if shown > 1 and st.button("Previous step", key=f"{key}_prev", icon=":material/arrow_back:"):
                _show_steps(shown_key, shown - 1)
            if shown < len(items) and st.button("Next step", key=f"{key}_next", icon=":material/arrow_forward:"):
                _show_steps(shown_key, shown + 1)
            if shown > 1 and st.button("Start over", key=f"{key}_reset", icon=":material/restart_alt:"):
                _show_steps(shown_key, 1)


def _show_steps(shown_key: str, shown: int) -> None:
    st.session_state[shown_key] = shown
    st.rerun()


def read_asset(*parts: str) -> str:
    return Path(ROOT, "assets", *parts).read_text(encoding="utf-8")
