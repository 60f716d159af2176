"""The real server in headless Chromium: every registered page visited from the sidebar, rendered, screenshotted."""

import re
import urllib.parse

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from demos.registry import HOME, by_slug, registered
from demos.tracker import export_tracker
from harness.browser import (
    CHART_SELECTOR,
    act,
    full_screenshot,
    open_page,
    settle,
    streamlit_server,
    wait_charts,
    wait_loaded,
)

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1400, "height": 900}


def open_app(browser, url: str, scheme: str = "light"):
    return open_page(browser, url, viewport=VIEWPORT, color_scheme=scheme)


def go_to(page, topic) -> None:
    """Follow the sidebar's link to `topic` and wait for that page to be drawn (its title shown, the run over)."""
    link = page.locator(f"[data-testid=stSidebarNav] a[href$='/{'' if topic is HOME else topic.slug}']")
    expect(link).to_have_count(1)
    link.click()
    expect(page.locator("h1").first).to_have_text(heading(topic), timeout=120_000)
    settle(page, timeout=120)


def assert_rendered(page, topic) -> None:
    errors = page.locator("[data-testid=stException]")
    assert errors.count() == 0, errors.first.inner_text()
    assert page.locator("h1").count() >= 1, "the page has a title"
    found = wait_charts(page, topic.charts)
    assert found >= topic.charts, f"{topic.slug}: expected {topic.charts} charts at defaults, found {found}"


@pytest.mark.parametrize("topic", registered(), ids=lambda t: t.slug)
def test_page_renders_from_the_sidebar_in_the_dark_theme(server, browser, topic):
    """Each page from Home's sidebar, in the dark theme; its whole-page screenshot is for a person to look at (the
    light theme's are test_shared_views', the figures' colours are checked by tests/test_figures_readable.py)."""
    context, page = open_app(browser, server, scheme="dark")
    try:
        if topic is not HOME:
            go_to(page, topic)
            page.wait_for_url(re.compile(f"/{topic.slug}"))
        assert_rendered(page, topic)
        full_screenshot(page, f"{topic.slug}-dark")
    finally:
        context.close()


def test_url_reproduces_the_view(server, browser):
    """A widget change lands in the URL; opening that URL elsewhere restores the widget and the figure."""
    context, page = open_app(browser, server)
    try:
        box = page.get_by_label("Logits")
        box.fill("3, 0, -1, 2")
        box.press("Enter")
        page.wait_for_url(re.compile("home_logits="), timeout=20_000)
        shared = page.url
    finally:
        context.close()
    context, page = open_app(browser, shared)
    try:
        expect(page.get_by_label("Logits")).to_have_value("3, 0, -1, 2")
        bars = page.locator("[data-testid=stVegaLiteChart] .mark-rect path")
        expect(bars, "four logits, two bars each (T = 1 and the chosen T)").to_have_count(8)
    finally:
        context.close()


def test_bad_input_shows_a_sentence_and_the_page_keeps_working(server, browser):
    context, page = open_app(browser, server)
    try:
        box = page.get_by_label("Logits")
        box.fill("2, x")
        box.press("Enter")
        errors = page.locator("[data-testid=stAlertContentError]")
        expect(errors.first).to_contain_text("Logits, entry 2: x is not a number")  # literally
        settle(page)
        assert page.locator("[data-testid=stException]").count() == 0
        box.fill("1, 2")
        box.press("Enter")
        expect(errors).to_have_count(0)
    finally:
        context.close()


def upload(page, name: str, data: bytes) -> None:
    page.locator("[data-testid=stFileUploaderDropzoneInput]").set_input_files(
        {"name": name, "mimeType": "application/json", "buffer": data}
    )


def set_checkbox(page, label: str, value: bool) -> None:
    """Tick or untick a checkbox by clicking its label as a person would, and wait for the run it starts.

    The page must be fully drawn first: a click while lazy elements above are still loading can land on a
    shifting layout and never reach the checkbox.
    """
    box = page.get_by_label(label, exact=True).first
    wait_loaded(page)
    assert box.is_checked() != value, f"{label} is already {'ticked' if value else 'unticked'}"
    held = page.locator("[data-testid=stCaptionContainer]").filter(has_text=re.compile(r"^It holds \d+ ticked concept"))
    ticked = int(re.search(r"It holds (\d+)", held.inner_text())[1]) + (1 if value else -1)
    act(page, page.locator("[data-testid=stCheckbox] label").filter(has_text=label).first.click,
        lambda: expect(held).to_contain_text(f"It holds {ticked} ticked concept"))  # the progress link's summary
    expect(box).to_be_checked(checked=value)


def test_tracker_import_rejects_bad_files_and_loads_good_ones(server, browser):
    topic = next(t for t in registered() if t.concepts)
    concept = topic.concepts[0]
    context, page = open_app(browser, server)
    try:
        set_checkbox(page, concept, True)
        upload(page, "notes.json", b'{"hello": 1}')
        error = page.locator("[data-testid=stAlertContentError]").first
        expect(error).to_contain_text("not a PyTorch Whiteboard tracker")
        settle(page)
        assert page.get_by_label(concept, exact=True).first.is_checked(), "a rejected file changes nothing"
        set_checkbox(page, concept, False)
        upload(page, "tracker.json", export_tracker({topic.slug: [concept]}).encode())
        expect(page.get_by_label(concept, exact=True).first).to_be_checked()
        settle(page)
        assert page.locator("[data-testid=stAlertContentError]").count() == 0
    finally:
        context.close()


def test_ticks_survive_other_pages_and_the_progress_link_restores_them(server, browser):
    topic = next(t for t in registered() if len(t.concepts) > 1)
    concept = topic.concepts[1]
    context, page = open_app(browser, server)
    try:
        set_checkbox(page, concept, True)
        go_to(page, topic)
        page.wait_for_url(re.compile(f"/{topic.slug}"))
        go_to(page, HOME)
        expect(page.get_by_label(concept, exact=True).first).to_be_checked()
        link = page.locator("[data-testid=stCode] code").filter(has_text="?progress=").first.inner_text().strip()
    finally:
        context.close()
    context, page = open_app(browser, link)  # a new visit, as on another device
    try:
        expect(page.get_by_label(concept, exact=True).first).to_be_checked()
        notice = page.locator("[data-testid=stAlertContentSuccess]").first
        expect(notice).to_contain_text("Progress loaded from the link: 1 ticked concept")
    finally:
        context.close()
    context, page = open_app(browser, link[:-3] + "xyz")  # tampered
    try:
        error = page.locator("[data-testid=stAlertContentError]").first
        expect(error).to_contain_text("Nothing was changed")
        assert page.locator("[data-testid=stException]").count() == 0
        assert not page.get_by_label(concept, exact=True).first.is_checked()
    finally:
        context.close()


def heading(topic) -> str:
    """The h1 a page starts with: its registry title (home's is the app's name)."""
    return "PyTorch Whiteboard" if topic is HOME else topic.title


# The root, one plain page and one tabbed page with its tab in the URL: what a fresh server does on its first
# request is the same for every page, and each page's guard (`require_shell()`) is checked in its source by
# tests/test_pages.py.
FIRST_REQUESTS = [(HOME, ""), (by_slug("gradient-flow"), "gradient-flow"),
                  (by_slug("autograd"), "autograd?ag_tab=Backward")]


@pytest.mark.parametrize(("topic", "path"), FIRST_REQUESTS, ids=[p.split("?")[0] or "root" for _, p in FIRST_REQUESTS])
def test_a_shared_deep_link_is_the_first_request_after_start(browser, topic, path):
    """A fresh server whose first visitor opens /<slug>?whiteboard=true gets that page inside the full shell.

    Streamlit runs a page file directly on a fresh server's first deep link (pages/__init__.py): a page that
    forgot `require_shell()` would render without the navigation's sections and the whiteboard toggle.
    """
    with streamlit_server() as (url, _):
        context, page = open_app(browser, f"{url}/{path}{'&' if '?' in path else '?'}whiteboard=true")
        try:
            wait_loaded(page, 60_000)  # a fresh server loads each element's code for the first time
            assert page.locator("h1").first.inner_text() == heading(topic)
            for label in dict(urllib.parse.parse_qsl(path.partition("?")[2])).values():
                assert page.get_by_role("tab", name=label, exact=True).get_attribute("aria-selected") == "true"
            assert page.get_by_role("switch", name="Whiteboard mode").is_checked()
            sections = page.locator("[data-testid=stNavSectionHeader]").all_inner_texts()
            assert [s.strip() for s in sections] == list(dict.fromkeys(t.section for t in registered()))
            nav = page.locator("[data-testid=stSidebarNav] a")
            titles = {nav.nth(i).inner_text().splitlines()[-1] for i in range(nav.count())}
            assert titles == {t.title for t in registered()}, titles
            assert page.locator("[role=dialog]").count() == 0, "no 'page not found' dialog"
            assert page.locator("[data-testid=stException]").count() == 0
        finally:
            context.close()


def test_shape_lab_passing_and_failing_chain(server, browser):
    """The Shape lab opened from links: a passing chain (figure, step table) and a failing one (torch's message)."""
    from urllib.parse import urlencode

    from demos.tensors.shapes import PRESETS, lab_query

    for name, shot, sentence in (("CNN head", "tensors-shape-lab-pass", "→ (32, 10)"),
                                 ("view after transpose", "tensors-shape-lab-fail", "view, which never copies")):
        context, page = open_app(browser, f"{server}/tensors?{urlencode(lab_query(*PRESETS[name]))}")
        try:
            assert page.locator("[data-testid=stException]").count() == 0
            assert wait_charts(page, 1) >= 1, "the chain figure"
            expect(page.get_by_text(sentence).first).to_be_visible()
            full_screenshot(page, shot)
        finally:
            context.close()


QUESTION_CARD_PAGES = {"practice"}  # pages that open on a predict-then-run question card instead of a figure


def visible_charts(page) -> int:
    """Charts drawn and laid out on the page (a chart in a closed tab or expander has no box)."""
    return page.evaluate(f"""() => [...document.querySelectorAll({CHART_SELECTOR!r})]
        .filter(el => el.getClientRects().length > 0 && el.getBoundingClientRect().width > 0).length""")


def wait_visible_chart(page, timeout: float = 60) -> int:
    try:
        page.wait_for_function(f"() => [...document.querySelectorAll({CHART_SELECTOR!r})]"
                               ".some(el => el.getClientRects().length > 0)", timeout=timeout * 1000)
    except PlaywrightTimeout:
        pass
    return visible_charts(page)
