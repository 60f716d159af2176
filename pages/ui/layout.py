"""Page skeleton and whiteboard (presenter) mode: the sidebar folded, the full width, each section's figure first
(whiteboard.css), large type, prose and settings folded away, explanations one step at a time, and keys for the
next step, figure and section (pages/ui/ink.py)."""

from collections.abc import Callable
from pathlib import Path

import streamlit as st

from demos.registry import ROOT, by_slug
from pages.ui import marks
from pages.ui.ink import presenter_bar

WHITEBOARD_KEY = "whiteboard"
_CSS = marks.stylesheet((ROOT / "assets" / "css" / "whiteboard.css").read_text())


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


def sections(slug: str, key: str, views: dict[str, Callable[[], None]]) -> None:
    """One tab per view, labelled and ordered as the registry declares page `slug`'s tab set `key`; `views` maps
    each of those labels to the function that draws it, so moving a function in the page cannot move a tab's content.
    The open tab is kept in the URL under `key`.

    Only the open tab's view runs, and it runs as a fragment (st.fragment): a change of one of its own widgets
    reruns that view alone, not the page. The tabs sit in a container marked for the presenter keys (] and [).
    """
    labels = by_slug(slug).tabs(key)
    if set(views) != set(labels):
        raise ValueError(f"{slug}: the views {sorted(views)} are not the registry's tabs {list(labels)} of {key!r}")
    with st.container(key=marks.SECTIONS + key):
        tabs = st.tabs(list(labels), key=key, bind="query-params")
        for tab, label in zip(tabs, labels, strict=True):
            if tab.open:
                with tab:
                    st.fragment(views[label])()


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
        return st.container(key=marks.KEYS + key, horizontal=True, vertical_alignment="bottom", gap="small")
    return st.container(key=f"keys-{key}")


def settings(key: str, label: str = "Settings"):
    """A block of controls: in place on the page; in whiteboard mode folded into one line under the figure (an
    expander), so the figure and its few key controls own the screen. Use as `with ui.settings(key): ...`."""
    if whiteboard_on():
        return st.expander(label, icon=":material/tune:", key=marks.SETTINGS + key)
    return st.container(key=f"settings-{key}")


def steps(items: list[str], key: str) -> None:
    """A numbered explanation; in whiteboard mode one step more appears per click (or → key, ← to go back)."""
    if not whiteboard_on():
        st.markdown("\n".join(f"{i}. {item}" for i, item in enumerate(items, 1)))
        return
    shown_key = f"{key}_shown"
    shown = max(1, min(st.session_state.get(shown_key, 1), len(items)))
    with st.container(key=marks.STEPS + key):  # the presenter keys look for this mark
        st.markdown("\n".join(f"{i}. {item}" for i, item in enumerate(items[:shown], 1)))
        with st.container(horizontal=True, vertical_alignment="center"):
            st.caption(f"Step {shown} of {len(items)}", width="content")
            # each click sets the count in a callback, before the rerun it starts: no st.rerun, so inside a
            # fragment a click reruns only that fragment
            if shown > 1:
                st.button("Previous step", key=f"{key}_prev", icon=":material/arrow_back:", on_click=_show_steps,
                          args=(shown_key, shown - 1))
            if shown < len(items):
                st.button("Next step", key=f"{key}_next", icon=":material/arrow_forward:", on_click=_show_steps,
                          args=(shown_key, shown + 1))
            if shown > 1:
                st.button("Start over", key=f"{key}_reset", icon=":material/restart_alt:", on_click=_show_steps,
                          args=(shown_key, 1))


def _show_steps(shown_key: str, shown: int) -> None:
    st.session_state[shown_key] = shown


def read_asset(*parts: str) -> str:
    return Path(ROOT, "assets", *parts).read_text(encoding="utf-8")
