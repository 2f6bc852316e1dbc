"""The provider pages in Chromium at a 1024 px screen: the add and edit forms
show a whole key variable name and base URL, each help text under its input."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from replayhub.models import Provider
from tests.browser.watch import Watch
from tests.factories import make_superuser

pytestmark = pytest.mark.browser

# The README's own example of a provider's key variable.
KEY_ENV = "ANTHROPIC_KEY_FOR_REPLAYS"
BASE_URL = "https://generativelanguage.googleapis.com/v1beta"


@pytest.mark.parametrize("path", ["/providers/", "/providers/acme/edit/"])
def test_at_1024_px_the_key_variable_and_base_url_show_whole(login, path):
    Provider.objects.create(
        name="acme", kind="anthropic", base_url="https://a.test", key_env="K"
    )
    page = login(make_superuser())
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(path)
    form = page.locator("#provider-form")

    for label, value in (("Key variable", KEY_ENV), ("Base URL", BASE_URL)):
        field = form.get_by_label(label)
        field.fill(value)
        sizes = field.evaluate("i => [i.scrollWidth, i.clientWidth]")
        assert sizes[0] <= sizes[1], (label, sizes)
        # The help text under the input, as on the project form.
        help_text = field.locator("xpath=following-sibling::*[1]")
        expect(help_text).to_have_class("muted small")
        below, box = help_text.bounding_box(), field.bounding_box()
        assert below and box and below["y"] >= box["y"] + box["height"], label


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


def test_the_providers_list_fits_1024_px_with_long_addresses_and_names(login):
    Provider.objects.create(
        name="acme",
        kind="openai",
        base_url="https://llm-gateway.internal.example.com/v1/openai-compatible"
        "/deployments/prod-eu-west-1",
        key_env="REPLAYHUB_ACME_OPENAI_COMPAT_PROD_EU_WEST_KEY",
    )
    page = login(make_superuser())
    page.set_viewport_size({"width": 1024, "height": 768})
    watch = Watch(page, console_errors=True)

    watch.goto("/providers/")

    assert (
        page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
    )
    expect(page.locator("#providers")).to_contain_text("PROD_EU_WEST_KEY")
