"""The learner's progress for the whole session: tracker ticks and questions to ask again, on every page.

It lives in session state under one key (not in widget keys, which Streamlit drops when a page's widgets are
not drawn), so ticks made on Home, mastered on Practice, or loaded from a file or link survive page changes.
The progress link (`/?progress=1.…`) carries it to a reload or another device.
"""

import urllib.parse

import streamlit as st

from demos.errors import InputError
from demos.registry import TOPICS, registered
from demos.tracker import Progress, progress_link_value, read_progress_link

STATE_KEY = "wb_progress"
LINK_PARAM = "progress"
_SEEN_KEY = "wb_progress_link_seen"
_NOTICE_KEY = "wb_progress_notice"


def known_concepts() -> dict[str, tuple[str, ...]]:
    """Topic slug -> its tracker concepts, for every topic page that exists and has a checklist."""
    return {t.slug: t.concepts for t in TOPICS if t.exists and t.concepts}


def progress() -> Progress:
    return st.session_state.get(STATE_KEY, Progress())


def set_progress(value: Progress) -> None:
    st.session_state[STATE_KEY] = value


def set_ticked(slug: str, concept: str, ticked: bool) -> None:
    """Tick or untick one concept, keeping the tracker's order of concepts."""
    current = progress()
    have = set(current.done.get(slug, ())) - {concept} | ({concept} if ticked else set())
    done = {**current.done, slug: tuple(c for c in known_concepts().get(slug, ()) if c in have)}
    set_progress(Progress({s: c for s, c in done.items() if c}, current.review))


def set_review(review: tuple[str, ...]) -> None:
    set_progress(Progress(progress().done, review))


def load_link_from_url() -> None:
    """Read `?progress=` once per value: load it into the session, or keep everything and say why.

    While the URL holds an accepted progress link, it is kept equal to the session's progress, so a reload
    restores exactly what is ticked now. A refused link stays as it was, with its sentence.
    """
    value = st.query_params.get(LINK_PARAM)
    if value is None:
        return
    if value != st.session_state.get(_SEEN_KEY):
        st.session_state[_SEEN_KEY] = value
        try:
            loaded = read_progress_link(value, known_concepts())
        except InputError as err:
            st.session_state[_NOTICE_KEY] = ("error", f"{err} Nothing was changed.", value)
            return
        set_progress(loaded)
        st.session_state[_NOTICE_KEY] = ("success", f"Progress loaded from the link: {_summary(loaded)}.", value)
    if _refused(value):
        return
    current = link_value()
    if current != value:
        st.query_params[LINK_PARAM] = current
        st.session_state[_SEEN_KEY] = current


def _refused(value: str) -> bool:
    kind, _, refused = st.session_state.get(_NOTICE_KEY, (None, None, None))
    return kind == "error" and refused == value


def show_link_notice() -> None:
    """The sentence about a progress link: loaded (once, on the run that loaded it), or refused (while in the URL)."""
    kind, message, value = st.session_state.get(_NOTICE_KEY, (None, None, None))
    if kind == "success":
        del st.session_state[_NOTICE_KEY]
        st.success(message, icon=":material/restore:")
    elif kind == "error" and st.query_params.get(LINK_PARAM) == value:
        st.error(message, icon=":material/link_off:")


def link_value() -> str:
    return progress_link_value(progress(), known_concepts())


def link_url() -> str:
    """The app's home URL with this session's progress in it (a relative URL where the browser's is unknown)."""
    parts = urllib.parse.urlsplit(st.context.url or "")
    path = parts.path.rstrip("/")
    slugs = {t.slug for t in registered()}
    if path.rsplit("/", 1)[-1] in slugs:
        path = path.rsplit("/", 1)[0]
    query = urllib.parse.urlencode({LINK_PARAM: link_value()})
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path + "/", query, ""))


def progress_link_panel() -> None:
    """The progress link, copyable: it restores these ticks and review questions on any device, no account."""
    current = progress()
    st.markdown("**Progress link**")
    st.caption(f"It holds {_summary(current)}, nothing else. Open it later or on another device to carry on; "
               "bookmark it: it is not stored anywhere.")
    st.code(link_url(), language=None, wrap_lines=True)


def _summary(value: Progress) -> str:
    return f"{plural(value.ticked(), 'ticked concept')} and {plural(len(value.review), 'question')} to review"


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
