"""The hostile-link guard: the Streamlit internals it wraps are where it expects them, and it works on them."""

import inspect
import re

import streamlit
from streamlit.runtime.state.common import WidgetMetadata
from streamlit.runtime.state.session_state import SessionState
from streamlit.testing.v1 import AppTest

from pages.shell import url_guard
from tests.conftest import ROOT


def test_streamlit_is_the_version_the_guard_was_written_against():
    """Moving Streamlit means re-reading SessionState._seed_widget_from_url, then updating STREAMLIT_VERSION."""
    pinned = re.search(r"^streamlit==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M).group(1)
    assert streamlit.__version__ == url_guard.STREAMLIT_VERSION == pinned


def test_the_internals_the_guard_relies_on_are_still_there():
    url_guard.install()
    seed = SessionState._seed_widget_from_url
    original = getattr(seed, "__wrapped__", seed)
    assert tuple(inspect.signature(original).parameters) == url_guard.SEED_PARAMETERS
    binding = inspect.getsource(SessionState._handle_query_param_binding)
    assert "self._seed_widget_from_url(" in binding, "bound widgets are no longer seeded through the wrapped method"
    assert "get_initial_value(" in binding, "seeding no longer reads the session's first query snapshot"
    assert callable(SessionState._clear_url_param)
    assert isinstance(SessionState()._new_session_state, dict)
    assert {"value_type", "serializer", "deserializer"} <= set(WidgetMetadata.__dataclass_fields__)


def test_install_wraps_once():
    url_guard.install()
    url_guard.install()
    inner = SessionState._seed_widget_from_url.__wrapped__
    assert not hasattr(inner, "__wrapped__"), "installed twice: the guard wraps itself"


def _guarded_app():
    import streamlit as st

    from pages.shell import url_guard

    url_guard.install()
    notice = st.empty()
    st.number_input("count", 1, 100, 4, key="count", bind="query-params")
    st.number_input("ratio", 0.0, 1.0, 0.5, key="ratio", bind="query-params")
    st.slider("steps", 1, 10, 3, key="steps", bind="query-params")
    st.selectbox("kind", ["a", "b"], key="kind", bind="query-params")
    st.toggle("flag", key="flag", bind="query-params")
    st.tabs(["one", "two"], key="tab", bind="query-params")
    url_guard.show_notice(notice)


def run_with(query: dict) -> AppTest:
    at = AppTest.from_function(_guarded_app, default_timeout=30)
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def test_hostile_values_reset_their_widgets_with_one_notice():
    hostile = {"count": "1e400", "ratio": "nan", "steps": "-inf", "kind": "zzz", "flag": "inf",
               "tab": "123456789012345678901234567890"}
    at = run_with(hostile)
    assert not at.exception, [e.value for e in at.exception]
    assert (at.number_input(key="count").value, at.number_input(key="ratio").value) == (4, 0.5)
    assert (at.slider(key="steps").value, at.selectbox(key="kind").value, at.toggle(key="flag").value) == (3, "a",
                                                                                                          False)
    assert len(at.warning) == 1 and at.warning[0].value.startswith(url_guard.NOTICE_LEAD)
    defaults = at.warning[0].value.split(f"{url_guard.RESET_LEAD}: ")[1]
    for key in hostile:
        assert f"`{key}=" in defaults
    assert not any(key in at.query_params for key in hostile), "the URL no longer holds what was not used"


def test_a_clamped_value_is_named_with_the_value_used():
    at = run_with({"steps": "5.5"})
    assert at.slider(key="steps").value == 5
    assert [w.value for w in at.warning] == [
        f"{url_guard.NOTICE_LEAD}. {url_guard.CLAMPED_LEAD}: `steps=5.5` → `5`."]


def test_valid_values_and_spelled_out_defaults_need_no_notice():
    at = run_with({"count": "7", "ratio": "0.5", "kind": "b", "flag": "true", "tab": "one"})
    assert not at.warning
    assert (at.number_input(key="count").value, at.selectbox(key="kind").value, at.toggle(key="flag").value) == (7, "b",
                                                                                                              True)
