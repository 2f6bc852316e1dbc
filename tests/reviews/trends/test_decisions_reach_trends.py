"""A reviewer's decision reaches the trends' overturn table within seconds: the
request only owes its night a recount, and a worker makes it."""

from __future__ import annotations

import re
from datetime import timedelta

from django.urls import reverse

from replayhub.models import Rollup, RollupRequest
from reviews.services import review_decide, review_undo
from reviews.trends import rollups
from tests.conftest import wait_for
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


def shown(client, label: str, cells: slice, expected: list[str]):
    """Wait until the trends page's overturn row shows ``expected``."""

    def page():
        html = client.get(TRENDS).content.decode()
        try:
            return html if overturn_row(html, label)[cells] == expected else None
        except (AssertionError, AttributeError):
            return None

    return wait_for(page, timeout=60)


def test_one_confirm_and_one_overturn_show_in_the_overturn_table(
    celery_worker, transactional_db, client, lead, settings
):
    settings.REPLAYHUB_ROLLUP_DELAY_SECONDS = 0
    reviewer = make_user("rita", "reviewer")
    confirmed = make_replay(verdict="divergent")
    overturned = make_replay(verdict="divergent")
    review_decide(replay=confirmed, reviewer=reviewer, decision="confirm")
    review = review_decide(
        replay=overturned,
        reviewer=reviewer,
        decision="overturn",
        verdict_after="inconclusive",
    )
    client.force_login(lead)

    # Replays, confirmed, overturned, rate.
    html = shown(client, "Divergent", slice(1, None), ["2", "1", "1", "50.0%"])
    assert 'id="computed-at"' in html

    review_undo(review=review, reviewer=reviewer)
    shown(client, "Divergent", slice(2, 4), ["1", "0"])
    # A recount already running may have counted the undo before the undo's
    # own request is taken; that request is still taken, and changes nothing.
    assert wait_for(lambda: not RollupRequest.objects.exists(), timeout=60)
    shown(client, "Divergent", slice(2, 4), ["1", "0"])


def night(replay) -> object:
    return rollups.night_of(
        replay.finished_at,
        start_hour=rollups.DEFAULT_START_HOUR,
        tz=rollups.DEFAULT_TIMEZONE,
    )


def test_a_decision_owes_its_night_one_recount_and_counts_nothing_itself(
    db, django_capture_on_commit_callbacks
):
    reviewer = make_user("rita", "reviewer")
    first = make_replay(verdict="divergent")
    second = make_replay(verdict="divergent", project=first.project)
    day = night(first)
    assert night(second) == day

    with django_capture_on_commit_callbacks(execute=True):
        review_decide(replay=first, reviewer=reviewer, decision="confirm")
        review_decide(replay=second, reviewer=reviewer, decision="confirm")

    # Two decisions on one night: one request row, no rollup written by them.
    assert list(RollupRequest.objects.values_list("project_id", "date")) == [
        (first.project_id, day)
    ]
    assert not Rollup.objects.exists()

    # The worker's task counts both, once; delivered again, it does nothing.
    assert rollups.rollup_owed(project_id=first.project_id, day=day)
    assert not RollupRequest.objects.exists()
    row = Rollup.objects.get(project=first.project, model=first.run.model)
    assert (row.divergent, row.confirmed) == (2, {"divergent": 2})
    assert rollups.rollup_owed(project_id=first.project_id, day=day) == 0


def test_a_request_whose_task_was_lost_is_sent_again_by_the_sweep(
    db, django_capture_on_commit_callbacks
):
    reviewer = make_user("rita", "reviewer")
    replay = make_replay(verdict="divergent")
    with django_capture_on_commit_callbacks(execute=True):
        review_decide(replay=replay, reviewer=reviewer, decision="confirm")
    assert RollupRequest.objects.count() == 1

    assert rollups.rollup_sweep(older_than=timedelta(minutes=2)) == 0
    assert rollups.rollup_sweep(older_than=timedelta(0)) == 1
    # Sent once a period: the request's time moved on.
    assert rollups.rollup_sweep(older_than=timedelta(minutes=2)) == 0
