"""Playwright driving Debian's Chromium against pytest-django's live server.

The browser is the system's; nothing is downloaded. The tests drive
Chromium's headless build, ``/usr/bin/chromium-headless-shell`` (Debian's
``chromium-headless-shell``: the same release and engine as
``/usr/bin/chromium``, without the windowed browser's own processes; it is
the build Playwright itself runs headless): the browser directory's tests
took 342 CPU-s in it against 602 in the full browser, for the same 213 tests.
``full_browser`` is ``/usr/bin/chromium`` itself, for the tests that make
sure the pages behave the same there; REPLAYHUB_CHROMIUM names another
binary for every test. The tests skip when a browser is missing, unless
REPLAYHUB_REQUIRE_SERVICES=1 (CI), where a missing browser is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from tests.conftest import REQUIRE_SERVICES

FULL_CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM = Path(
    os.environ.get("REPLAYHUB_CHROMIUM") or "/usr/bin/chromium-headless-shell"
)
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


def _require(path: Path, package: str) -> None:
    """Skip the test when ``path`` is not installed; fail it in CI."""
    if path.exists():
        return
    hint = f"{path} is missing (apt-get install {package})"
    if REQUIRE_SERVICES:
        pytest.fail(f"Chromium is required (REPLAYHUB_REQUIRE_SERVICES=1): {hint}")
    pytest.skip(f"needs Chromium: {hint}")


@pytest.fixture(scope="session")
def browser():
    _require(CHROMIUM, "chromium-headless-shell")
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


@pytest.fixture(scope="session")
def full_browser(browser):
    """The windowed build, ``/usr/bin/chromium``, run headless, launched by
    ``browser``'s Playwright (one sync Playwright runs at a time)."""
    _require(FULL_CHROMIUM, "chromium")
    full = browser.browser_type.launch(
        executable_path=str(FULL_CHROMIUM), args=CHROMIUM_ARGS
    )
    yield full
    full.close()


VIEWPORT = {"width": 1440, "height": 900}
# What a test expects of a page, waited for as long as an action is (the
# contexts' default below): Playwright's own 5 s was seen to run out on a
# loaded two-core machine while a decision's post and the next page were on
# their way. A passing test waits no longer for it.
expect.set_options(timeout=10_000)


def _new_context(browser, live_server):
    context = browser.new_context(base_url=live_server.url, viewport=VIEWPORT)
    context.set_default_timeout(10_000)
    return context


# A kept page's history entries, at most, when a test takes it.
KEPT_HISTORY = 30


class KeptPage:
    """A context and its one page that a worker's tests take in turn.

    Each new page costs Chromium a renderer process, about 0.6 CPU-s to start
    (measured in a cgroup: a new page left a second 0.7 CPU-s, a load on it
    0.13, a load on a page kept open 0.11), so a test gets a page that an
    earlier one left rather than a new one. Between tests what a test may
    have changed is put back: the listeners it added, its routes, the other
    pages it opened, the tab's storage, the viewport, the cookies and
    permissions; the page is left on about:blank, which keeps its renderer. A
    page whose clock a test installed, or which closed or crashed, is closed
    and the next test gets a new one; so is one whose history nears
    Chromium's cap of 50 entries, past which a test that counts the entries
    its steps push would see none. Init scripts cannot be taken back: a
    test that adds one beyond ``Watch``'s (which installs itself once a
    document) asks ``login`` for its own context."""

    def __init__(self, browser, live_server):
        self.context = _new_context(browser, live_server)
        self.origin = live_server.url
        self.page = None
        self.added: list[tuple[str, object]] = []

    def take(self):
        if self.page is None or self.page.is_closed():
            self.page = self.context.new_page()
            on = type(self.page).on
            added = self.added

            def listen(event, handler):
                added.append((event, handler))
                on(self.page, event, handler)

            self.page.on = listen
        return self.page

    def reset(self) -> None:
        page = self.page
        for other in self.context.pages:
            if other is not page:
                other.close()
        if page is not None and not page.is_closed():
            for event, handler in self.added:
                page.remove_listener(event, handler)
            page.unroute_all(behavior="ignoreErrors")
            if self._reusable(page):
                page.goto("about:blank")
                if page.viewport_size != VIEWPORT:
                    page.set_viewport_size(VIEWPORT)
            else:
                page.close()
        self.added.clear()
        self.context.clear_cookies()
        self.context.clear_permissions()

    def _reusable(self, page) -> bool:
        if not page.url.startswith(self.origin):
            return page.url == "about:blank"
        try:
            return page.evaluate(
                "() => { sessionStorage.clear(); localStorage.clear();"
                f" return !window.__pwClock && history.length < {KEPT_HISTORY}; }}"
            )
        except PlaywrightError:  # a page that cannot answer is not kept
            return False


@pytest.fixture(scope="session")
def kept_pages(browser, live_server):
    """The worker's kept pages, one for each person a test signs in at once."""
    pages: list[KeptPage] = []
    yield pages
    for kept in pages:
        kept.context.close()


@pytest.fixture
def login(browser, live_server, kept_pages):
    """``login(user)``: a page in a browser context logged in as ``user`` and
    no one else; each further call (a second person) gets its own context.
    The pages are kept ones (:class:`KeptPage`) unless the test asks
    ``login(user, own_context=True)`` for a new context of its own."""
    contexts = []
    taken: list[KeptPage] = []

    def open_as(user, *, own_context: bool = False):
        client = Client()
        client.force_login(user)
        if own_context:
            context = _new_context(browser, live_server)
            contexts.append(context)
        else:
            if len(kept_pages) == len(taken):
                kept_pages.append(KeptPage(browser, live_server))
            taken.append(kept_pages[len(taken)])
            context = taken[-1].context
        context.add_cookies(
            [
                {
                    "name": settings.SESSION_COOKIE_NAME,
                    "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                    "url": live_server.url,
                }
            ]
        )
        return context.new_page() if own_context else taken[-1].take()

    yield open_as
    for context in contexts:
        context.close()
    for kept in taken:
        kept.reset()


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
