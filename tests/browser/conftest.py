"""Fixtures of the browser tests: one real server and one headless Chromium per xdist worker, and the system
programs the tests drive.

A browser test module asks for `server` (the base URL) and `browser`, and opens its own context per test
(`harness.browser.open_page`), so visitors stay apart while the server's start and page warm-up are paid once.
Only a check of what a fresh server does (its first request) starts one of its own (`harness.browser.streamlit_server`).
The fixtures live as long as the tests/browser package runs on a worker (package scope; each xdist worker runs its
share of the browser modules before any other module: tests/conftest.py), so no server outlives the browser tests
into tests that count child processes.

A test that needs a system program it cannot find or fetch is skipped with one line that starts with
NEEDS_PROGRAM and says what to install; with CI set (.ci/run sets it) that is a failure instead.
"""

import os
import shutil

import pytest
from playwright import sync_api
from playwright.sync_api import expect

from harness.browser import NoChromium, launch_chromium, streamlit_server

# How long an `expect` waits for what a test expects to see: Playwright's default, 5 s, is short for a 2-core host
# shared by two servers, two Chromiums and the rest of the suite (waiting longer costs nothing when it shows sooner).
expect.set_options(timeout=60_000)

NEEDS_PROGRAM = "needs a system program: "
# Where Debian installs nginx: /usr/sbin is on root's PATH, not on a user's.
NGINX_PLACES = ("/usr/sbin/nginx",)


def without_program(what: str) -> None:
    """Skip the test for want of a system program (`what`: which, and how to install it); fail it under CI."""
    reason = NEEDS_PROGRAM + what
    if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
        pytest.fail(f"{reason} (CI installs it first: .ci/run)", pytrace=False)
    pytest.skip(reason)


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
    try:
        b = launch_chromium(playwright_session)
    except NoChromium:
        without_program("chromium (Debian package chromium, or `python -m playwright install chromium`)")
    yield b
    b.close()


@pytest.fixture(scope="session")
def nginx() -> str:
    """The nginx binary (the replica test runs deploy/'s balancer in front of two servers)."""
    path = shutil.which("nginx") or next((p for p in NGINX_PLACES if os.access(p, os.X_OK)), None)
    if not path:
        without_program("nginx (Debian package nginx)")
    return path
