"""A newcomer's eighth day in Chromium, at 1024 and 1280 px: two admins
editing one provider, a replay's decision refused, the replay page's
breadcrumb and its keys."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from replayhub import roles
from replayhub.models import Provider, Replay
from reviews.models import AuditEvent, Review
from tests.factories import make_replay, make_superuser, make_user

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


def test_back_after_a_refused_then_taken_decision_is_the_replay_page(login, reviewer):
    """An overturn sent without its verdict is refused in place, adding no
    history entry; the confirm that follows is taken. Back is the replay's
    page itself, then the run's page it was opened from: real pages, never
    the browser's "Confirm form resubmission"."""
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    page.set_viewport_size(NARROW)
    page.goto(f"/runs/{replay.run_id}/")
    page.goto(f"/replays/{replay.pk}/")
    entries = page.evaluate("history.length")

    page.get_by_role("button", name="Overturn").click()

    said = page.locator("#decision-errors")
    expect(said).to_have_text("Choose the corrected verdict.")
    expect(said).to_be_focused()
    assert page.evaluate("history.length") == entries
    assert not Review.objects.exists()
    page.keyboard.press("c")
    expect(page.locator("#queue-rows")).to_contain_text("Nothing awaits review")
    assert Review.objects.get().decision == Review.Decision.CONFIRM

    page.go_back()
    expect(page).to_have_url(re.compile(rf"/replays/{replay.pk}/$"))
    expect(page.locator("#automated-verdict")).to_have_text("Divergent")
    page.go_back()
    expect(page).to_have_url(re.compile(rf"/runs/{replay.run_id}/$"))
    expect(page.get_by_role("heading", level=1)).to_be_visible()


def test_a_decision_refused_as_decided_meanwhile_is_said_in_place(login, reviewer):
    """Another reviewer's decision taken since the page opened: the refusal
    (409) is swapped in, the page shows the decision standing, no history
    entry is added, and Back is the page before."""
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    page.set_viewport_size(WIDE)
    page.goto(f"/runs/{replay.run_id}/")
    page.goto(f"/replays/{replay.pk}/")
    entries = page.evaluate("history.length")
    vera = login(make_user("vera", roles.REVIEWER))
    vera.goto(f"/replays/{replay.pk}/")
    vera.keyboard.press("c")
    expect(vera.locator("#queue-rows")).to_contain_text("Nothing awaits review")

    page.keyboard.press("c")

    said = page.locator("#decided-meanwhile")
    expect(said).to_contain_text("vera confirmed divergent at")
    expect(said).to_contain_text("nothing was saved")
    expect(said).to_be_focused()
    expect(page.locator("#human-decision")).to_contain_text("confirmed by vera")
    assert page.evaluate("history.length") == entries
    assert [r.reviewer.get_username() for r in Review.objects.all()] == ["vera"]

    page.go_back()
    expect(page).to_have_url(re.compile(rf"/runs/{replay.run_id}/$"))
    expect(page.get_by_role("heading", level=1)).to_be_visible()


def test_every_breadcrumb_is_a_landmark_named_breadcrumb(login, reviewer):
    """The replay page's crumbs, and every other page's, are one navigation
    landmark a screen reader lists by name: "Breadcrumb"."""
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    page.set_viewport_size(NARROW)
    for url, first in (
        (f"/replays/{replay.pk}/", "← Queue"),
        (f"/runs/{replay.run_id}/", f"← {replay.project.slug}"),
        (f"/projects/{replay.project.slug}/", "← Projects"),
    ):
        page.goto(url)
        crumbs = page.get_by_role("navigation", name="Breadcrumb")
        expect(crumbs).to_have_count(1)
        expect(crumbs.get_by_role("link").first).to_have_text(first)


@pytest.mark.parametrize("viewport", [NARROW, WIDE], ids=["1024", "1280"])
def test_r_asks_before_a_rerun_as_the_other_decision_keys_do(login, reviewer, viewport):
    """r on a replay not decided yet says what it would do and records
    nothing; Esc keeps it so; r then r again (or Enter) asks for the rerun."""
    replay = make_replay(verdict="divergent")
    make_replay(verdict="equivalent", finished_ago=timedelta(hours=2))
    page = login(reviewer)
    page.set_viewport_size(viewport)
    page.goto(f"/replays/{replay.pk}/")
    asked = page.locator("#decision-asked")
    expect(asked).to_be_hidden()

    page.keyboard.press("r")
    expect(asked).to_have_text(
        "Press r again or Enter to ask for a rerun: a new replay of this run "
        "is queued. Esc asks for nothing."
    )
    page.wait_for_timeout(300)
    assert page.url.endswith(f"/replays/{replay.pk}/")
    assert not Review.objects.exists()
    page.keyboard.press("Escape")
    expect(asked).to_have_text("Kept as it is: nothing recorded.")
    page.keyboard.press("r")
    with page.expect_navigation():
        page.keyboard.press("Enter" if viewport == NARROW else "r")

    review = Review.objects.get()
    assert (review.replay_id, review.decision) == (replay.pk, Review.Decision.RERUN)
    assert Replay.objects.filter(trigger="rerun", run=replay.run).exists()


def test_undo_after_a_decision_keeps_the_note_typed(login, reviewer):
    """A note typed, c confirms and the next replay opens; z takes the
    decision back and the first replay's page has the note in its box."""
    first = make_replay(verdict="divergent")
    make_replay(verdict="equivalent", finished_ago=timedelta(hours=2))
    page = login(reviewer)
    page.set_viewport_size(NARROW)
    page.goto(f"/replays/{first.pk}/")
    note = page.locator("textarea[name=note]")
    note.fill("Same fix, other names.")
    page.keyboard.press("Escape")  # out of the box: the keys are the page's
    with page.expect_navigation():
        page.keyboard.press("c")
    assert not page.url.endswith(f"/replays/{first.pk}/")
    assert Review.objects.get().note == "Same fix, other names."

    with page.expect_navigation():
        page.keyboard.press("z")

    expect(page).to_have_url(re.compile(rf"/replays/{first.pk}/$"))
    expect(page.locator("#undo")).to_have_count(0)
    expect(note).to_have_value("Same fix, other names.")
    assert Review.objects.get().undone_at is not None
