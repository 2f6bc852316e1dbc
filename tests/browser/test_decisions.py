"""Deciding in a real Chromium: one key per corrected verdict, the choice shown
before it is recorded, a second yes against verified evidence, and undo."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from replayhub import roles
from replayhub.models import Replay
from reviews.models import AuditEvent, Claim, Label, Review
from tests.browser.watch import Watch
from tests.factories import make_replay, make_user

pytestmark = pytest.mark.browser

DETAIL = re.compile(r".*/replays/(\d+)/$")


def test_each_corrected_verdict_has_its_own_key_and_is_shown_before_recording(
    login, reviewer, screenshot
):
    replay = make_replay(verdict="divergent", title="Round totals")
    page = login(reviewer)
    watch = Watch(page, console_errors=True)
    page.goto(f"/replays/{replay.pk}/")

    page.keyboard.press("o")
    select = page.locator("select[name=verdict_after]")
    expect(select).to_be_focused()
    # A letter picks nothing: "i" could mean identical or inconclusive.
    page.keyboard.press("i")
    expect(select).to_have_value("")
    page.keyboard.press("4")
    expect(select).to_have_value("inconclusive")
    preview = page.locator("#overturn-preview")
    expect(preview).to_contain_text("Overturn divergent → inconclusive")
    screenshot(page, "overturn-preview")
    assert not Review.objects.exists()
    # Esc cancels the choice; nothing is recorded.
    page.keyboard.press("Escape")
    expect(select).to_have_value("")
    assert not Review.objects.exists()

    # A digit works straight from the page, too.
    page.keyboard.press("2")
    expect(select).to_have_value("equivalent")
    page.keyboard.press("4")
    expect(select).to_have_value("inconclusive")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    review = Review.objects.get()
    assert (review.decision, review.verdict_after) == ("overturn", "inconclusive")
    watch.check("the flow's end")


@pytest.mark.parametrize("size", [(1024, 768), (1280, 800)])
def test_the_current_verdicts_own_key_says_it_is_the_verdict_already(
    login, reviewer, screenshot, size
):
    replay = make_replay(verdict="equivalent", title="Both pass")
    page = login(reviewer)
    page.set_viewport_size({"width": size[0], "height": size[1]})
    watch = Watch(page, console_errors=True)
    page.goto(f"/replays/{replay.pk}/")

    page.keyboard.press("o")
    select = page.locator("select[name=verdict_after]")
    expect(select).to_be_focused()
    page.keyboard.press("2")  # equivalent: what the replay is already
    preview = page.locator("#overturn-preview")
    expect(preview).to_be_visible()
    expect(preview).to_have_text("Already equivalent: choose another verdict.")
    expect(select).to_have_value("")
    screenshot(page, f"already-{size[0]}")
    # The same from the page, without o first.
    page.keyboard.press("Escape")
    page.keyboard.press("2")
    expect(preview).to_have_text("Already equivalent: choose another verdict.")
    page.keyboard.press("3")
    expect(preview).to_contain_text("Overturn equivalent → divergent")
    # Pressed after a choice, it leaves nothing chosen for Enter to record.
    page.keyboard.press("2")
    expect(preview).to_have_text("Already equivalent: choose another verdict.")
    expect(select).to_have_value("")
    page.keyboard.press("Enter")
    expect(preview).to_contain_text("to choose the corrected verdict")
    assert not Review.objects.exists()
    watch.check("the flow's end")


def test_an_overturn_against_a_verified_tree_check_needs_a_second_enter(
    login, reviewer
):
    # The fixture's tree identity check failed (cryptographically verified).
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    watch = Watch(page, console_errors=True)
    page.goto(f"/replays/{replay.pk}/")

    page.keyboard.press("1")
    preview = page.locator("#overturn-preview")
    expect(preview).to_contain_text("tree identity check failed")
    page.keyboard.press("Enter")
    expect(preview).to_contain_text("Press Enter again")
    page.wait_for_timeout(300)
    assert not Review.objects.exists()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    review = Review.objects.get()
    assert review.verdict_after == "identical"
    event = AuditEvent.objects.get(action="review.overturn")
    assert event.after["overruled"]
    watch.check("the flow's end")


def test_without_script_the_server_asks_for_the_second_yes_at_the_same_address(
    login, reviewer
):
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    page.goto(f"/replays/{replay.pk}/")
    page.select_option("select[name=verdict_after]", "identical")
    page.locator("textarea[name=note]").fill("hashes are stale")
    page.get_by_role("button", name="Overturn").click()

    expect(page.locator("#overrule-warning")).to_contain_text(
        "contradicts cryptographically verified evidence"
    )
    assert DETAIL.match(page.url) and int(DETAIL.match(page.url).group(1)) == replay.pk
    # Nothing typed is lost.
    expect(page.locator("select[name=verdict_after]")).to_have_value("identical")
    expect(page.locator("textarea[name=note]")).to_have_value("hashes are stale")
    assert not Review.objects.exists()
    with page.expect_navigation():
        page.get_by_role("button", name="Overturn").click()
    assert Review.objects.get().note == "hashes are stale"


def test_a_failed_decision_keeps_the_page_address_and_shows_the_error(login, reviewer):
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    watch = Watch(page, console_errors=True)
    watch.goto(f"/replays/{replay.pk}/")
    page.get_by_role("button", name="Overturn").click()
    expect(page.locator("#decision .error")).to_contain_text(
        "Choose the corrected verdict."
    )
    # The focus is at the refusal, in the bar, not at the top of the page.
    expect(page.locator("#decision-errors")).to_be_focused()
    watch.check("decision refused")
    assert page.url.endswith(f"/replays/{replay.pk}/")
    # The old form address leads back to the page rather than a blank 405.
    response = page.goto(f"/replays/{replay.pk}/decide/")
    assert response.status == 200
    assert page.url.endswith(f"/replays/{replay.pk}/")


def test_a_label_left_unset_takes_the_focus_when_the_decision_is_refused(
    login, reviewer
):
    replay = make_replay(verdict="divergent")
    Label.objects.create(
        project=replay.project,
        name="area",
        kind="category",
        categories=["harness", "agent"],
        required=True,
    )
    page = login(reviewer)
    page.goto(f"/replays/{replay.pk}/")
    page.get_by_role("button", name="Confirm").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#decision label.invalid")).to_contain_text("area")
    expect(page.locator("#decision label.invalid select")).to_be_focused()


def test_a_reviewer_takes_back_a_decision_with_z_and_it_is_audited(
    login, reviewer, screenshot
):
    first = make_replay(verdict="equivalent")
    make_replay(verdict="divergent")
    page = login(reviewer)
    watch = Watch(page, console_errors=True)
    page.goto(f"/replays/{first.pk}/")
    with page.expect_navigation(url=DETAIL):
        page.keyboard.press("c")
    bar = page.locator("#undo")
    expect(bar).to_contain_text(f"Replay {first.pk}: confirmed equivalent.")
    screenshot(page, "undo-bar")

    with page.expect_navigation(url=DETAIL):
        page.keyboard.press("z")
    assert page.url.endswith(f"/replays/{first.pk}/")
    expect(page.locator(".messages")).to_contain_text("taken back")
    review = Review.objects.get(replay=first)
    assert review.undone_at is not None
    assert Replay.objects.get(pk=first.pk).review_band is not None
    assert Claim.objects.get(replay=first).reviewer == reviewer
    undo = AuditEvent.objects.get(action="review.undo")
    assert undo.actor == reviewer
    expect(page.locator("#audit-trail")).to_contain_text("rita took back their confirm")
    expect(page.locator("#undo")).to_have_count(0)
    # In the history, struck through and muted, never faded below a readable
    # contrast (opacity made it 4.2:1).
    taken_back = page.locator("#history .review.undone")
    expect(taken_back).to_contain_text("taken back")
    expect(taken_back).to_have_css("opacity", "1")
    expect(taken_back.locator(".decided")).to_have_css(
        "text-decoration-line", "line-through"
    )
    # Taken back, the replay is undecided again, and its page says so.
    expect(page.locator(".decision")).not_to_contain_text("Already decided")
    # The decision can be made again (a rerun asks first).
    page.keyboard.press("r")
    with page.expect_navigation():
        page.keyboard.press("r")
    assert Review.objects.filter(replay=first, undone_at__isnull=True).count() == 1
    watch.check("the flow's end")


def test_taking_a_decision_back_lets_go_of_the_next_item_it_claimed(login, reviewer):
    first = make_replay(verdict="divergent")
    second = make_replay(verdict="divergent", finished_ago=timedelta(hours=2))
    page = login(reviewer)
    page.goto("/")
    with page.expect_navigation(url=DETAIL):
        page.keyboard.press("n")
    assert page.url.endswith(f"/replays/{first.pk}/")
    with page.expect_navigation(url=DETAIL):
        page.keyboard.press("c")
    assert page.url.endswith(f"/replays/{second.pk}/")
    assert Claim.objects.get(replay=second).reviewer == reviewer
    with page.expect_navigation(url=DETAIL):
        page.keyboard.press("z")
    assert page.url.endswith(f"/replays/{first.pk}/")

    # Back on the first, held by the reviewer; the second is free again.
    assert list(Claim.objects.values_list("replay_id", flat=True)) == [first.pk]
    page.goto("/")
    expect(page.locator("#assigned-to-me")).to_have_text("Assigned to me: 1")
    held = page.locator(f'#queue-rows tr[data-href="/replays/{second.pk}/"] .holder')
    expect(held).to_have_count(0)


def test_the_header_shows_the_automated_and_the_reviewers_verdict(login, reviewer):
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    page.goto(f"/replays/{replay.pk}/")
    page.keyboard.press("4")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.goto(f"/replays/{replay.pk}/")
    expect(page.locator("#automated-verdict")).to_have_text("Divergent")
    expect(page.locator("#human-verdict")).to_have_text("Inconclusive")
    expect(page.locator("#human-decision")).to_contain_text(
        "overturned to inconclusive by rita"
    )


def test_the_overturn_preview_does_not_move_the_decision_bar(login, reviewer):
    replay = make_replay(verdict="divergent", title="Round totals")
    page = login(reviewer)
    page.set_viewport_size({"width": 1024, "height": 900})
    page.goto(f"/replays/{replay.pk}/")
    bar = page.locator("#decision")
    rerun = page.get_by_role("button", name="Rerun")
    before = (bar.bounding_box(), rerun.bounding_box())

    page.keyboard.press("4")
    expect(page.locator("#overturn-preview")).to_contain_text(
        "Overturn divergent → inconclusive: Enter records it, Esc cancels."
    )

    assert (bar.bounding_box(), rerun.bounding_box()) == before
    page.keyboard.press("Escape")
    assert (bar.bounding_box(), rerun.bounding_box()) == before


def test_a_key_on_a_decided_replay_asks_before_a_second_decision(
    login, reviewer, lead, screenshot
):
    from reviews.services import review_decide

    replay = make_replay(verdict="divergent", title="Decided already")
    review_decide(replay=replay, reviewer=lead, decision="confirm")
    page = login(reviewer)
    page.set_viewport_size({"width": 1024, "height": 768})
    watch = Watch(page, console_errors=True)
    page.goto(f"/replays/{replay.pk}/")
    note = page.locator("#decided-note")

    # One press says what stands and records nothing.
    page.keyboard.press("c")
    expect(note).to_contain_text("Already decided as confirmed divergent")
    expect(note).to_contain_text("Press c again or Enter")
    screenshot(page, "decided-asks-first")
    # Esc keeps the standing decision; so does a different key's question.
    page.keyboard.press("Escape")
    expect(note).to_contain_text("Kept as it is")
    page.keyboard.press("r")
    expect(note).to_contain_text("Press r again or Enter to ask for a rerun")
    page.keyboard.press("Escape")
    # An overturn chosen by its digit asks at its first Enter.
    page.keyboard.press("4")
    page.keyboard.press("Enter")
    expect(note).to_contain_text("Press Enter to overturn it")
    page.keyboard.press("Escape")
    page.wait_for_timeout(300)
    assert page.url.endswith(f"/replays/{replay.pk}/")
    assert Review.objects.filter(replay=replay).count() == 1

    # The same key twice records a second decision beside the first.
    page.keyboard.press("c")
    with page.expect_navigation():
        page.keyboard.press("c")
    decisions = list(
        Review.objects.filter(replay=replay)
        .order_by("pk")
        .values_list("reviewer__username", "decision")
    )
    assert decisions == [(lead.username, "confirm"), (reviewer.username, "confirm")]
    watch.check("the flow's end")


def test_keys_on_an_overturned_replay_name_the_verdicts_they_mean(
    login, reviewer, lead
):
    from reviews.services import review_decide

    replay = make_replay(verdict="divergent", title="Overturned already")
    review_decide(
        replay=replay, reviewer=lead, decision="overturn", verdict_after="equivalent"
    )
    page = login(reviewer)
    page.goto(f"/replays/{replay.pk}/")
    note = page.locator("#decided-note")

    # c names the verdict a confirm records: the automated one.
    page.keyboard.press("c")
    expect(note).to_have_text(
        "Already decided as overturned to equivalent. Press c again or Enter "
        "to confirm divergent as a second decision; Esc keeps it as it is."
    )
    page.keyboard.press("Escape")
    # 3 (divergent) is no overturn; what stands is equivalent, not divergent.
    page.keyboard.press("o")
    page.keyboard.press("3")
    expect(page.locator("#overturn-preview")).to_have_text(
        "Now equivalent (overturned); divergent is the automated verdict: "
        "press c to confirm it, or choose another."
    )
    assert Review.objects.filter(replay=replay).count() == 1


def test_decision_keys_on_a_replay_someone_else_holds_say_who_holds_it(login, reviewer):
    from reviews.services import claim_take

    replay = make_replay(verdict="divergent", title="Held by rita")
    claim_take(replay=replay, reviewer=reviewer)
    page = login(make_user("sam", roles.REVIEWER))
    watch = Watch(page, console_errors=True)
    page.goto(f"/replays/{replay.pk}/")
    said = page.locator("#held-said")

    for key in ("c", "o", "r"):
        page.keyboard.press(key)
        expect(said).to_have_text(
            "rita holds this replay: no confirm, overturn or rerun here until "
            "it is released, expires or is handed to you."
        )
        page.evaluate("document.getElementById('held-said').textContent = ''")
    assert not Review.objects.exists()
    watch.check("keys on a held replay")
