"""A newcomer's eighth day in Chromium, at 1024 and 1280 px: two admins
editing one provider, a replay's decision refused, the replay page's
breadcrumb and its keys."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from replayhub.models import Provider
from reviews.models import AuditEvent
from tests.factories import make_superuser

pytestmark = pytest.mark.browser

NARROW = {"width": 1024, "height": 768}
WIDE = {"width": 1280, "height": 800}


def test_a_provider_save_from_a_page_older_than_anothers_save_is_refused(login):
    """Two admins open acme's edit page; the first saves a new base URL, the
    second, still showing the old one, saves a new key variable: refused in
    place (no history entry), the first's URL stands and is listed, and the
    second's typed variable stays in its form."""
    Provider.objects.create(
        name="acme", kind="anthropic", base_url="https://a.test", key_env="K"
    )
    first = login(make_superuser("ada", "ada@example.com"))
    second = login(make_superuser("bob", "bob@example.com"))
    first.set_viewport_size(NARROW)
    second.set_viewport_size(WIDE)
    for page in (first, second):
        page.goto("/providers/acme/edit/")
        expect(page.get_by_label("Base URL")).to_have_value("https://a.test")

    first.get_by_label("Base URL").fill("https://first.test")
    first.get_by_role("button", name="Save provider").click()
    expect(first.locator("ul.messages")).to_contain_text("Provider acme saved.")
    events = AuditEvent.objects.count()

    entries = second.evaluate("history.length")
    second.get_by_label("Key variable").fill("SECOND_KEY")
    second.get_by_role("button", name="Save provider").click()

    refused = second.locator(".stale-refused")
    expect(refused).to_contain_text(
        "Provider acme was changed by someone else since you opened this page: "
        "nothing was saved."
    )
    expect(refused).to_contain_text(
        "Base URL: stored now https://first.test (this form: https://a.test)"
    )
    expect(refused).to_be_focused()
    expect(second.get_by_label("Key variable")).to_have_value("SECOND_KEY")
    assert second.evaluate("history.length") == entries
    provider = Provider.objects.get()
    assert (provider.base_url, provider.key_env) == ("https://first.test", "K")
    assert AuditEvent.objects.count() == events

    # Put right from the list, and saved again: the page is current now.
    second.get_by_label("Base URL").fill("https://first.test")
    second.get_by_role("button", name="Save provider").click()
    expect(second.locator("ul.messages")).to_contain_text("Provider acme saved.")
    provider.refresh_from_db()
    assert (provider.base_url, provider.key_env) == ("https://first.test", "SECOND_KEY")
