"""Playwright driving Debian's Chromium against pytest-django's live server.

The browser is the system's ``/usr/bin/chromium``; nothing is downloaded. The
tests skip when it is missing, unless REPLAYHUB_REQUIRE_SERVICES=1 (CI), where
a missing browser is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from tests.conftest import REQUIRE_SERVICES

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Screenshots are for a person to look at: saved only when asked for.
SCREENSHOTS = os.environ.get("REPLAYHUB_SCREENSHOTS", "")


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        hint = f"{CHROMIUM} is missing (apt-get install chromium)"
        if REQUIRE_SERVICES:
            pytest.fail(f"Chromium is required (REPLAYHUB_REQUIRE_SERVICES=1): {hint}")
        pytest.skip(f"needs Chromium: {hint}")
    from playwright.sync_api import sync_playwright

    with pytest.MonkeyPatch.context() as patch:
        # Playwright's sync API keeps an asyncio loop running on this thread
        # while it is started, and Django then refuses ORM calls from the test
        # body as if it were async code. The test body is plain synchronous
        # code, so the guard is lifted exactly as long as Playwright runs.
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=CHROMIUM_ARGS
            )
            yield browser
            browser.close()


VIEWPORT = {"width": 1440, "height": 900}


def _new_context(browser, live_server):
    context = browser.new_context(base_url=live_server.url, viewport=VIEWPORT)
    context.set_default_timeout(10_000)
    return context


@pytest.fixture(scope="session")
def kept_context(browser, live_server):
    """One context a worker's tests take in turn: a new context costs Chromium
    about as much as two page loads (measured: 0.8 CPU-s for a context, a page
    and a load against 0.4 for a page and a load in a context kept open).
    Between tests its pages are closed (their session storage with them), its
    cookies and permissions cleared; a test that changes a context beyond
    that (an init script) asks ``login`` for its own."""
    context = _new_context(browser, live_server)
    yield context
    context.close()


@pytest.fixture
def login(browser, live_server, kept_context):
    """``login(user)``: a page in a browser context logged in as ``user`` and
    no one else; each further call (a second person) opens its own context,
    as does ``login(user, own_context=True)``."""
    contexts = []
    kept = []

    def open_as(user, *, own_context: bool = False):
        client = Client()
        client.force_login(user)
        if kept or own_context:
            context = _new_context(browser, live_server)
            contexts.append(context)
        else:
            context = kept_context
            kept.append(context)
        context.add_cookies(
            [
                {
                    "name": settings.SESSION_COOKIE_NAME,
                    "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                    "url": live_server.url,
                }
            ]
        )
        return context.new_page()

    yield open_as
    for context in contexts:
        context.close()
    for context in kept:
        for page in context.pages:
            page.close()
        context.clear_cookies()
        context.clear_permissions()


@pytest.fixture
def screenshot():
    """``screenshot(page, name)`` scrolls the page to its top, as the tests
    were written against, and saves it under REPLAYHUB_SCREENSHOTS (a folder)
    when that is set."""

    def save(page, name: str) -> Path | None:
        # From the top, so the sticky decision bar sits where a reader sees it;
        # the round trip also lets the page finish what the last key started
        # (a dialog closing) before the next key, as a person's pace would.
        page.evaluate("window.scrollTo(0, 0)")
        page.wait_for_load_state()
        if not SCREENSHOTS:
            return None
        path = Path(SCREENSHOTS) / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(path), full_page=True)
        return path

    return save
