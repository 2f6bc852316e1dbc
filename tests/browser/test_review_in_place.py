"""Review in place, in a real Chromium: notices that clear, comments at the
line, labels from the keyboard; each under the CSP watch of test_csp."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from replayhub import roles
from reviews.models import Claim, Comment, Label, Notice, Review
from reviews.services import claim_take
from reviews.together import comments
from tests.browser.test_csp import Watch
from tests.factories import make_replay, make_user

pytestmark = pytest.mark.browser

MENTION = {
    "target": "dod",
    "path": "src/app.py",
    "side": "new",
    "line_start": 2,
    "line_end": 3,
    "body": "Is y right here, @sam?",
}


@pytest.fixture
def sam(db):
    return make_user("sam", roles.REVIEWER)


def test_a_notice_opens_its_thread_and_clears_with_the_badge(login, reviewer, sam):
    replay = make_replay(verdict="divergent")
    thread = comments.comment_add(replay=replay, author=reviewer, data=MENTION)
    later = make_replay()
    comments.comment_add(replay=later, author=reviewer, data=MENTION)
    page = login(sam)
    watch = Watch(page)

    watch.goto("/inbox/")
    expect(page.locator("#inbox-badge")).to_have_text("2")
    page.locator("#notices li.unread a.notice-link").last.click()

    expect(page).to_have_url(re.compile(rf"/replays/{replay.pk}/#thread-{thread.pk}$"))
    expect(page.locator(f"#thread-{thread.pk}")).to_be_in_viewport()
    expect(page.locator("#inbox-badge")).to_have_text("1")
    watch.goto("/inbox/")
    expect(page.locator("#notices li.unread")).to_have_count(1)
    # Opening the replay itself (not through the inbox) reads its notices too.
    watch.goto(f"/replays/{later.pk}/")
    expect(page.locator("#inbox-badge")).to_have_count(0)
    assert not Notice.objects.filter(read_at__isnull=True).exists()
    watch.check("after reading every notice")


def test_mark_all_read_still_clears_the_inbox(login, reviewer, sam):
    replay = make_replay(verdict="divergent")
    comments.comment_add(replay=replay, author=reviewer, data=MENTION)
    page = login(sam)
    watch = Watch(page)
    watch.goto("/inbox/")

    page.get_by_role("button", name="Mark all read").click()

    expect(page.locator("#notices li.unread")).to_have_count(0)
    expect(page.locator("#inbox-badge")).to_have_count(0)
    assert Comment.objects.count() == 1
    watch.check("after mark all read")


def test_a_comment_at_a_line_of_either_side_and_resolved_in_place(
    login, reviewer, sam, screenshot
):
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    watch = Watch(page)
    watch.goto(f"/replays/{replay.pk}/")
    page.evaluate("window.__same_page = true")

    # The original's side of the side-by-side changes, an old line.
    original = page.locator('#changes table[data-target="original"]')
    original.locator('[data-side="old"][data-line="2"]').click()
    box = original.locator("tr.comment-row")
    expect(box.locator(".anchor")).to_have_text("src/app.py (old), line 2")
    box.locator("textarea").fill("x was 1 here")
    box.get_by_role("button", name="Comment").click()
    thread = original.locator("tr.thread-row article.thread")
    expect(thread.locator(".body")).to_have_text("x was 1 here")
    expect(thread.locator("pre.excerpt")).to_have_text("x = 1")

    # The replay's side, a range; Cancel closes a box without a trace.
    replayed = page.locator('#changes table[data-target="replay"]')
    replayed.locator('[data-side="new"][data-line="1"]').click()
    expect(replayed.locator("tr.comment-row")).to_have_count(1)
    replayed.get_by_role("button", name="Cancel").click()
    expect(page.locator("tr.comment-row")).to_have_count(0)
    replayed.locator('[data-side="new"][data-line="3"]').click()
    replayed.locator('[data-side="new"][data-line="4"]').click(modifiers=["Shift"])
    replayed.locator("tr.comment-row textarea").fill("and y?")
    replayed.locator("tr.comment-row textarea").press("Control+Enter")
    expect(replayed.locator("tr.thread-row article.thread")).to_have_count(1)
    expect(page.locator("#open-threads")).to_have_text("2 unresolved comments")

    # Resolve folds the thread where it is; reopen unfolds it.
    thread.get_by_role("button", name="Resolve").click()
    expect(thread).to_have_class(re.compile(r"\bresolved\b"))
    expect(thread.locator("details")).not_to_have_attribute("open", "")
    expect(page.locator("#open-threads")).to_have_text("1 unresolved comment")
    thread.locator("summary").click()
    thread.get_by_role("button", name="Reopen").click()
    expect(thread).not_to_have_class(re.compile(r"\bresolved\b"))
    expect(page.locator("#open-threads")).to_have_text("2 unresolved comments")
    # Every step stayed on the page: no reload.
    assert page.evaluate("window.__same_page") is True
    screenshot(page, "comment-at-the-line")
    watch.check("after commenting, resolving and reopening in place")

    # After a reload the threads are drawn where they belong again.
    watch.goto(f"/replays/{replay.pk}/")
    expect(page.locator("#changes tr.thread-row article.thread")).to_have_count(2)
    expect(page.locator("#threads-placed")).to_be_visible()


def test_a_line_comment_from_the_keyboard(login, reviewer, sam):
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    page.goto(f"/replays/{replay.pk}/")
    replayed = page.locator('#changes table[data-target="replay"]')
    first = replayed.locator("[data-line][tabindex='0']")
    expect(first).to_have_count(1)
    # Tab reaches the diffs' line numbers, one stop a diff, not one a line.
    reached = None
    for _ in range(150):
        page.keyboard.press("Tab")
        reached = page.evaluate(
            "document.activeElement.closest('[data-target=replay]') "
            "&& document.activeElement.getAttribute('data-line')"
        )
        if reached:
            break
    start = first.get_attribute("data-line")
    assert reached == start
    page.keyboard.press("ArrowDown")
    focused = page.evaluate("document.activeElement.getAttribute('data-line')")
    assert focused == str(int(start) + 1)
    page.keyboard.press("Enter")
    box = replayed.locator("tr.comment-row")
    expect(box.locator(".anchor")).to_contain_text(f"line {focused}")
    box.locator("textarea").fill("from the keyboard")
    box.locator("textarea").press("Control+Enter")
    thread = replayed.locator("tr.thread-row article.thread")
    expect(thread.locator(".body")).to_have_text("from the keyboard")


def test_at_offers_reviewers_and_flags_an_unknown_name(login, reviewer, sam):
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    watch = Watch(page)
    watch.goto(f"/replays/{replay.pk}/")

    page.locator('#dod [data-side="new"][data-line="2"]').click()
    area = page.locator("#dod tr.comment-row textarea")
    expect(area).to_be_focused()
    page.keyboard.type("Ask @sa")
    offered = page.locator(".mention-list li")
    expect(offered).to_have_text(["@sam"])
    page.keyboard.press("Tab")
    expect(area).to_have_value("Ask @sam ")
    expect(page.locator(".mention-list")).to_have_count(0)

    # A name is judged once it is complete: the space after it ends it.
    page.keyboard.type("and @nobody ")
    warning = page.locator("#dod .mention-warning")
    expect(warning).to_have_text(re.compile("No reviewer is called @nobody"))
    page.keyboard.press("Control+Enter")
    page.wait_for_timeout(300)
    assert not Comment.objects.exists()

    for _ in "@nobody ":
        page.keyboard.press("Backspace")
    expect(warning).to_be_hidden()
    page.keyboard.press("Control+Enter")
    expect(page.locator("#dod article.thread")).to_have_count(1)
    # Sent: the focus is back on the line, not lost to the top of the page.
    expect(page.locator('#dod [data-side="new"][data-line="2"]')).to_be_focused()
    assert Notice.objects.get().user == sam
    watch.check("after mentioning")


def test_the_form_at_the_foot_stays_and_the_server_refuses_an_unknown_name(
    login, reviewer
):
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    watch = Watch(page)
    watch.goto(f"/replays/{replay.pk}/")
    # The browser's own check is lifted: the server must refuse by itself.
    page.evaluate(
        "document.getElementById('comment-body').removeAttribute('data-mentions')"
    )
    # A line number's box is sized for a number (it was 220 px wide).
    assert page.locator("#comment-start").bounding_box()["width"] < 120
    page.locator("#comment-path").fill("src/app.py")
    page.locator("#comment-start").fill("2")
    page.locator("#comment-body").fill("Hello @ghost")
    page.locator("#comment-form").get_by_role("button", name="Comment").click()
    # Refused beside the form, under its label, the text kept.
    expect(page.locator("#comment-errors")).to_contain_text(
        "Comment: No reviewer is called @ghost"
    )
    expect(page.locator("#comment-body")).to_have_value("Hello @ghost")
    assert not Comment.objects.exists()

    page.locator("#comment-path").fill("src/app.py")
    page.locator("#comment-start").fill("2")
    page.locator("#comment-body").fill("From the foot")
    page.locator("#comment-form").get_by_role("button", name="Comment").click()
    expect(page.locator("#dod article.thread .body")).to_have_text("From the foot")
    watch.check("after the fallback form")


def test_labels_are_set_by_their_keys_shown_beside_them_and_in_the_help(
    login, reviewer
):
    replay = make_replay(verdict="divergent")
    cause = Label.objects.create(
        project=replay.project,
        name="root cause",
        kind="category",
        categories=["harness", "agent"],
        required=True,
    )
    merge = Label.objects.create(
        project=replay.project, name="would merge", kind="yes_no", position=1
    )
    page = login(reviewer)
    watch = Watch(page)
    watch.goto(f"/replays/{replay.pk}/")
    expect(page.locator('#labels [data-label-key="a"] kbd')).to_have_text("a")
    expect(page.locator('#labels [data-label-key="s"] kbd')).to_have_text("s")
    page.keyboard.press("?")
    help_ = page.locator("#keys-help")
    expect(help_).to_contain_text("root cause: the next value (harness, agent")
    expect(help_).to_contain_text("would merge: the next value (yes, no")
    page.keyboard.press("Escape")

    page.keyboard.press("a")
    page.keyboard.press("a")
    page.keyboard.press("s")
    expect(page.locator(f"select[name=label_{cause.pk}]")).to_have_value("agent")
    expect(page.locator(f"select[name=label_{merge.pk}]")).to_have_value("yes")
    with page.expect_navigation():
        page.keyboard.press("c")
    values = dict(Review.objects.get().labels.values_list("label__name", "value"))
    assert values == {"root cause": "agent", "would merge": "yes"}
    watch.check("after labelling by key")


def test_a_claim_warns_a_minute_before_it_lapses_and_e_extends_it(login, reviewer):
    replay = make_replay(verdict="divergent")
    claim = claim_take(replay=replay, reviewer=reviewer)
    Claim.objects.filter(pk=claim.pk).update(
        expires_at=timezone.now() + timedelta(seconds=45)
    )
    page = login(reviewer)
    watch = Watch(page)
    watch.goto(f"/replays/{replay.pk}/")
    page.evaluate("window.__same_page = true")
    warning = page.locator("#claim-warning")
    expect(warning).to_contain_text(re.compile(r"lapses in 4\d s: press e"))

    page.keyboard.press("e")

    expect(warning).to_be_hidden()
    later = Claim.objects.get().expires_at
    assert later - timezone.now() > timedelta(minutes=2)
    assert page.evaluate("window.__same_page") is True
    watch.check("after extending the claim")
