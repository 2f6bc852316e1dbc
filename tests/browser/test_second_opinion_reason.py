"""The reviewer asked for a second opinion reads why beside "Needs second
review" at the top of the replay, whole and as typed, not only at the page's
end in the audit trail, cut."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from replayhub.models import Replay
from reviews.together import opinions
from tests.factories import make_replay, make_user

pytestmark = pytest.mark.browser

REASON = "the totals differ by a cent <b>in the ledger</b>, and I am not sure why " * 2


def test_the_second_reviewer_reads_why_a_second_opinion_was_asked(login, reviewer):
    replay = make_replay(verdict="divergent")
    opinions.second_opinion_ask(
        replay=Replay.objects.get(pk=replay.pk), user=reviewer, note=REASON[:150]
    )
    page = login(make_user("rex", "reviewer"))
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(f"/replays/{replay.pk}/")
    meta = page.locator(".replay-head .meta")
    expect(meta).to_contain_text("queued: Needs second review")
    why = meta.locator("#opinion-why")
    expect(why).to_have_text(f"(asked by {reviewer.username}: {REASON[:150]})")
    # Shown as typed, not as markup; on the first screen, not below it.
    expect(why.locator("b")).to_have_count(0)
    box = why.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 768
    assert box["x"] + box["width"] <= 1024
