"""A newcomer's seventh day in Chromium: a provider added and one edited,
each save first refused for a bad address then corrected; Back afterwards
shows a real page, never the browser's "Confirm form resubmission"."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from replayhub.models import Provider
from tests.factories import make_superuser

pytestmark = pytest.mark.browser


def refuse_then_save(page, submit: str, saved: str) -> None:
    """A base URL that is not http(s) refused in place, adding no history
    entry; corrected, the save is taken and the list says so."""
    entries = page.evaluate("history.length")
    page.get_by_label("Base URL").fill("ftp://x")
    page.get_by_role("button", name=submit).click()
    problems = page.locator("#form-problems")
    expect(problems).to_contain_text("'ftp://x' is not an http(s) URL.")
    expect(problems).to_be_focused()
    # Refused in place: no history entry Back would have to post again.
    assert page.evaluate("history.length") == entries
    page.get_by_label("Base URL").fill("https://b.test")
    page.get_by_role("button", name=submit).click()
    expect(page.locator("ul.messages")).to_contain_text(saved)
    expect(page).to_have_url(re.compile(r"/providers/$"))
    assert Provider.objects.get(name="acme").base_url == "https://b.test"


def test_back_after_a_refused_then_corrected_provider_edit_is_the_edit_page(login):
    Provider.objects.create(
        name="acme", kind="anthropic", base_url="https://a.test", key_env="K"
    )
    page = login(make_superuser())
    page.goto("/providers/")
    page.get_by_role("link", name="Edit acme").click()
    expect(page).to_have_url(re.compile(r"/providers/acme/edit/$"))

    refuse_then_save(page, "Save provider", "Provider acme saved.")

    page.go_back()
    expect(page).to_have_url(re.compile(r"/providers/acme/edit/$"))
    expect(page.get_by_role("heading", name="Edit provider acme")).to_be_visible()
    page.go_back()
    expect(page).to_have_url(re.compile(r"/providers/$"))
    expect(page.get_by_role("heading", name="Model providers")).to_be_visible()


def test_back_after_a_refused_then_corrected_provider_add_is_a_real_page(login):
    page = login(make_superuser())
    page.goto("/projects/")
    page.get_by_role("link", name=re.compile("providers", re.I)).first.click()
    expect(page).to_have_url(re.compile(r"/providers/$"))
    page.get_by_label("Name").fill("acme")
    page.get_by_label("Key variable").fill("ACME_API_KEY")

    refuse_then_save(page, "Add provider", "Provider acme added.")

    page.go_back()
    expect(page).to_have_url(re.compile(r"/projects/$"))
    expect(page.get_by_role("heading", name="Projects", exact=True)).to_be_visible()
