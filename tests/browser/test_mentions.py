"""The @mention check in a real Chromium: a name being typed is not an error;
a complete name that is nobody's is, and the comment is not sent."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from replayhub import roles
from reviews.models import Comment
from tests.factories import make_replay, make_user

pytestmark = pytest.mark.browser


@pytest.fixture
def reviewers(db):
    return [make_user(name, roles.REVIEWER) for name in ("revathi", "sam")]


def valid(page) -> bool:
    return page.evaluate("document.getElementById('comment-body').validity.valid")


def test_a_name_being_typed_shows_no_error_and_nobody_is_refused(
    login, reviewer, reviewers
):
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    page.goto(f"/replays/{replay.pk}/")
    box = page.locator("#comment-body")
    warning = page.locator(".mention-warning")

    box.click()
    page.keyboard.type("Ask @rev")

    # The list offers the name being typed, and nothing is called an error.
    expect(page.locator(".mention-list li")).to_have_text(["@revathi"])
    expect(warning).to_be_hidden()
    assert valid(page)
    # Nor while a name goes on with a dot (names may hold one).
    page.keyboard.press("Escape")
    page.keyboard.type(".")
    page.wait_for_timeout(200)
    expect(warning).to_be_hidden()
    assert valid(page)

    box.fill("")
    page.keyboard.type("Ask @nobody ")

    expect(warning).to_be_visible()
    expect(warning).to_have_text(
        "No reviewer is called @nobody: mention someone on the list, or drop the @."
    )
    assert not valid(page)
    page.get_by_role("button", name="Comment", exact=True).click()
    page.wait_for_timeout(300)
    expect(warning).to_be_visible()
    assert not Comment.objects.exists()


def test_sending_judges_the_name_the_caret_is_still_in(login, reviewer, reviewers):
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    page.goto(f"/replays/{replay.pk}/")
    page.locator("#comment-body").click()
    page.keyboard.type("Ask @")
    # The people are known: the list offers them all.
    expect(page.locator(".mention-list li")).to_have_count(3)
    page.keyboard.type("nobody")
    expect(page.locator(".mention-list")).to_have_count(0)
    expect(page.locator(".mention-warning")).to_be_hidden()

    page.keyboard.press("Control+Enter")

    expect(page.locator(".mention-warning")).to_have_text(
        "No reviewer is called @nobody: mention someone on the list, or drop the @."
    )
    page.wait_for_timeout(300)
    assert not Comment.objects.exists()


def test_the_open_list_is_announced_as_the_boxs_popup(login, reviewer, reviewers):
    replay = make_replay(verdict="divergent")
    make_user("revel", roles.REVIEWER)
    page = login(reviewer)
    page.goto(f"/replays/{replay.pk}/")
    box = page.locator("#comment-body")
    box.click()
    expect(box).to_have_attribute("role", "combobox")
    expect(box).to_have_attribute("aria-expanded", "false")

    page.keyboard.type("Ask @rev")

    options = page.locator(".mention-list [role=option]")
    expect(options).to_have_text(["@revathi", "@revel"])
    listbox = page.locator(".mention-list[role=listbox]")
    expect(box).to_have_attribute("aria-expanded", "true")
    expect(box).to_have_attribute("aria-controls", listbox.get_attribute("id") or "-")
    first, second = (options.nth(i).get_attribute("id") for i in range(2))
    assert first and second and first != second
    expect(box).to_have_attribute("aria-activedescendant", first)
    page.keyboard.press("ArrowDown")
    expect(box).to_have_attribute("aria-activedescendant", second)
    expect(options.nth(1)).to_have_attribute("aria-selected", "true")

    page.keyboard.press("Escape")
    expect(box).to_have_attribute("aria-expanded", "false")
    assert box.get_attribute("aria-activedescendant") is None
    assert box.get_attribute("aria-controls") is None
