"""Fixtures of the browser tests: one real server and one headless Chromium for the whole test session.

A browser test module asks for `server` (the base URL) and `browser`, and opens its own context per test
(`harness.browser.new_context`), so visitors stay apart while the server's start and page warm-up are paid once.
Only a check of what a fresh server does (its first request) starts one of its own (`harness.browser.streamlit_server`).
"""

import pytest
from playwright import sync_api

from harness.browser import launch_chromium, streamlit_server


@pytest.fixture(scope="session")
def server():
    with streamlit_server() as (url, _):
        yield url


@pytest.fixture(scope="session")
def playwright():
    with sync_api.sync_playwright() as p:
        yield p


@pytest.fixture(scope="session")
def browser(playwright):
    b = launch_chromium(playwright)
    yield b
    b.close()
