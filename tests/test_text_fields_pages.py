"""Every text field on every page (each tab too), given hostile text: a clean sentence, never a traceback or a bug.

The fields are discovered from the running pages, so a new field is covered without editing this file. The
parsers themselves are fuzzed in test_input_messages.py; this checks the path from the widget to the demo.
"""

import pytest

from tests.conftest import every_section, open_page, view_id
from tests.messages import check_message

HOSTILE = ("__import__('os')", "![t](http://x) 3,,4 ]", "9" * 60 + "e999", "   ")


@pytest.mark.parametrize("page, query", every_section(), ids=view_id)
def test_hostile_text_in_every_field_is_a_clean_sentence(page, query):
    at = open_page(page, query=query)
    fields = [(w.key, w.value) for w in [*at.text_input, *at.text_area] if w.key]
    for key, original in fields:
        for text in HOSTILE:
            widget = next(w for w in [*at.text_input, *at.text_area] if w.key == key)
            widget.input(text).run()
            assert not at.exception, (key, text, [e.value for e in at.exception])
            for err in at.error:
                check_message(err.value, text)
        next(w for w in [*at.text_input, *at.text_area] if w.key == key).input(original or "").run()
