"""The queue's "my progress": decisions today and on the latest night, per
project, the viewer's own and standing."""

from __future__ import annotations

from datetime import date, timedelta

from django.test import Client
from django.urls import reverse
from django.utils import timezone

from replayhub.models import Night, Replay
from reviews.models import Review
from reviews.queue_reads import my_progress
from reviews.services import review_decide
from tests.factories import make_project, make_replay


def test_progress_counts_today_and_the_latest_night_per_project(reviewer, lead):
    shop, docs = make_project("shop"), make_project("docs")
    now = timezone.now()
    night = Night.objects.create(
        project=shop,
        date=date.today(),
        window_start=now - timedelta(hours=8),
        window_end=now - timedelta(hours=3),
    )
    tonight = make_replay(verdict="divergent", project=shop)
    Replay.objects.filter(pk=tonight.pk).update(night=night)
    for replay in (tonight, make_replay(verdict="divergent", project=docs)):
        review_decide(replay=replay, reviewer=reviewer, decision="confirm")
    taken_back = make_replay(verdict="divergent", project=docs)
    review = review_decide(replay=taken_back, reviewer=reviewer, decision="confirm")
    Review.objects.filter(pk=review.pk).update(undone_at=now)
    yesterday = make_replay(verdict="divergent", project=docs)
    old = review_decide(replay=yesterday, reviewer=reviewer, decision="confirm")
    Review.objects.filter(pk=old.pk).update(created_at=now - timedelta(days=1, hours=1))

    assert my_progress(reviewer, now) == [
        {"project": "docs", "today": 1, "night": 0},
        {"project": "shop", "today": 1, "night": 1},
    ]
    assert my_progress(lead, now) == []


def test_the_queue_shows_my_progress(reviewer):
    replay = make_replay(verdict="divergent")
    review_decide(replay=replay, reviewer=reviewer, decision="confirm")
    client = Client()
    client.force_login(reviewer)

    page = client.get(reverse("reviews:queue")).content.decode()

    assert 'id="my-progress"' in page and "shop: 1 today · 0 this night" in page
