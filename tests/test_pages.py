"""Every page in the registry runs at its defaults with no exception and no error, in both display modes."""

import pytest

from tests.conftest import assert_clean, open_page
from views.registry import registered

PAGES = [t.file for t in registered()]


@pytest.mark.parametrize("page_file", PAGES)
def test_page_runs_clean_at_defaults(page_file):
    at = open_page(page_file)
    assert_clean(at)
    assert at.title, "every page starts with a title"


@pytest.mark.parametrize("page_file", PAGES)
def test_page_runs_clean_in_whiteboard_mode(page_file):
    at = open_page(page_file, query={"whiteboard": "true"})
    assert at.toggle(key="whiteboard").value is True, "the sidebar toggle is on every page"
    assert_clean(at)


def test_registry_lists_only_existing_files():
    for topic in registered():
        assert topic.exists, topic.file
