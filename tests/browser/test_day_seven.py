"""A newcomer's seventh day in Chromium: a provider added, one edited, a
project's forge set, a label added and a text suite started, each first
refused then corrected. Back afterwards shows a real page, never the
browser's "Confirm form resubmission", and the refusal added no history
entry."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from replayhub.models import Forge, Provider, TextSuite
from reviews.models import Label
from tests.factories import make_project, make_superuser, make_text_run

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


def test_back_after_a_refused_then_corrected_forge_is_a_real_page(login, admin_user):
    """The forge form of a project's connections, refused for an API URL
    that is not http(s), corrected, saved: Back is the project's page."""
    make_project("shop")
    page = login(admin_user)
    page.goto("/projects/shop/")
    page.goto("/projects/shop/connections/")
    form = page.locator("#forge-form")
    form.get_by_label("Repository").fill("acme/shop")
    form.get_by_label("Token variable").fill("REPLAYHUB_REPO_TOKEN_SHOP")

    entries = page.evaluate("history.length")
    form.get_by_label("API URL").fill("ftp://x")
    form.get_by_role("button", name="Save the forge").click()
    problems = page.locator("#form-problems")
    expect(problems).to_contain_text("API URL")
    expect(problems).to_be_focused()
    assert page.evaluate("history.length") == entries
    form.get_by_label("API URL").fill("")
    form.get_by_role("button", name="Save the forge").click()
    expect(page.locator("ul.messages")).to_contain_text("Forge of shop saved.")
    expect(page.locator("#forge-now")).to_contain_text("acme/shop")
    assert Forge.objects.get().repo == "acme/shop"

    page.go_back()
    expect(page).to_have_url(re.compile(r"/projects/shop/$"))
    expect(page.get_by_role("heading", level=1)).to_contain_text("shop")


def test_back_after_a_refused_then_corrected_label_is_a_real_page(login, admin_user):
    """A label added on the review settings, refused for categories a yes /
    no label cannot have, corrected, saved: Back is the project's page."""
    make_project("shop")
    page = login(admin_user)
    page.goto("/projects/shop/")
    page.goto("/projects/shop/review/")
    form = page.locator("#label-form")
    form.get_by_label("Name").fill("would merge")

    entries = page.evaluate("history.length")
    form.get_by_label("Categories").fill("a, b")
    form.get_by_role("button", name="Add label").click()
    problems = page.locator("#form-problems")
    expect(problems).to_contain_text("A yes / no label has no categories")
    expect(problems).to_be_focused()
    assert page.evaluate("history.length") == entries
    form.get_by_label("Categories").fill("")
    form.get_by_role("button", name="Add label").click()
    expect(page.locator("ul.messages")).to_contain_text("Label “would merge” added.")
    assert Label.objects.get().name == "would merge"

    page.go_back()
    expect(page).to_have_url(re.compile(r"/projects/shop/$"))
    expect(page.get_by_role("heading", level=1)).to_contain_text("shop")


def test_back_after_a_refused_then_started_text_suite_is_a_real_page(login, admin_user):
    """A new text suite refused for at most 0 runs, corrected, started: Back
    is the page the suites were opened from."""
    run = make_text_run()
    Provider.objects.create(
        name="gpt", kind="openai", base_url="https://a.test/v1", key_env="K"
    )
    page = login(admin_user)
    page.goto("/projects/")
    page.goto("/text-suites/")
    form = page.locator("#new-suite form")
    form.get_by_label("Project").select_option(run.project.slug)
    form.get_by_label("Model", exact=True).fill("gpt-test")

    entries = page.evaluate("history.length")
    form.get_by_label("At most (runs)").fill("0")
    form.get_by_role("button", name="Start suite").click()
    problems = page.locator("#form-problems")
    expect(problems).to_contain_text("At least 1 run.")
    expect(problems).to_be_focused()
    assert page.evaluate("history.length") == entries
    form.get_by_label("At most (runs)").fill("")
    form.get_by_role("button", name="Start suite").click()
    expect(page.locator("ul.messages")).to_contain_text("queued")
    expect(page).to_have_url(re.compile(r"/text-suites/$"))
    assert TextSuite.objects.count() == 1

    page.go_back()
    expect(page).to_have_url(re.compile(r"/projects/$"))
    expect(page.get_by_role("heading", name="Projects", exact=True)).to_be_visible()
