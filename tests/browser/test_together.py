"""Reviewing together in a real Chromium: comments, labels, second opinions,
gold items, blind mode, search, hand-off and bulk confirm."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from replayhub import roles
from reviews.models import (
    Claim,
    Comment,
    GoldItem,
    Label,
    Notice,
    Review,
    ReviewPolicy,
    SecondOpinion,
)
from reviews.services import claim_take, review_decide
from tests.factories import make_project, make_replay, make_user

pytestmark = pytest.mark.browser

ESCAPE_ME = '<img src=x onerror="window.__pwned=1">'


@pytest.fixture
def sam(db):
    return make_user("sam", roles.REVIEWER)


def test_a_reviewer_comments_on_a_range_replies_and_resolves(
    login, reviewer, sam, screenshot
):
    replay = make_replay(verdict="divergent", test_output="collected 4\n4 passed")
    page = login(reviewer)
    page.goto(f"/replays/{replay.pk}/")

    # Click a line number, shift-click another: a box opens under the range.
    page.locator('#dod [data-side="new"][data-line="2"]').click()
    page.locator('#dod [data-side="new"][data-line="3"]').click(modifiers=["Shift"])
    expect(page.locator("#dod tr.picked")).to_have_count(2)
    box = page.locator("#dod tr.comment-row")
    expect(box.locator(".anchor")).to_have_text("src/app.py (new), lines 2-3")
    expect(box.locator("textarea")).to_be_focused()
    page.keyboard.type(f"Why y? @sam {ESCAPE_ME}")
    page.keyboard.press("Control+Enter")

    thread = page.locator("article.thread")
    expect(thread).to_have_count(1)
    expect(page.locator("#dod tr.thread-row article.thread")).to_have_count(1)
    expect(thread.locator(".anchor")).to_contain_text("src/app.py (new), lines 2-3")
    expect(thread.locator("pre.excerpt")).to_have_text("x = 2\ny = 3")
    expect(thread.locator(".body").first).to_contain_text(ESCAPE_ME)
    assert page.evaluate("window.__pwned") is None
    expect(page.locator("#open-threads")).to_have_text("1 unresolved comment")
    # The commented lines are marked in every view of that diff.
    expect(page.locator("#dod tr.commented")).to_have_count(2)

    # A line of a test output.
    page.locator("#tests details summary").first.click()
    page.locator('pre[data-path="original run 1"] [data-line="2"]').click()
    expect(page.locator("#tests .picked")).to_have_count(1)
    expect(page.locator("#tests span.ol.picked")).to_have_text("4 passed")
    page.locator("#tests .comment-row textarea").fill("Only four tests?")
    page.locator("#tests .comment-row").get_by_role("button", name="Comment").click()
    expect(page.locator("article.thread")).to_have_count(2)
    expect(page.locator("#open-threads")).to_have_text("2 unresolved comments")
    page.reload()
    page.locator("#tests details summary").first.click()
    expect(page.locator("#tests span.ol.commented")).to_have_text("4 passed")
    expect(page.locator("#tests .thread-row article.thread")).to_have_count(1)

    # The queue row counts them too.
    page.goto("/")
    expect(page.locator("#queue-rows .open-threads")).to_have_text("2 unresolved")

    # The mentioned reviewer sees a badge, replies and resolves.
    other = login(sam)
    other.goto("/")
    expect(other.locator("#inbox-badge")).to_have_text("1")
    # Opening the replay reads the notice about it.
    other.goto(f"/replays/{replay.pk}/")
    expect(other.locator("#inbox-badge")).to_have_count(0)
    first = other.locator("#dod article.thread")
    first.locator("textarea").fill("Harmless, it is the second test's value.")
    first.locator("textarea").press("Control+Enter")
    expect(other.locator(".comment.reply")).to_contain_text("Harmless")
    other.locator("#dod article.thread").get_by_role("button", name="Resolve").click()
    expect(other.locator("#open-threads")).to_have_text("1 unresolved comment")
    expect(other.locator("#dod .thread.resolved")).to_have_count(1)
    screenshot(other, "together-comments")
    other.goto("/inbox/")
    expect(other.locator("#notices li")).to_contain_text("mentioned you")
    expect(other.locator("#notices li.unread")).to_have_count(0)
    assert Comment.objects.filter(parent__isnull=False).count() == 1


def test_a_required_label_blocks_the_decision_until_it_is_set(login, reviewer):
    replay = make_replay(verdict="divergent")
    project = replay.project
    cause = Label.objects.create(
        project=project,
        name="root cause",
        kind="category",
        categories=["harness", "agent", "task"],
        required=True,
    )
    Label.objects.create(project=project, name="would merge", kind="yes_no")
    page = login(reviewer)
    page.goto(f"/replays/{replay.pk}/")

    page.get_by_role("button", name="Confirm").click()
    expect(page.locator("#labels .error")).to_have_text("Set the label “root cause”.")
    assert not Review.objects.exists()

    page.locator(f"select[name=label_{cause.pk}]").select_option("agent")
    with page.expect_navigation():
        page.get_by_role("button", name="Confirm").click()
    review = Review.objects.get()
    assert review.labels.get().value == "agent"
    page.goto("/done/")
    expect(page.locator("#done-rows")).to_contain_text("root cause: agent")


def test_an_overturn_waits_for_a_second_reviewer_who_disagrees(login, reviewer, sam):
    project = make_project()
    ReviewPolicy.objects.create(project=project, second_on_overturn=True)
    replay = make_replay(verdict="equivalent", project=project, title="Coupons")
    first = login(reviewer)
    first.goto(f"/replays/{replay.pk}/")
    first.locator("select[data-overturn-verdict]").select_option("divergent")
    with first.expect_navigation():
        first.get_by_role("button", name="Overturn").click()
    # The first reviewer is never handed it again.
    first.goto("/")
    expect(first.locator("#queue-rows")).to_contain_text("Needs second review")
    first.get_by_role("button", name="Claim next").click()
    expect(first.locator(".messages")).to_contain_text("Nothing left")

    second = login(sam)
    second.goto("/")
    second.get_by_role("button", name="Claim next").click()
    expect(second.locator(".task-title")).to_have_text("Coupons")
    expect(second.locator("#opinion-open")).to_contain_text("rita decided divergent")
    with second.expect_navigation():
        second.get_by_role("button", name="Confirm").click()
    second.goto(f"/replays/{replay.pk}/")
    expect(second.locator(".opinion.disagree")).to_contain_text(
        "rita: divergent · sam: equivalent"
    )
    assert SecondOpinion.objects.get().agrees is False


def test_anyone_can_ask_for_a_second_opinion(login, reviewer, sam):
    replay = make_replay(verdict="divergent")
    review_decide(replay=replay, reviewer=reviewer, decision="confirm")
    page = login(sam)
    page.goto(f"/replays/{replay.pk}/")
    page.locator(".ask-second summary").click()
    page.locator(".ask-second input[name=note]").fill("the tests look thin")
    page.locator(".ask-second").get_by_role("button", name="Ask").click()
    expect(page.locator("#opinion-open")).to_contain_text("the tests look thin")


def test_a_gold_item_looks_ordinary_until_judged_and_the_lead_sees_agreement(
    login, reviewer, sam, lead, admin_user, screenshot
):
    project = make_project()
    ReviewPolicy.objects.create(project=project, gold_rate_percent=100)
    settled = make_replay(verdict="equivalent", project=project, title="Settled")
    review_decide(
        replay=settled, reviewer=sam, decision="overturn", verdict_after="divergent"
    )
    admin = login(admin_user)
    admin.goto(f"/replays/{settled.pk}/")
    admin.get_by_role("button", name="Mark as gold").click()
    expect(admin.locator("#gold-item")).to_contain_text("Divergent")
    assert GoldItem.objects.get().verdict == "divergent"

    page = login(reviewer)
    page.goto("/")
    page.get_by_role("button", name="Claim next").click()
    expect(page.locator(".task-title")).to_have_text("Settled")
    # Nothing tells it apart: no history, queued in its band, held by the viewer.
    expect(page.locator("#history")).not_to_contain_text("sam")
    expect(page.locator("#gold-item")).to_have_count(0)
    expect(page.locator(".meta")).to_contain_text("queued: Tests or verifier passed")
    expect(page.locator(".held.mine")).to_be_visible()
    page.get_by_role("button", name="Confirm").click()
    expect(page.locator(".messages")).to_contain_text(
        "That was a gold item: its settled verdict is divergent; you said equivalent."
    )

    leader = login(lead)
    leader.goto("/agreement/")
    gold_rows = leader.locator("#gold-agreement tbody tr")
    expect(gold_rows).to_have_count(1)
    expect(gold_rows.first).to_contain_text("rita")
    expect(gold_rows.first.locator("td").nth(3)).to_have_text("0%")
    pair = leader.locator("#pair-agreement tbody tr")
    expect(pair).to_contain_text("rita · sam")
    # One shared item, judged differently: observed and chance agreement are 0.
    expect(pair.locator("td").nth(4)).to_have_text("0.00")
    screenshot(leader, "together-agreement")


def test_blind_mode_hides_the_verdict_until_the_reviewer_judges(login, reviewer):
    project = make_project()
    ReviewPolicy.objects.create(project=project, blind=True)
    replay = make_replay(verdict="divergent", project=project)
    page = login(reviewer)
    page.goto("/")
    expect(page.locator("#queue-rows .hidden-verdict")).to_have_count(1)
    page.goto(f"/replays/{replay.pk}/")
    expect(page.locator("#verdict-hidden")).to_be_visible()
    expect(page.locator(".replay-head")).not_to_contain_text("fails the tests")
    page.locator("#blind-verdict").select_option("divergent")
    with page.expect_navigation():
        page.get_by_role("button", name="Record judgement").click()
    page.goto(f"/replays/{replay.pk}/")
    expect(page.locator("#automated-verdict")).to_have_text("Divergent")
    assert Review.objects.get().decision == "confirm"


def test_a_blind_judgement_is_recorded_from_the_keyboard(login, reviewer):
    project = make_project()
    ReviewPolicy.objects.create(project=project, blind=True)
    replay = make_replay(verdict="divergent", project=project)
    page = login(reviewer)
    page.goto(f"/replays/{replay.pk}/")
    hint = page.locator("p.hint")
    expect(hint).to_contain_text("1\N{EN DASH}4 your verdict · Enter record it")
    expect(hint).not_to_contain_text("confirm")
    said = page.locator("#blind-preview")

    # Confirm and overturn are no keys here, and say so in one line.
    page.keyboard.press("c")
    expect(said).to_have_text(
        "Blind review: no confirm or overturn here. "
        "Press 1\N{EN DASH}4 to choose your verdict, then Enter to record it."
    )
    page.keyboard.press("o")
    expect(said).to_contain_text("no confirm or overturn here")
    page.keyboard.press("?")
    keys = page.locator("#keys-help")
    expect(keys).to_contain_text("Choose your verdict: 1 identical")
    expect(keys).not_to_contain_text("Confirm the verdict")
    page.keyboard.press("Escape")
    # The keys go to the page again once the help has closed.
    expect(keys).to_be_hidden()

    # 3 chooses divergent, Enter records it: the verdict shows.
    page.keyboard.press("3")
    expect(page.locator("#blind-verdict")).to_have_value("divergent")
    expect(said).to_have_text(
        "Your verdict: divergent. Enter records it, Esc clears it."
    )
    page.keyboard.press("Enter")
    expect(page.locator("#queue-rows")).to_contain_text("Nothing awaits review")
    page.goto(f"/replays/{replay.pk}/")
    expect(page.locator("#automated-verdict")).to_have_text("Divergent")
    review = Review.objects.get()
    assert (review.decision, review.reviewer) == ("confirm", reviewer)


def test_search_finds_a_replay_by_comment_text(login, reviewer):
    target = make_replay(title="Round invoice totals")
    make_replay(title="Something else")
    Comment.objects.create(
        replay=target,
        author=reviewer,
        target="dod",
        path="src/app.py",
        side="new",
        line_start=2,
        line_end=2,
        body="currency rounding is off",
    )
    page = login(reviewer)
    page.goto("/")
    page.get_by_role("searchbox", name="Search").fill("rounding")
    page.get_by_role("searchbox", name="Search").press("Enter")
    rows = page.locator("#search-rows tr.row")
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("Round invoice totals")
    expect(rows).to_contain_text("1 unresolved")


def test_an_admin_reassigns_a_held_replay_and_the_new_holder_is_told(
    login, reviewer, sam, admin_user
):
    replay = make_replay()
    claim_take(replay=replay, reviewer=reviewer)
    admin = login(admin_user)
    admin.goto(f"/replays/{replay.pk}/")
    admin.locator("#assign-to").select_option("sam")
    admin.get_by_role("button", name="Assign").click()
    expect(admin.locator("#held-by")).to_contain_text("sam holds this")
    assert Notice.objects.get(user=sam).kind == "assigned"

    page = login(sam)
    # The queue shows sam their share, like an annotation queue, and whose
    # each item is.
    other = make_replay(title="Nobody's yet")
    page.goto("/")
    mine = page.locator("#assigned-to-me")
    expect(mine).to_have_text("Assigned to me: 1")
    expect(
        page.locator(f'#queue-rows tr.row:has(a[href="/replays/{replay.pk}/"])')
    ).to_contain_text("you · ")
    mine.click()
    page.wait_for_url("**assigned=me**")
    rows = page.locator("#queue-rows tr.row")
    expect(rows).to_have_count(1)
    expect(rows).not_to_contain_text("Nobody's yet")
    page.select_option("select[name=assigned]", "nobody")
    page.wait_for_url("**assigned=nobody**")
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text(f"#{other.pk}")
    page.goto("/inbox/")
    expect(page.locator("#notices")).to_contain_text(f"assigned replay {replay.pk}")
    page.goto(f"/replays/{replay.pk}/")
    page.get_by_role("button", name="Release").click()
    expect(page.locator(".held")).to_have_count(0)
    assert not Claim.objects.exists()


def test_bulk_confirm_shows_the_count_then_confirms_each(login, reviewer):
    for n in range(4):
        make_replay(verdict="identical", queued=False, title=f"Same {n}")
    make_replay(verdict="divergent")
    page = login(reviewer)
    page.goto("/bulk-confirm/")
    page.locator("select[name=verdict]").select_option("identical")
    page.get_by_role("button", name="Count").click()
    expect(page.locator("#bulk-count")).to_have_text("4")
    page.get_by_role("button", name="Confirm 4").click()
    # The browser asks for the explicit yes first.
    assert not Review.objects.exists()
    page.locator("#bulk-sure").check()
    page.get_by_role("button", name="Confirm 4").click()
    expect(page.locator(".messages")).to_contain_text("Confirmed 4 replays.")
    expect(page.locator("#bulk-count")).to_have_text("No undecided replay matches.")
    assert Review.objects.filter(decision="confirm").count() == 4
    page.goto("/done/")
    expect(page.locator("#done-rows tr.row")).to_have_count(4)
    expect(page.get_by_role("heading", level=1)).to_have_text("My decisions")
    assert re.search(r"bulk confirm", page.content())
