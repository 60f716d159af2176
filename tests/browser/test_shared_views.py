"""A URL copied from any view opens that view in a fresh browser, on its figure with nothing pressed: every tab of
every page, and the training walk. The views are walked in whiteboard mode on a 1280x720 screen, so the one fresh open
of each view's URL is also where its whiteboard layout is checked (tests/browser/test_whiteboard.py's
assert_presentable)."""

import re

import pytest
from playwright.sync_api import expect

from demos.registry import registered
from harness.browser import (
    act,
    full_screenshot,
    open_page,
    tab_drawn,
    wait_charts,
    wait_every_chart_drawn,
    wait_loaded,
)
from pages.ui import marks
from tests.browser.test_browser import QUESTION_CARD_PAGES, VIEWPORT, open_app, wait_visible_chart
from tests.browser.test_whiteboard import SCREEN, assert_presentable

pytestmark = pytest.mark.browser


def view_of(page) -> dict:
    """What a visitor sees of a view: open tabs, headings, widget labels and values, how many charts (each drawn)."""
    wait_loaded(page)
    wait_every_chart_drawn(page)
    return page.evaluate("""() => {
        const main = document.querySelector('[data-testid=stMain]');
        const texts = sel => [...main.querySelectorAll(sel)].map(e => e.innerText.trim());
        return {
            tabs: texts('[role=tab][aria-selected=true]'),
            headings: texts('h1, h2, h3'),
            labels: texts('[data-testid=stWidgetLabel]'),
            values: [...main.querySelectorAll('input, textarea')].map(e => e.value),
            sliders: texts('[data-testid=stSliderThumbValue]'),
            charts: main.querySelectorAll('.js-plotly-plot, [data-testid=stGraphVizChart] svg, svg.marks').length,
        };
    }""")


def click_and_wait(page, locator) -> None:
    """Click a button whose run changes the URL (the server moves a URL-bound widget); wait for that run."""
    before = page.url
    act(page, locator.click, lambda: page.wait_for_url(lambda url: url != before), timeout=300)


def open_tab(page, tab) -> None:
    """Click a tab, as a visitor does, and wait for the run it starts (the tab's section drawn)."""
    act(page, tab.click, lambda: tab_drawn(tab, timeout=300), timeout=300)
    wait_loaded(page)


def open_in_fresh_browser(browser, url: str, viewport: dict = VIEWPORT):  # noqa: F811 (the fixture)
    context, page = open_page(browser, url, viewport=viewport)
    wait_loaded(page)
    return context, page


def assert_same_view_on_its_figure(browser, url: str, seen: dict, name: str, card: bool) -> None:  # noqa: F811
    """The URL, opened in a fresh browser with nothing pressed, shows the same view, and that view shows a figure
    (its default case ran once on this server and is shared) or, on Practice, its question card; in whiteboard mode
    on a 1280x720 screen that figure or card is whole on the first screen (assert_presentable)."""
    context, page = open_in_fresh_browser(browser, url, SCREEN)
    try:
        wait_charts(page, seen["charts"])
        assert page.locator("[data-testid=stException]").count() == 0
        assert view_of(page) == seen, url
        if card:
            expect(page.get_by_role("button", name="Run it").first).to_be_visible()
        else:
            assert wait_visible_chart(page) >= 1, f"{url}: no figure without a press"
        assert_presentable(page, name, seen["charts"])
        full_screenshot(page, f"{name}-whiteboard")
    finally:
        context.close()


def tab_views(page, topic):
    """Yield (name, URL, view) for the default view and then each other section of the page (demos/registry.py),
    opened by clicking its tabs in turn as a visitor would (the outer tab, then a nested one)."""
    yield "default", page.url, view_of(page)
    for query in topic.sections()[1:]:
        for key, label in query.items():
            tab = page.locator(f".st-key-{marks.SECTIONS}{key} [data-testid=stTabs]").first.get_by_role(
                "tab", name=label, exact=True)
            if tab.get_attribute("aria-selected") != "true":
                open_tab(page, tab)
        yield re.sub(r"\W+", "-", "-".join(query.values())).strip("-").lower(), page.url, view_of(page)


@pytest.mark.parametrize("topic", registered(), ids=lambda t: t.slug)
def test_a_copied_url_of_each_tab_opens_the_same_view_whole_on_a_1280x720_screen(server, browser, topic):  # noqa: F811
    context, page = open_page(browser, f"{server}/{topic.slug}?whiteboard=true", viewport=SCREEN)
    try:
        wait_loaded(page)
        wait_charts(page, topic.charts)  # the defaults' charts (test_browser counts them)
        card = topic.slug in QUESTION_CARD_PAGES
        for name, url, seen in tab_views(page, topic):
            assert "whiteboard=true" in url, url
            assert_same_view_on_its_figure(browser, url, seen, topic.slug + ("" if name == "default" else f"-{name}"),
                                           card)
    finally:
        context.close()


def just_ran(page) -> str:
    return page.locator("[data-testid=stMarkdown] strong", has_text="Just ran").inner_text()


def test_a_copied_walk_url_opens_the_same_sub_step(server, browser):  # noqa: F811
    context, page = open_app(browser, f"{server}/training-loop")
    try:
        for _ in range(5):
            click_and_wait(page, page.get_by_role("button", name="Next sub-step"))
        assert "tl_walk=6" in page.url
        seen = view_of(page)
        assert "6" in seen["sliders"]
        assert just_ran(page) == "Just ran: optimizer.step()"
        shared = page.url
    finally:
        context.close()
    context, page = open_in_fresh_browser(browser, shared)
    try:
        assert just_ran(page) == "Just ran: optimizer.step()"
        assert view_of(page) == seen
    finally:
        context.close()
