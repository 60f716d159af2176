"""Every text field on every page (each tab too), given hostile text: a clean sentence, never a traceback or a bug.

The fields are discovered from the running pages, so a new field is covered without editing this file. The
parsers themselves are fuzzed in test_input_messages.py; this checks the path from the widget to the demo.
"""

import re

import pytest

from tests.conftest import ROOT, open_page
from tests.messages import check_message

HOSTILE = ("__import__('os')", "![t](http://x) 3,,4 ]", "9" * 60 + "e999", "   ")
TAB_KEY = re.compile(r"key=\"(\w+_tab)\"")  # the widget that picks a page's section, bound to the URL


def sections(page: str) -> list[dict]:
    """A query per section of a page whose sections are lazy (only the chosen one runs), else one empty query."""
    found = TAB_KEY.search((ROOT / page).read_text())
    if not found:
        return [{}]
    key, at = found.group(1), open_page(page)
    picker = [b for b in at.button_group if b.key == key]
    labels = picker[0].options if picker else [t.label for t in at.tabs]
    return [{key: label} for label in labels]


def views() -> list[tuple[str, dict]]:
    """(page file, query) for every page, and for every section of a page with sections."""
    pages = [f"pages/{p.name}" for p in sorted((ROOT / "pages").glob("*.py")) if p.name != "__init__.py"]
    return [(page, query) for page in pages for query in sections(page)]


@pytest.mark.parametrize("page, query", views(), ids=lambda v: v if isinstance(v, str) else "-".join(v.values()))
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
