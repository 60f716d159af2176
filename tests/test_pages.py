"""Every page in the registry runs at its defaults with no exception and no error, in both display modes."""

from pathlib import Path

import pytest

from demos.registry import ROOT, registered
from tests.conftest import assert_clean, open_page

PAGES = [t.file for t in registered()]


CHART_ELEMENTS = ("plotly_chart", "graphviz_chart", "vega_lite_chart", "arrow_vega_lite_chart")


@pytest.mark.parametrize("page_file", PAGES)
def test_page_runs_clean_at_defaults(page_file):
    at = open_page(page_file)
    assert_clean(at)
    assert at.title, "every page starts with a title"
    charts = sum(len(at.get(kind)) for kind in CHART_ELEMENTS)
    topic = next(t for t in registered() if t.file == page_file)
    assert charts == topic.charts, "the registry's chart count, which the browser test and bench wait for"


@pytest.mark.parametrize("page_file", PAGES)
def test_page_runs_clean_in_whiteboard_mode(page_file):
    at = open_page(page_file, query={"whiteboard": "true"})
    assert at.toggle(key="whiteboard").value is True, "the sidebar toggle is on every page"
    assert_clean(at)


def test_registry_lists_only_existing_files():
    for topic in registered():
        assert topic.exists, topic.file


def test_only_registered_page_scripts_sit_at_the_top_of_pages():
    """Streamlit's v1 scan lists every pages/*.py as a page: shared code must live in a subpackage."""
    scripts = {str(p.relative_to(ROOT)) for p in (ROOT / "pages").glob("*.py") if p.name != "__init__.py"}
    assert scripts == {t.file for t in registered()}


@pytest.mark.parametrize("page_file", PAGES)
def test_every_page_script_file_is_named_by_its_slug_and_requires_the_shell(page_file):
    topic = next(t for t in registered() if t.file == page_file)
    assert Path(page_file).stem == topic.slug, "v1 derives the URL from the file name"
    assert "\nrequire_shell()" in (ROOT / page_file).read_text(), "a direct run must run the app shell"
