"""A shared link is visitor input: a URL value no widget can take puts that widget at a valid value, with a notice.

Streamlit 1.67 seeds every widget bound to the URL (`bind="query-params"`) from the query string its session
opened with, in `SessionState._seed_widget_from_url`. It drops values it cannot parse (garbage, an unknown
option, a number out of range) without a word, and lets others escape as exceptions: `?mem_batch=1e400`
reaches `int(float('inf'))` in number_input's deserializer and the page ends in an OverflowError. Page code
cannot catch that per widget: the value is read from the session's first query snapshot inside the widget call.

So the shell calls `install()` once, which wraps that one step for every widget of every page:
- any exception while a URL value is parsed or deserialized clears the parameter, leaving the widget at its
  default (what Streamlit already does for ValueError, TypeError and IndexError);
- every value Streamlit did not take as written (cleared, or clamped and corrected in the URL) is recorded
  for this script run, and `show_notice` names them in one short notice above the page.

It relies on Streamlit internals read in STREAMLIT_VERSION; tests/test_url_guard.py fails if they move.
"""

import inspect
import logging
import threading

from streamlit.runtime.state.query_params import parse_url_param
from streamlit.runtime.state.session_state import SessionState

from demos.errors import quoted

STREAMLIT_VERSION = "1.67.0"  # the version whose SessionState internals this module was written against
SEED_PARAMETERS = ("self", "metadata", "user_key", "widget_id", "url_value")
NOTICE_LEAD = "This link holds settings this page cannot use"
RESET_LEAD = "Shown at the default instead"
CLAMPED_LEAD = "Shown at the nearest valid value"
_MARK = "_whiteboard_url_guard"
_log = logging.getLogger(__name__)
_run = threading.local()  # each script run has its own thread: what this run's seeding did not take as written


def install() -> bool:
    """Wrap SessionState's URL seeding once per process; False (and a log line) if its signature moved."""
    seed = SessionState._seed_widget_from_url
    if getattr(seed, _MARK, False):
        return True
    if tuple(inspect.signature(seed).parameters) != SEED_PARAMETERS:
        _log.error("Streamlit's _seed_widget_from_url changed (tested with %s): hostile links are not guarded",
                   STREAMLIT_VERSION)
        return False

    def guarded_seed(self, metadata, user_key, widget_id, url_value):
        try:
            seeded = seed(self, metadata, user_key, widget_id, url_value)
        except Exception as err:  # any value a visitor can put in a URL must not break the page
            _log.info("URL value for %r could not be used (%s): cleared", user_key, type(err).__name__)
            self._clear_url_param(user_key)
            seeded = False
        if not seeded and not _names_default(metadata, url_value):
            _record(user_key, url_value, None)
        elif seeded and _was_corrected(metadata, url_value, self._new_session_state.get(user_key)):
            _record(user_key, url_value, self._new_session_state.get(user_key))
        return seeded

    setattr(guarded_seed, _MARK, True)
    guarded_seed.__wrapped__ = seed
    SessionState._seed_widget_from_url = guarded_seed
    return True


def _names_default(metadata, url_value) -> bool:
    """Whether the URL spelled out the widget's default (Streamlit then drops it from the URL: nothing to tell)."""
    try:
        return parse_url_param(url_value, metadata.value_type) == metadata.serializer(metadata.deserializer(None))
    except Exception:  # a value that does not even parse is not the default
        return False


def _was_corrected(metadata, url_value, value) -> bool:
    """Whether the seeded value differs from what the URL said (Streamlit clamped or filtered it)."""
    try:
        return metadata.serializer(value) != parse_url_param(url_value, metadata.value_type)
    except Exception:  # a value that does not parse was not taken as written
        return True


def _record(key: str, url_value, value) -> None:
    if not hasattr(_run, "fixes"):
        _run.fixes = {}
    raw = url_value[-1] if isinstance(url_value, list) and url_value else url_value
    _run.fixes[key] = (raw if isinstance(raw, str) else "", value)


def take_fixes() -> dict[str, tuple[str, object]]:
    """What seeding changed in this script run so far (param -> (URL text, value used or None for the default))."""
    fixes = getattr(_run, "fixes", {})
    _run.fixes = {}
    return fixes


def notice_text(fixes: dict[str, tuple[str, object]]) -> str:
    """A short notice naming each URL value the page did not use as written, and what it used instead."""
    reset = [quoted(f"{key}={raw}") for key, (raw, value) in fixes.items() if value is None]
    clamped = [f"{quoted(f'{key}={raw}')} → {quoted(value)}"
               for key, (raw, value) in fixes.items() if value is not None]
    text = f"{NOTICE_LEAD}."
    if reset:
        text += f" {RESET_LEAD}: {', '.join(reset)}."
    if clamped:
        text += f" {CLAMPED_LEAD}: {', '.join(clamped)}."
    return text


def show_notice(placeholder) -> None:
    """Fill the placeholder (made at the top of the page before it ran) with the notice, if any value was changed."""
    fixes = take_fixes()
    if fixes:
        placeholder.warning(notice_text(fixes), icon=":material/link_off:")
