"""Fixtures of the browser tests: one real server and one headless Chromium per xdist worker.

A browser test module asks for `server` (the base URL) and `browser`, and opens its own context per test
(`harness.browser.new_context`), so visitors stay apart while the server's start and page warm-up are paid once.
Only a check of what a fresh server does (its first request) starts one of its own (`harness.browser.streamlit_server`).
The fixtures live as long as the tests/browser package runs on a worker (package scope; the package runs as two
halves, one per xdist worker: tests/conftest.py), so no server outlives the browser tests into tests that count
child processes.
"""

import pytest
from playwright import sync_api

from harness.browser import launch_chromium, streamlit_server


@pytest.fixture(scope="package")
def server():
    with streamlit_server() as (url, _):
        yield url


@pytest.fixture(scope="package")
def playwright_session():
    with sync_api.sync_playwright() as p:
        yield p


@pytest.fixture(scope="package")
def browser(playwright_session):
    b = launch_chromium(playwright_session)
    yield b
    b.close()
