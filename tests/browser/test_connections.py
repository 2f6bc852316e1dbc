"""A project's connections page in Chromium: an admin goes from the project
page to it with the keyboard only, issues an ingest token and sees it once;
the token's Copy button puts it on the clipboard."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from replayhub.models import Delivery, IngestToken, Webhook
from tests.browser.watch import Watch
from tests.factories import make_project

pytestmark = pytest.mark.browser

TOKEN = re.compile(r"rhi_[0-9a-f]{12}_[A-Za-z0-9_-]{43}")


def tab_to(page, name: str, presses: int = 80) -> None:
    """Press Tab until the focused link or button is called ``name``."""
    for _ in range(presses):
        page.keyboard.press("Tab")
        focused = page.evaluate(
            "document.activeElement && document.activeElement.textContent.trim()"
        )
        if focused == name:
            return
    raise AssertionError(f"{name!r} is not reached with Tab")


def test_an_admin_issues_a_token_with_the_keyboard_and_sees_it_once(
    login, admin_user, screenshot
):
    make_project("shop")
    page = login(admin_user)
    page.set_viewport_size({"width": 1024, "height": 800})
    watch = Watch(page, console_errors=True)
    watch.goto("/projects/shop/")

    tab_to(page, "Connections")
    with page.expect_navigation(url=re.compile(r".*/projects/shop/connections/$")):
        page.keyboard.press("Enter")
    expect(page.locator("#tokens")).to_have_count(0)
    tab_to(page, "Issue a token")
    with page.expect_navigation():
        page.keyboard.press("Enter")

    shown = page.locator("#issued-token")
    expect(shown).to_have_text(TOKEN)
    token = shown.text_content()
    # Focus moves to the token, so a keyboard or screen reader user is there.
    expect(page.locator("#issued")).to_be_focused()
    expect(page.locator("#issued")).to_contain_text("it cannot be shown again")
    row = IngestToken.objects.get()
    expect(page.locator("#tokens")).to_contain_text(f"rhi_{row.prefix}_…")
    screenshot(page, "connections-token-issued")

    # A reload asks for the page again, posting nothing: no second token.
    page.reload()
    expect(page.locator("#issued")).to_have_count(0)
    assert IngestToken.objects.count() == 1

    watch.goto("/projects/shop/connections/")
    expect(page.locator("#tokens")).to_contain_text("Active")
    assert token not in page.content()
    assert TOKEN.search(page.content()) is None
    watch.check("after issuing a token")


def test_an_issued_token_is_copied_with_its_button_and_stays_selectable(
    login, admin_user
):
    make_project("shop")
    page = login(admin_user)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    watch = Watch(page, console_errors=True)
    watch.goto("/projects/shop/connections/")
    with page.expect_navigation():
        page.get_by_role("button", name="Issue a token").click()
    shown = page.locator("#issued-token")
    expect(shown).to_have_text(TOKEN)

    copy = page.get_by_role("button", name="Copy", exact=True)
    copy.click()
    expect(page.locator("#issued").get_by_role("button", name="Copied")).to_be_visible()
    expect(page.locator("#issued-copied")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == shown.text_content()
    # The token can still be selected by hand, as before.
    assert shown.evaluate("el => getComputedStyle(el).userSelect") != "none"
    shown.dblclick()
    selected = page.evaluate("String(getSelection())").strip()
    assert selected and selected in shown.text_content()
    watch.check("after copying the token")


def _fits(locator) -> bool:
    """The element shows all it holds: nothing cut, nothing spilling out."""
    return locator.evaluate("el => el.scrollWidth <= el.clientWidth + 1")


def test_two_webhooks_to_one_host_are_told_apart_and_fit_at_1024(
    login, admin_user, screenshot
):
    project = make_project("shop")
    hooks = [
        Webhook.objects.create(
            project=project,
            url=f"https://hööks.example.com/services/T000/{secret}",
            events=["replay.finished"],
            format="slack",
        )
        for secret in ("first-secret", "second-secret")
    ]
    first = Delivery.objects.create(
        project=project,
        target="webhook",
        webhook=hooks[0],
        event="replay.finished",
        key="k1",
        summary="replay.finished replay-1",
    )
    page = login(admin_user)
    page.set_viewport_size({"width": 1024, "height": 800})
    watch = Watch(page, console_errors=True)
    watch.goto("/projects/shop/connections/")

    # No token to revoke: the box that would revoke them is not offered.
    expect(page.get_by_label("Revoke the project's other tokens")).to_have_count(0)
    names = [
        page.get_by_role("button", name=re.compile(f"Remove webhook #{hook.pk} to"))
        for hook in hooks
    ]
    for name in names:
        expect(name).to_have_count(1)
    assert "secret" not in page.locator("#webhooks").inner_text()
    for cell in page.locator("#webhooks tbody td").all():
        assert _fits(cell), cell.inner_text()
    for label in page.locator("#webhooks .confirm-check").all():
        box, cell = label.bounding_box(), label.locator("xpath=..").bounding_box()
        assert box and cell
        assert box["x"] >= cell["x"] - 1
        assert box["x"] + box["width"] <= cell["x"] + cell["width"] + 1
    table = page.locator("#webhooks")
    assert _fits(table.locator("xpath=.."))
    screenshot(page, "connections-two-webhooks-1024")
    watch.check("two webhooks")

    watch.goto("/projects/shop/#deliveries")
    to = page.locator("#deliveries tbody td").nth(1)
    expect(to).to_have_text(
        f"Webhook #{first.webhook_id} to https://hööks.example.com/…"
    )
