"""A newcomer's first days in Chromium: Back to a page saved in place shows
what was saved, so the next save there keeps it; a blind judgement refused
for a missing label keeps the verdict chosen."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from replayhub.models import Budget, BudgetShare
from reviews.models import Label, Review, ReviewPolicy
from tests.factories import make_project, make_replay

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", [1024, 1280])
def test_back_to_the_budgets_shows_the_saved_figure_and_the_next_save_keeps_it(
    login, admin_user, width
):
    """Saved in place, away to Projects and Back: the card shows the figure
    saved, not the page as first sent, and saving another field of the same
    card keeps it."""
    Budget.objects.create(project=make_project("shop"))
    page = login(admin_user)
    page.set_viewport_size({"width": width, "height": 800})
    # Come from another page, as after signing in: the budgets page is then
    # sent with the cookies Back will ask with, so Chromium may reuse it.
    page.goto("/projects/")
    page.goto("/budgets/")
    card = page.locator("#budget-shop")
    replays = card.locator("input[name=share-shop-agentic-max_replays]")
    expect(replays).to_have_value("20")

    replays.fill("30")
    card.get_by_role("button", name="Save shop").click()
    expect(card.locator(".badge.ok")).to_have_text("Saved.")
    with page.expect_navigation():
        page.get_by_role("navigation", name="Main").get_by_role(
            "link", name="Projects"
        ).click()
    assert page.url.endswith("/projects/")
    page.go_back()
    assert page.url.endswith("/budgets/")

    expect(replays).to_have_value("30")
    card.locator("input[name=share-shop-agentic-max_sandbox_minutes]").fill("200")
    card.get_by_role("button", name="Save shop").click()
    expect(card.locator(".badge.ok")).to_have_text("Saved.")
    share = BudgetShare.objects.get(budget__project__slug="shop", tier="agentic")
    assert (share.max_replays, share.max_sandbox_minutes) == (30, 200)


def test_a_blind_judgement_refused_for_a_label_keeps_the_verdict_the_note_and_labels(
    login, reviewer
):
    """Blind review, a required label unset: 2 (equivalent), a note, Enter.
    The page that says which label is missing still has the verdict chosen,
    so Enter after setting the label records it."""
    project = make_project()
    ReviewPolicy.objects.create(project=project, blind=True)
    Label.objects.create(
        project=project,
        name="Root cause",
        kind="category",
        categories=["harness", "agent"],
        required=True,
    )
    replay = make_replay(verdict="divergent", project=project)
    page = login(reviewer)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"/replays/{replay.pk}/")
    verdict = page.locator("#blind-verdict")

    page.keyboard.press("2")
    expect(verdict).to_have_value("equivalent")
    note = page.locator("#decision textarea[name=note]")
    note.fill("Same tests pass on both trees")
    page.keyboard.press("Escape")  # leaves the note
    page.keyboard.press("Enter")

    expect(page.locator("#decision")).to_contain_text("Set the label “Root cause”.")
    expect(note).to_have_value("Same tests pass on both trees")
    expect(verdict).to_have_value("equivalent")
    assert not Review.objects.exists()
    page.get_by_label("Root cause").select_option("agent")
    page.keyboard.press("Escape")  # leaves the label's box
    page.keyboard.press("Enter")
    expect(page.locator("#queue-rows")).to_contain_text("Nothing awaits review")
    review = Review.objects.get()
    assert (review.decision, review.verdict_after) == ("overturn", "equivalent")
