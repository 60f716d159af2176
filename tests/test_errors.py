"""Visitor text in messages is quoted literally; an unexpected exception is a sentence, not a traceback."""

import re

import streamlit
from hypothesis import given
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from demos.errors import QUOTE_LIMIT, quoted, showable
from pages.shell import entry
from pages.ui.errors import BUG_NOTE


def _unquote(span: str) -> str:
    """The text a markdown code span shows (CommonMark: strip the fences, then one space each side if both)."""
    fence = re.match(r"`+", span).group()
    inner = span[len(fence) : -len(fence)]
    return inner[1:-1] if inner.startswith(" ") and inner.endswith(" ") and inner.strip() else inner


@given(st.text(max_size=200))
def test_quoted_text_is_one_code_span_showing_the_text(text):
    out = quoted(text)
    shown = re.sub(r"\s+", " ", text).strip()
    if not shown:
        assert out == "(nothing)"
        return
    fence = re.match(r"`+", out).group()
    assert out.endswith(fence) and fence not in _unquote(out), "no backtick run inside closes the span early"
    expected = shown if len(shown) <= QUOTE_LIMIT else shown[: QUOTE_LIMIT - 1] + "…"
    assert _unquote(out) == expected


def test_markup_in_visitor_text_stays_inside_the_span():
    assert quoted("![t](http://attacker/p.png)") == "`![t](http://attacker/p.png)`"
    assert quoted("__import__('os')") == "`__import__('os')`"


BUGGY_APP = """
import streamlit as st
from pages.ui.errors import input_errors
with input_errors():
    {}["missing"]
st.write("below")
"""


def test_an_unexpected_exception_is_one_sentence_and_the_page_goes_on(monkeypatch):
    monkeypatch.undo()  # this test wants the bug box that the suite's autouse check (conftest) forbids
    at = AppTest.from_string(BUGGY_APP).run()
    assert not at.exception
    assert len(at.error) == 1 and BUG_NOTE in at.error[0].value and "KeyError" in at.error[0].value
    assert at.markdown[-1].value == "below"


SHELL_APP = """
from pages.shell import entry
entry.main()
"""


def test_a_page_that_raises_outside_its_blocks_is_one_sentence_in_the_shell(monkeypatch, tmp_path):
    monkeypatch.undo()  # the bug box is what this test wants to see
    page = tmp_path / "broken.py"
    page.write_text('import streamlit as st\nst.write("above")\n{}["missing"]\n')
    # set here, not in the app's source: monkeypatch puts the real navigation back for the tests that follow
    monkeypatch.setattr(entry, "navigation_pages",
                        lambda: {"Start": [streamlit.Page(str(page), title="Broken", default=True)]})
    at = AppTest.from_string(SHELL_APP).run()
    assert not at.exception
    assert len(at.error) == 1 and BUG_NOTE in at.error[0].value and "KeyError" in at.error[0].value
    assert at.markdown[0].value == "above"


@given(st.text(max_size=60))
def test_every_quote_can_be_sent_to_a_page_and_keeps_its_order(text):
    out = quoted(text)
    out.encode("utf-8")  # a lone surrogate would raise here, and the page could not send the message
    assert not re.search("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]", out), "no bidi control reorders it"


def test_lone_surrogates_and_bidi_controls_become_replacement_characters():
    assert showable("a\ud800b\u202ec\u2066d") == "a\ufffdb\ufffdc\ufffdd"
    assert quoted("\ud800") == "`\ufffd`"
    assert showable("naïve, 日本, emoji 🙂") == "naïve, 日本, emoji 🙂"  # real characters are kept
