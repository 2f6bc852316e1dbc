"""Review in place, in a real Chromium: notices that clear, comments at the
line, labels from the keyboard; each under the CSP watch of test_csp."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from replayhub import roles
from reviews.models import Comment, Notice
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
