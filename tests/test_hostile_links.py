"""A shared link is visitor input: every URL-bound widget of every page and tab, fed hostile values, keeps the page up.

Nothing here lists widgets by hand. Each section of each page (as demos/registry.py declares them) is opened, and
every element whose proto carries a `query_param_key` is a URL-bound widget; the URL-bound tab sets each section
draws must be the ones the registry declares. Then, per view and per hostile value, one run gets that value in every
bound widget of the view at once. A widget that takes numbers or options must come back at its default with
one notice above the page naming it; a free-text field keeps the visitor's text (its parser answers in a
sentence); nothing raises.
"""

import pytest
from streamlit.proto.Block_pb2 import Block as BlockProto

from demos.registry import HOME, registered
from pages.shell.url_guard import NOTICE_LEAD, RESET_LEAD
from tests.conftest import open_page

HOSTILE = ("inf", "-inf", "nan", "1e400", "123456789012345678901234567890", "no-such-option")
FREE_TEXT = {"TextInput", "TextArea"}  # widgets whose value is the visitor's own text


def _nodes(block):
    for child in getattr(block, "children", {}).values():
        yield child
        yield from _nodes(child)


def _page_nodes(at, page_file: str):
    """The page's own elements; the sidebar's (the whiteboard toggle) belong to the shell, tested on Home.

    AppTest opens Home first and switches page in a second run: the sidebar's widgets read the URL in the first.
    """
    yield from _nodes(at.main)
    if page_file == HOME.file:
        yield from _nodes(at.sidebar)


def bound_widgets(at, page_file: str) -> dict[str, tuple[str, object]]:
    """URL parameter -> (widget type, value) for every widget bound to the URL in this run."""
    return {node.proto.query_param_key: (type(node).__name__, node.value) for node in _page_nodes(at, page_file)
            if getattr(getattr(node, "proto", None), "query_param_key", "")}


def bound_tab_sets(at, page_file: str) -> dict[str, list[str]]:
    """URL parameter -> tab labels for every tab set bound to the URL in this run."""
    return {node.proto.tab_container.query_param_key: [tab.label for tab in node.children.values()]
            for node in _page_nodes(at, page_file)
            if isinstance(getattr(node, "proto", None), BlockProto) and node.proto.WhichOneof("type") == "tab_container"
            and node.proto.tab_container.query_param_key}


def views(topic) -> list[tuple[dict, dict]]:
    """Every section of the page (the registry's views): (query naming it, its bound widgets at their defaults).

    Each view's bound tab sets must be those the registry declares for it, so a tab the registry misses fails here.
    """
    found = []
    for query in topic.sections():
        at = open_page(topic.file, query=query)
        assert not at.exception, (query, [e.value for e in at.exception])
        declared = {s.key: list(s.labels) for s in topic.tab_sets_in(query)}
        assert bound_tab_sets(at, topic.file) == declared, (topic.slug, query, "tab sets differ from the registry")
        widgets = {k: v for k, v in bound_widgets(at, topic.file).items() if k not in query}
        found.append((query, widgets))
    return found


def notices(at) -> list[str]:
    return [w.value for w in at.warning if w.value.startswith(NOTICE_LEAD)]


def check_hostile_run(page_file: str, view: dict, widgets: dict, fed: list[str], value: str) -> set[str]:
    """One run with `value` in every parameter of `fed`; returns the fed parameters whose widget was drawn."""
    at = open_page(page_file, query={**view, **dict.fromkeys(fed, value)})
    where = f"{page_file} {view} = {value!r}"
    assert not at.exception, (where, [e.value for e in at.exception])
    drawn = bound_widgets(at, page_file)
    checked = {key for key in fed if key in drawn}
    named = []
    for key in checked:
        kind, default = widgets[key]
        if kind in FREE_TEXT:
            assert drawn[key][1] == value, (where, key, "a free-text field keeps the visitor's text")
        else:
            assert drawn[key][1] == default, (where, key, drawn[key][1], "expected the default", default)
            named.append(key)
    shown = notices(at)
    assert len(shown) == (1 if named else 0), (where, shown)
    for key in named:
        assert f"`{key}=" in shown[0].split(f"{RESET_LEAD}: ")[-1], (where, key, "named as reset", shown[0])
    if not any(widgets[key][0] in FREE_TEXT for key in checked):
        assert not at.error, (where, [e.value for e in at.error])
    return checked


@pytest.mark.parametrize("topic", registered(), ids=lambda t: t.slug)
def test_hostile_link_values_leave_every_view_working(topic):
    page_file = topic.file
    for view, widgets in views(topic):
        for value in HOSTILE:
            left = list(widgets)
            while left:  # a free-text error can hide the widgets below it: feed those again, text at its default
                checked = check_hostile_run(page_file, view, widgets, left, value)
                assert checked, (page_file, view, value, "bound widgets not drawn at all", left)
                left = [key for key in left if key not in checked]
