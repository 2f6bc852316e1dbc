"""A replay's state machine: each transition happens once, from the state it names."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from replayhub.models import Night, Project, Replay, Run


@pytest.fixture
def run(db):
    project = Project.objects.create(slug="shop", repo_path="/srv/shop.git")
    return Run.objects.create(
        project=project, external_id="r1", original_commit="a" * 40
    )


@pytest.fixture
def replay(run):
    return Replay.objects.create(run=run, project=run.project)


def state(replay):
    replay.refresh_from_db()
    return replay.status, replay.lease_owner


def test_only_one_of_two_workers_claims_a_queued_replay(replay):
    assert Replay.objects.claim(replay.pk, owner="w1")
    assert not Replay.objects.claim(replay.pk, owner="w2")
    assert state(replay) == ("running", "w1")
    assert replay.started_at is not None and replay.lease_expires_at is not None


def test_a_lost_lease_stops_heartbeats_and_the_finish(replay):
    Replay.objects.claim(replay.pk, owner="w1")
    assert Replay.objects.heartbeat(replay.pk, owner="w1", phase="agent")
    assert not Replay.objects.heartbeat(replay.pk, owner="w2")
    assert not Replay.objects.finish(
        replay.pk, owner="w2", verdict="divergent", reason="No."
    )
    assert state(replay) == ("running", "w1")
    assert replay.phase == "agent"


def test_a_finish_ends_the_lease_and_happens_once(replay):
    Replay.objects.claim(replay.pk, owner="w1")
    done = {"verdict": "identical", "reason_code": "same_tree", "reason": "Same."}
    assert Replay.objects.finish(replay.pk, owner="w1", **done)
    assert not Replay.objects.finish(replay.pk, owner="w1", **done)
    assert state(replay) == ("finished", "")
    assert (replay.phase, replay.lease_expires_at) == ("done", None)


def test_the_reaper_loses_to_a_heartbeat_that_renewed_the_lease(replay):
    Replay.objects.claim(replay.pk, owner="w1")
    renewed_before = timezone.now()
    assert not Replay.objects.finish(
        replay.pk,
        owner="w1",
        expired_before=renewed_before,
        verdict="inconclusive",
        reason="Lost.",
    )
    assert state(replay) == ("running", "w1")


def test_a_cancel_needs_the_lease(replay):
    assert not Replay.objects.cancel(replay.pk, owner="w1")  # still queued
    Replay.objects.claim(replay.pk, owner="w1")
    assert Replay.objects.cancel(replay.pk, owner="w1")
    assert state(replay) == ("cancelled", "")
    assert replay.verdict == ""


def test_a_queued_replay_is_sent_again_once_per_period(replay):
    now = timezone.now()
    Replay.objects.filter(pk=replay.pk).update(enqueued_at=now - timedelta(hours=1))
    before = now - timedelta(minutes=10)
    assert Replay.objects.requeue(replay.pk, sent_before=before, now=now)
    assert not Replay.objects.requeue(replay.pk, sent_before=before, now=now)
    Replay.objects.claim(replay.pk, owner="w1")
    later = now + timedelta(hours=1)
    assert not Replay.objects.requeue(replay.pk, sent_before=later, now=later)


def test_a_replay_is_settled_once_and_leaves_the_review_queue_once(replay):
    night = Night.objects.create(
        project=replay.project,
        date=timezone.now().date(),
        window_start=timezone.now(),
        window_end=timezone.now() + timedelta(hours=5),
        limit_replays=1,
        limit_sandbox_seconds=1,
        limit_tokens=1,
        limit_cost_usd=Decimal(1),
    )
    assert Replay.objects.settle(replay.pk, night_id=night.pk)
    assert not Replay.objects.settle(replay.pk, night_id=night.pk)
    Replay.objects.filter(pk=replay.pk).update(review_band=1)
    assert Replay.objects.leave_review_queue(replay.pk)
    assert not Replay.objects.leave_review_queue(replay.pk)


def test_rows_queued_in_sql_match_rows_the_orm_creates(run):
    """Fails when a field is added that the bulk admission does not fill alike."""
    second = Run.objects.create(
        project=run.project, external_id="r2", original_commit="b" * 40
    )
    Replay.objects.create(run=second, project=second.project)  # attempt 1 exists
    now = timezone.now()
    values = {
        "trigger": "scheduler",
        "reservation": {"replays": 1},
        "caps": {"wall_seconds": 60, "max_tokens": None},
        "created_at": now,
        "enqueued_at": now,
    }

    Replay.objects.queue_for_runs([run.pk, second.pk], **values)

    by_orm = Replay(run=run, project=run.project, **values)
    queued = Replay.objects.get(run=run, trigger="scheduler")
    fields = [f.attname for f in Replay._meta.concrete_fields if not f.primary_key]
    assert {f: getattr(queued, f) for f in fields} == {
        f: getattr(by_orm, f) for f in fields
    }
    assert Replay.objects.get(run=second, trigger="scheduler").attempt == 2


def test_queueing_refuses_a_field_replay_does_not_have(run):
    with pytest.raises(TypeError, match="colour"):
        Replay.objects.queue_for_runs([run.pk], colour="red")
