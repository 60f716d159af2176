"""A shared link is visitor input: a URL value no widget can take puts that widget at a valid value, with a notice.

Streamlit seeds every widget bound to the URL (`bind="query-params"`) from the query string the session opened
with. Since binding arrived (1.5x) it refuses what a widget cannot take: a value that does not parse (garbage,
`nan` where a whole number goes), an unknown option or a value equal to the default is removed from the URL and
the widget stays at its default; a number out of range is clamped and the URL corrected. It does so silently.

So the notice is built from the public `st.query_params`: `first_visit` reads the query before a page's first run
in a session, `show_notice` compares it with the query after the run and names, in one short notice above the
page, each bound widget's value that Streamlit dropped (shown at the default) or corrected (shown at the value
used). A value that spelled out the widget's current value (its default) is not named.

One gap remains in Streamlit 1.67: `?mem_batch=1e400` reaches `int(float('inf'))` in number_input's deserializer,
whose OverflowError escapes the ValueError/TypeError/IndexError that seeding catches, and the page ends in a
traceback. `install()` adds that one exception type, nothing else (tests/test_url_guard.py says when Streamlit no
longer needs it).
"""

import functools
import inspect
import logging

import streamlit as st
from streamlit.runtime.state.session_state import SessionState

from demos.errors import quoted

NOTICE_LEAD = "This link holds settings this page cannot use"
RESET_LEAD = "Shown at the default instead"
CLAMPED_LEAD = "Shown at the nearest valid value"
SEEN_KEY = "_whiteboard_url_checked"  # session state: the pages whose first run compared the link
_MARK = "_whiteboard_overflow_shim"
_log = logging.getLogger(__name__)


# ---- the shim: Streamlit's URL seeding treats OverflowError as the invalid value it is ---------------------------

def install() -> bool:
    """Wrap SessionState._seed_widget_from_url once per process so OverflowError clears the parameter as Streamlit
    does for ValueError; False (and a log line) if the method or its user_key argument moved."""
    seed = getattr(SessionState, "_seed_widget_from_url", None)
    if seed is None or "user_key" not in inspect.signature(seed).parameters:
        _log.error("Streamlit's URL seeding moved: a link with ?number=1e400 is not guarded")
        return False
    if getattr(seed, _MARK, False):
        return True
    signature = inspect.signature(seed)

    @functools.wraps(seed)
    def seed_without_overflow(self, *args, **kwargs):
        try:
            return seed(self, *args, **kwargs)
        except OverflowError:  # int(float('inf')): an invalid value, like those Streamlit already clears
            user_key = signature.bind(self, *args, **kwargs).arguments["user_key"]
            self._clear_url_param(user_key)  # what Streamlit does with the values it refuses
            return False

    setattr(seed_without_overflow, _MARK, True)
    SessionState._seed_widget_from_url = seed_without_overflow
    return True


# ---- the notice, from st.query_params before and after a page's first run ----------------------------------------

def first_visit(page: str) -> dict[str, list[str]] | None:
    """The query as the link gave it, if this is the page's first run in this session (when its widgets are
    seeded from the link); None on later runs. Call it before any bound widget of the run is drawn."""
    seen = st.session_state.setdefault(SEEN_KEY, set())
    if page in seen:
        return None
    seen.add(page)
    return {key: st.query_params.get_all(key) for key in st.query_params}


def link_fixes(before: dict[str, list[str]], after: dict[str, list[str]],
               values: dict[str, object]) -> dict[str, tuple[str, str | None]]:
    """param -> (URL text, text used or None for the default) for each bound widget (a key in `values`, the
    widgets' values after the run) whose URL value Streamlit dropped or corrected."""
    fixes = {}
    for key, raw in before.items():
        if key not in values or after.get(key) == raw:
            continue
        now = after.get(key)
        if not now and _spells(raw, values[key]):
            continue  # the link spelled out the value the widget has: Streamlit only tidied the URL
        fixes[key] = (", ".join(raw), ", ".join(now) if now else None)
    return fixes


def _spells(raw: list[str], value: object) -> bool:
    """Whether the URL text says `value` (Streamlit drops a spelled-out default from the URL)."""
    if isinstance(value, list | tuple):
        return len(raw) == len(value) and all(_spells([r], v) for r, v in zip(raw, value, strict=True))
    text = raw[-1] if raw else ""
    if isinstance(value, bool):
        return text.lower() == str(value).lower()
    if isinstance(value, int | float):
        try:
            return float(text) == value
        except ValueError:
            return False
    return text == str(value)


def notice_text(fixes: dict[str, tuple[str, str | None]]) -> str:
    """A short notice naming each URL value the page did not use as written, and what it used instead."""
    reset = [quoted(f"{key}={raw}") for key, (raw, used) in fixes.items() if used is None]
    clamped = [f"{quoted(f'{key}={raw}')} → {quoted(used)}" for key, (raw, used) in fixes.items() if used is not None]
    text = f"{NOTICE_LEAD}."
    if reset:
        text += f" {RESET_LEAD}: {', '.join(reset)}."
    if clamped:
        text += f" {CLAMPED_LEAD}: {', '.join(clamped)}."
    return text


def show_notice(placeholder, before: dict[str, list[str]] | None) -> None:
    """Fill the placeholder (made at the top of the page before it ran) with the notice, if the page's first run
    did not take every bound widget's URL value as written."""
    if before is None:
        return
    after = {key: st.query_params.get_all(key) for key in st.query_params}
    values = {key: st.session_state[key] for key in before if key in st.session_state}
    fixes = link_fixes(before, after, values)
    if fixes:
        placeholder.warning(notice_text(fixes), icon=":material/link_off:")
