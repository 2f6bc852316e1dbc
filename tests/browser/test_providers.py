"""The provider pages in Chromium."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from replayhub.models import Provider
from tests.browser.watch import Watch
from tests.factories import make_superuser

pytestmark = pytest.mark.browser


def test_remove_provider_asks_first_and_removes_nothing_until_ticked(login):
    """Pressed alone, Remove sends nothing (the browser asks for the tick);
    ticked, it removes the provider and says so."""
    Provider.objects.create(
        name="acme", kind="anthropic", base_url="https://a.test", key_env="K"
    )
    page = login(make_superuser())
    watch = Watch(page, console_errors=True)
    watch.goto("/providers/acme/edit/")
    remove = page.get_by_role("button", name="Remove provider acme")

    remove.click()
    sure = page.get_by_label("Yes, remove provider acme (https://a.test)")
    expect(sure).to_be_focused()
    assert sure.evaluate("box => !box.validity.valid")
    expect(page).to_have_url(re.compile(r"/providers/acme/edit/$"))
    assert Provider.objects.filter(name="acme").exists()

    sure.check()
    remove.click()
    expect(page.locator("ul.messages")).to_contain_text("Provider acme removed.")
    expect(page).to_have_url(re.compile(r"/providers/$"))
    assert not Provider.objects.exists()
    watch.check("provider removed after its confirmation")
