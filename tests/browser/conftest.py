"""Fixtures of the browser tests: one real server and one headless Chromium per test module."""

import pytest
from playwright import sync_api

from harness.browser import launch_chromium, streamlit_server


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as (url, _):
        yield url


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = launch_chromium(p)
        yield b
        b.close()
