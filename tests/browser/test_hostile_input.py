"""Visitor text from a shared link or an uploaded file renders literally, and the server itself enforces the
upload limit and XSRF protection (not only the browser widget)."""

import json
import urllib.parse

import pytest
from playwright.sync_api import expect

from demos.distributed.results import FORMAT
from demos.errors import QUOTE_LIMIT
from demos.registry import HOME
from harness.browser import new_context, settle, wait_charts, wait_run
from pages.ui.errors import BUG_NOTE

pytestmark = pytest.mark.browser

IMAGE = "![t](http://attacker.invalid/p.png)"
LINK = "[Log in again](http://attacker.invalid/phish)"
ALERT = "[data-testid=stAlertContentError]"


def open_tab(browser, url: str):
    """A visitor's tab that records every request the page makes to the attacker's host."""
    context = new_context(browser, viewport={"width": 1400, "height": 900})
    page = context.new_page()
    fetched = []
    # the attacker's host, not the app's own URL (whose query may carry the visitor's text)
    page.on("request", lambda r: fetched.append(r.url) if "attacker" in (urllib.parse.urlsplit(r.url).hostname or "")
            else None)
    page.goto(url)
    wait_run(page, timeout=120)
    return context, page, fetched


def assert_literal(page, fetched: list, selector: str, text: str) -> None:
    """The visitor's text is shown as text inside `selector`: no image, no link made from it, nothing fetched."""
    box = page.locator(selector).filter(has_text=text[:12]).first
    expect(box).to_contain_text(text)
    settle(page)
    assert box.locator("img").count() == 0 and box.locator("a").count() == 0, box.inner_html()
    assert page.locator("img[src*=attacker], a[href*=attacker]").count() == 0
    assert not fetched, fetched


def as_quoted(text: str) -> str:
    """What a message shows of visitor text: the text itself, cut to QUOTE_LIMIT characters with an ellipsis."""
    return text if len(text) <= QUOTE_LIMIT else text[: QUOTE_LIMIT - 1] + "…"


SHARED_LINKS = {  # a parameter whose parser quotes what it refuses
    "debugging seed": ("debugging", {"dbg_tab": "Reproducibility", "dbg_seed": IMAGE}, as_quoted(IMAGE)),
    "distributed ring size": ("distributed", {"dist_ring": LINK}, as_quoted(LINK)),
}


@pytest.mark.parametrize("case", list(SHARED_LINKS))
def test_visitor_text_in_a_shared_link_renders_literally(server, browser, case):
    slug, query, text = SHARED_LINKS[case]
    context, page, fetched = open_tab(browser, f"{server}/{slug}?{urllib.parse.urlencode(query)}")
    try:
        assert_literal(page, fetched, ALERT, text)
    finally:
        context.close()


def env_record(backend: str, env: dict | None = None) -> bytes:
    seen = {"env": env or {"RANK": "0"}, "pid": 1, "dist_rank": 0, "dist_world": 1, "backend": "gloo"}
    return json.dumps({"format": FORMAT, "version": 1, "demo": "env", "params": {}, "world_size": 1,
                       "backend": backend, "ranks": [{"rank": 0, "seen": seen}]}).encode()


def upload(page, name: str, data: bytes) -> None:
    """Choose a file in the uploader (what its run shows, the caller waits for)."""
    settle(page)
    page.locator("[data-testid=stFileUploaderDropzoneInput]").set_input_files(
        {"name": name, "mimeType": "application/json", "buffer": data})


def test_visitor_text_in_an_uploaded_file_renders_literally(server, browser):
    context, page, fetched = open_tab(browser, f"{server}/distributed?dist_tab=Launch")
    try:
        upload(page, f"{LINK}.json", env_record(IMAGE))
        assert_literal(page, fetched, "[data-testid=stCaptionContainer]", f"{LINK}.json")
        assert_literal(page, fetched, "[data-testid=stCaptionContainer]", IMAGE)
        upload(page, "refused.json", env_record(IMAGE * 3))  # too long a backend: refused, quoting it
        assert_literal(page, fetched, ALERT, IMAGE[:20])
    finally:
        context.close()


def test_the_server_enforces_the_upload_limit_and_xsrf(server, browser):
    """The widget's limit is only the browser's: a request straight to the upload route is checked by the server."""
    context, page, _ = open_tab(browser, f"{server}/distributed?dist_tab=Launch")
    try:
        with page.expect_request(lambda r: "/_stcore/upload_file/" in r.url and r.method == "PUT") as seen:
            upload(page, "small.json", env_record("gloo"))
        request = seen.value
        token = request.headers.get("x-xsrftoken")
        assert token, "the browser sends the XSRF token with each upload"
        big = {"file": {"name": "big.json", "mimeType": "application/json", "buffer": b" " * (3 * 2**20)}}
        too_big = page.request.put(request.url, multipart=big, headers={"X-Xsrftoken": token})
        assert too_big.status == 413, too_big.status
        small = {"file": {"name": "s.json", "mimeType": "application/json", "buffer": b"{}"}}
        no_token = page.request.put(request.url, multipart=small)
        assert no_token.status == 403, no_token.status
    finally:
        context.close()


SURROGATE_LINK = "1.eNqrVkpRsqqu1VEqUrKKVoopTbEwMFCKrQUAURMGuA"  # a progress link whose review list is ["\ud800"]
BIDI = "\u202e"  # right-to-left override: would show the rest of the message backwards
FORMATTING = "strong, em, a, img, code"  # what markdown would make of visitor text in a table


def assert_working(page) -> None:
    settle(page)
    assert page.locator("[data-testid=stException]").count() == 0
    assert page.get_by_text(BUG_NOTE).count() == 0


def test_a_lone_surrogate_or_bidi_control_in_a_link_is_one_clear_sentence_and_the_page_goes_on(server, browser):
    context, page, _ = open_tab(browser, f"{server}/?progress={SURROGATE_LINK}")
    try:
        expect(page.locator(ALERT).filter(has_text="\ufffd").first).to_be_visible()
        wait_charts(page, HOME.charts)  # Home is drawn to its end, not stopped after its intro
        assert_working(page)
        for path, words in ((f"debugging?dbg_tab=Reproducibility&dbg_seed=12{BIDI}34", "12\ufffd34"),
                            ("practice?pr_seed=%C2%B2", "whole number")):
            page.goto(f"{server}/{path}")
            wait_run(page, timeout=120)
            alert = page.locator(ALERT).filter(has_text=words).first
            expect(alert).to_be_visible()
            assert BIDI not in alert.inner_text()
            assert_working(page)
    finally:
        context.close()


def test_visitor_text_in_a_whiteboard_table_is_not_markdown(server, browser):
    heads = "__bold__, _it_"
    context, page, fetched = open_tab(
        browser, f"{server}/modules?modules_tab=Containers&whiteboard=true&modules_heads={urllib.parse.quote(heads)}")
    try:
        table = page.locator("[data-testid=stTable]").filter(has_text="__bold__").first
        expect(table).to_be_visible()
        assert "_it_" in table.inner_text() and table.locator(FORMATTING).count() == 0, table.inner_html()
        page.goto(f"{server}/distributed?dist_tab=Launch&whiteboard=true")
        wait_run(page, timeout=120)
        upload(page, "env.json", env_record("gloo", {"RANK": "0", "MASTER_ADDR": f"{IMAGE} {LINK} **bold** `code`"}))
        table = page.locator("[data-testid=stTable]").filter(has_text="**bold**").first
        expect(table).to_be_visible()
        shown = table.inner_text().replace("\u2060", "")  # the word joiners that keep URLs from becoming links
        assert IMAGE in shown and table.locator(FORMATTING).count() == 0, table.inner_html()
        assert not fetched, fetched
        assert_working(page)
    finally:
        context.close()
