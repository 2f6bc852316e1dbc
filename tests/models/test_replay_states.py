"""A replay's state machine: each transition happens once, from the state it names."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from replayhub.models import Night, Project, Replay, Run
from replayhub.models.replays import lease_deadline


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


def test_a_claim_writes_the_running_state_its_lease_and_its_start(replay):
    now = timezone.now() - timedelta(minutes=3)

    assert Replay.objects.claim(replay.pk, owner="w1", now=now)

    replay.refresh_from_db()
    assert (replay.status, replay.phase, replay.lease_owner) == (
        "running",
        "provisioning",
        "w1",
    )
    assert (replay.started_at, replay.lease_expires_at) == (now, lease_deadline(now))
    assert replay.finished_at is None


def test_a_claim_takes_only_a_queued_replay_and_leaves_the_others(run):
    other = Replay.objects.create(run=run, project=run.project)
    replay = Replay.objects.create(run=run, project=run.project, attempt=2)
    Replay.objects.filter(pk=other.pk).update(status="cancelled")

    assert not Replay.objects.claim(other.pk, owner="w1")
    assert Replay.objects.claim(replay.pk, owner="w1")

    assert state(other) == ("cancelled", "")
    assert state(replay) == ("running", "w1")


@pytest.mark.django_db(transaction=True)
def test_workers_racing_for_each_replay_claim_every_one_once(require_postgres):
    """Eight workers, each replay's message delivered to two of them at once."""
    project = Project.objects.create(slug="race", repo_path="/srv/race.git")
    replays = [
        Replay.objects.create(
            run=Run.objects.create(
                project=project, external_id=f"r{n}", original_commit="a" * 40
            ),
            project=project,
        ).pk
        for n in range(40)
    ]
    barrier = threading.Barrier(8)
    won: dict[str, list[int]] = {}
    errors: list[BaseException] = []

    def worker(number: int) -> None:
        owner = f"w{number}"
        # Pairs of workers get the same replays, in opposite orders.
        mine = replays[number % 4 :: 4][:: 1 if number < 4 else -1]
        try:
            barrier.wait()
            won[owner] = [pk for pk in mine if Replay.objects.claim(pk, owner=owner)]
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    claimed = sorted(pk for pks in won.values() for pk in pks)
    assert claimed == sorted(replays)
    owners = dict(Replay.objects.values_list("pk", "lease_owner"))
    assert all(owners[pk] == owner for owner, pks in won.items() for pk in pks)


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
