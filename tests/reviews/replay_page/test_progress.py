"""A running replay's page shows its phase and polls until it finishes."""

from __future__ import annotations

from django.urls import reverse
from django.utils import timezone

from replayhub.models import Project, Replay, Run


def running_replay():
    project = Project.objects.create(slug="shop", repo_path="/srv/shop.git")
    run = Run.objects.create(project=project, external_id="r1", title="Fix it")
    return Replay.objects.create(
        run=run,
        project=project,
        status="running",
        phase="tests_replay",
        started_at=timezone.now(),
    )


def test_the_detail_page_of_a_running_replay_polls_its_phase(client, reviewer):
    replay = running_replay()
    client.force_login(reviewer)

    page = client.get(reverse("reviews:replay_detail", args=[replay.pk])).content
    assert b"Tests on replay" in page
    assert reverse("reviews:replay_progress", args=[replay.pk]).encode() in page

    poll = client.get(
        reverse("reviews:replay_progress", args=[replay.pk]),
        headers={"HX-Request": "true"},
    )
    assert poll.status_code == 200
    assert b"Tests on replay" in poll.content


def test_polling_stops_and_the_page_reloads_when_the_replay_finishes(client, reviewer):
    replay = running_replay()
    Replay.objects.filter(pk=replay.pk).update(
        status="finished",
        phase="done",
        verdict="identical",
        reason_code="same_tree",
        reason="Same tree.",
        finished_at=timezone.now(),
    )
    client.force_login(reviewer)

    poll = client.get(
        reverse("reviews:replay_progress", args=[replay.pk]),
        headers={"HX-Request": "true"},
    )
    assert poll.status_code == 286
    assert poll["HX-Refresh"] == "true"
