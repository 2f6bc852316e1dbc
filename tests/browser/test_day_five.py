"""A newcomer's fifth day in Chromium: a decision from a page opened before
another reviewer's says who decided what and saves nothing; the agreement
page's boxes after Back say the period its tables show; the keys help says
how a line range is commented from the keyboard, and that way works."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from replayhub import roles
from reviews.models import Review
from tests.browser.test_line_keys import FOCUSED, tab_to_the_line_numbers
from tests.factories import make_replay, make_user

pytestmark = pytest.mark.browser


def test_back_on_the_agreement_page_shows_the_period_of_its_tables(login, lead):
    today = timezone.localdate()
    since, typed = today - timedelta(days=10), today - timedelta(days=40)
    page = login(lead)
    page.goto(f"/agreement/?since={since}&until={today}")
    box = page.get_by_label("From")

    box.fill(str(typed))
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(f"since={typed}"))
    expect(page.locator("main")).to_contain_text(f"Decisions from {typed:%a %-d %b %Y}")

    page.go_back()
    expect(page).to_have_url(re.compile(f"since={since}"))
    expect(page.locator("main")).to_contain_text(f"Decisions from {since:%a %-d %b %Y}")
    expect(box).to_have_value(str(since))
    expect(page.get_by_label("To")).to_have_value(str(today))


def test_the_keys_help_says_how_a_range_is_commented_and_it_works(login, reviewer):
    """The help's way to a range, followed key by key: Enter on a line
    opens its box, Shift+Tab goes back to the line with the box open, Down
    and Shift+Enter widen it, what was typed kept."""
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"/replays/{replay.pk}/")
    page.keyboard.press("?")
    said = page.locator("#keys-help #keys-range")
    expect(said).to_contain_text("Shift+Tab goes back to its line number")
    page.keyboard.press("Escape")

    tab_to_the_line_numbers(page, "replay")
    page.keyboard.press("ArrowRight")
    assert page.evaluate(FOCUSED) == "Comment on line 1 (new)"
    page.keyboard.press("Enter")
    box = page.locator('#changes table[data-target="replay"] tr.comment-row')
    expect(box.locator("textarea")).to_be_focused()
    page.keyboard.type("both lines")

    page.keyboard.press("Shift+Tab")
    assert page.evaluate(FOCUSED) == "Comment on line 1 (new)"
    expect(box).to_have_count(1)
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Shift+Enter")
    expect(box.locator(".anchor")).to_have_text("src/app.py (new), lines 1-2")
    expect(box.locator("textarea")).to_have_value("both lines")


def test_a_decision_from_a_page_opened_before_anothers_is_refused_in_the_page(
    login, reviewer
):
    replay = make_replay(verdict="divergent")
    rita = login(reviewer)
    rita.goto(f"/replays/{replay.pk}/")
    vera = login(make_user("vera", roles.REVIEWER))
    vera.goto(f"/replays/{replay.pk}/")

    vera.keyboard.press("c")
    expect(vera.locator("#queue-rows")).to_contain_text("Nothing awaits review")
    rita.keyboard.press("c")

    said = rita.locator("#decided-meanwhile")
    expect(said).to_be_visible()
    expect(said).to_contain_text("vera confirmed divergent at")
    expect(said).to_contain_text("nothing was saved")
    expect(rita.locator("#human-decision")).to_contain_text("confirmed by vera")
    assert [r.reviewer.get_username() for r in Review.objects.all()] == ["vera"]
