"""A newcomer's fourth day in Chromium at 1024 and 1280 px: under blind review
Enter opens what it opens everywhere (a toggle, a line's comment box) and
records nothing there; z takes back a decision just recorded after a reload,
from the decisions' own Undo."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from replayhub import roles
from reviews.models import Review, ReviewPolicy
from reviews.services import review_decide
from tests.factories import make_project, make_replay, make_user

pytestmark = pytest.mark.browser

WIDTHS = [1024, 1280]


def blind_replay():
    project = make_project()
    ReviewPolicy.objects.create(project=project, blind=True)
    return make_replay(verdict="divergent", project=project, test_output="t" * 208)


@pytest.mark.parametrize("width", WIDTHS)
def test_enter_opens_a_toggle_under_blind_review(login, reviewer, width):
    """No verdict chosen yet: Enter on the second-opinion toggle and on a test
    output's toggle opens each, and the page does not ask for a verdict."""
    replay = blind_replay()
    page = login(reviewer)
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(f"/replays/{replay.pk}/")
    said = page.locator("#blind-preview")

    ask = page.locator(".ask-second")
    ask.locator("summary").focus()
    page.keyboard.press("Enter")
    expect(ask).to_have_attribute("open", "")
    expect(said).to_have_text("")

    output = page.locator("details", has=page.get_by_text("208 chars")).first
    output.locator("summary").focus()
    page.keyboard.press("Enter")
    expect(output).to_have_attribute("open", "")
    expect(said).to_have_text("")


@pytest.mark.parametrize("width", WIDTHS)
def test_enter_on_a_toggle_or_a_line_records_no_chosen_blind_verdict(
    login, reviewer, width
):
    """A verdict chosen (2): Enter on a toggle opens it and Enter on a line
    number opens the comment box there; neither records the judgement, which
    Enter then records from the page itself."""
    replay = blind_replay()
    page = login(reviewer)
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(f"/replays/{replay.pk}/")
    page.keyboard.press("2")
    expect(page.locator("#blind-verdict")).to_have_value("equivalent")

    output = page.locator("details", has=page.get_by_text("208 chars")).first
    output.locator("summary").focus()
    page.keyboard.press("Enter")
    expect(output).to_have_attribute("open", "")

    page.locator('table[data-target="replay"] [data-line][role=button]').first.focus()
    page.keyboard.press("Enter")
    box = page.locator("tr.comment-row textarea")
    expect(box).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.locator("tr.comment-row")).to_have_count(0)
    assert not Review.objects.exists()

    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("Enter")
    expect(page.locator("#queue-rows")).to_contain_text("Nothing awaits review")
    assert Review.objects.get().verdict_after == "equivalent"


@pytest.mark.parametrize("width", WIDTHS)
def test_z_after_a_reload_takes_back_ones_own_decision(login, reviewer, width):
    """The flash bar is gone after a reload; z presses the decision's own Undo
    in the audit trail, while the decision can still be taken back."""
    replay = make_replay(verdict="divergent")
    review = review_decide(replay=replay, reviewer=reviewer, decision="confirm")
    page = login(reviewer)
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(f"/replays/{replay.pk}/")
    expect(page.locator("#undo")).to_have_count(0)
    expect(page.locator("#history button", has_text="Undo")).to_have_count(1)

    page.keyboard.press("z")

    expect(page.locator("#history")).to_contain_text("taken back")
    review.refresh_from_db()
    assert review.undone_at is not None


def test_z_takes_back_nothing_of_someone_elses_decision(login, reviewer):
    """Another reviewer's decision has no Undo here: z leaves it standing."""
    replay = make_replay(verdict="divergent")
    sam = make_user("sam", roles.REVIEWER)
    review = review_decide(replay=replay, reviewer=sam, decision="confirm")
    page = login(reviewer)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"/replays/{replay.pk}/")
    expect(page.locator("#history")).to_contain_text("sam")

    page.keyboard.press("z")
    page.wait_for_load_state()

    expect(page.locator("#history")).not_to_contain_text("taken back")
    review.refresh_from_db()
    assert review.undone_at is None
