"""The registry (demos/registry.py) is the one source of each page's views: every tab set a page draws is declared
there, every declared one is drawn, and the views the tests walk follow from it. test_hostile_links.py checks the
same against the running pages (each section's URL-bound tab sets equal the declared ones)."""

import ast

import pytest

from demos.autograd.custom import all_custom
from demos.registry import ROOT, by_file, by_slug, registered


def sections_calls(page_file: str) -> set[tuple[str, str]]:
    """(slug, key) of every ui.sections call in a page's source; a Name argument is read from
    the module's top-level assignment of it (SLUG = "...")."""
    tree = ast.parse((ROOT / page_file).read_text())
    assigns = [n for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)]
    constants = {t.id: n.value.value for n in assigns for t in n.targets if isinstance(t, ast.Name)}

    def value(arg):
        return arg.value if isinstance(arg, ast.Constant) else constants[arg.id]

    return {(value(c.args[0]), value(c.args[1])) for c in ast.walk(tree)
            if isinstance(c, ast.Call) and getattr(c.func, "attr", None) == "sections"}


@pytest.mark.parametrize("topic", registered(), ids=lambda t: t.slug)
def test_each_page_draws_exactly_the_tab_sets_the_registry_declares(topic):
    calls = sections_calls(topic.file)
    assert {slug for slug, _ in calls} <= {topic.slug}, "a page draws its own tab sets"
    assert {key for _, key in calls} == {s.key for s in topic.tab_sets}


def test_every_topic_names_an_importable_engine():
    for topic in registered():
        assert topic.engine and __import__(topic.engine), topic.slug


def test_custom_function_tabs_are_the_examples_the_demo_runs():
    assert by_slug("autograd").tabs("ag_custom") == tuple(e.name for e in all_custom()[0])


def test_views_cover_every_tab_and_nested_tab_once():
    autograd = by_file("pages/autograd.py")
    sections = autograd.sections()
    assert len(sections) == len(autograd.tabs("ag_tab")) - 1 + len(autograd.tabs("ag_custom"))
    assert {"ag_tab": "Custom Functions", "ag_custom": autograd.tabs("ag_custom")[-1]} in sections
    assert autograd.views() == [{}, *sections]
    distributed = by_slug("distributed")
    assert [v["dist_tab"] for v in distributed.sections()] == list(distributed.tabs("dist_tab"))
    assert len(distributed.tabs("dist_tab")) == 6
    assert by_slug("home").views() == by_slug("home").sections() == [{}]


def test_a_nested_tab_set_is_drawn_only_inside_its_tab():
    autograd = by_slug("autograd")
    assert [s.key for s in autograd.tab_sets_in({})] == ["ag_tab"]  # the first tab, Graph, holds none
    assert [s.key for s in autograd.tab_sets_in({"ag_tab": "Custom Functions"})] == ["ag_tab", "ag_custom"]


def test_the_benchmark_names_only_declared_views():
    from bench.__main__ import undeclared_view
    from bench.memory import HEAVY_DEMOS

    assert not [d.path for d in HEAVY_DEMOS if undeclared_view(d.path)]
    assert undeclared_view("tensors?tensors_tab=dtypes") == ""
    assert "tensors_tab=Dtypes" in undeclared_view("tensors?tensors_tab=Dtypes")
    assert "no_tab=x" in undeclared_view("tensors?no_tab=x")
    assert "no registered page" in undeclared_view("nowhere")
