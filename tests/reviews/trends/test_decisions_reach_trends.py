"""A reviewer's decision reaches the trends' overturn table at once."""

from __future__ import annotations

import re

from django.urls import reverse

from reviews.services import review_decide, review_undo
from tests.factories import make_replay, make_user

TRENDS = reverse("reviews:trends")


def overturn_row(html: str, label: str) -> list[str]:
    body = re.search(r'id="table-overturns".*?<tbody>(.*?)</tbody>', html, re.S)
    for row in re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S):
        cells = [
            re.sub(r"<[^>]+>", "", c).strip()
            for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)
        ]
        if cells[0] == label:
            return cells
    raise AssertionError(label)


def test_one_confirm_and_one_overturn_show_in_the_overturn_table(
    client, lead, django_capture_on_commit_callbacks
):
    reviewer = make_user("rita", "reviewer")
    confirmed = make_replay(verdict="divergent")
    overturned = make_replay(verdict="divergent")
    with django_capture_on_commit_callbacks(execute=True):
        review_decide(replay=confirmed, reviewer=reviewer, decision="confirm")
        review = review_decide(
            replay=overturned,
            reviewer=reviewer,
            decision="overturn",
            verdict_after="inconclusive",
        )
    client.force_login(lead)

    html = client.get(TRENDS).content.decode()

    # Replays, confirmed, overturned, rate.
    assert overturn_row(html, "Divergent")[1:] == ["2", "1", "1", "50.0%"]
    assert 'id="computed-at"' in html

    with django_capture_on_commit_callbacks(execute=True):
        review_undo(review=review, reviewer=reviewer)
    html = client.get(TRENDS).content.decode()
    assert overturn_row(html, "Divergent")[2:4] == ["1", "0"]
