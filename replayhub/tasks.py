"""Celery tasks: thin adapters that take ids, re-read rows and call services."""

from __future__ import annotations

import socket
from datetime import timedelta
from pathlib import Path

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_ready
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from replayhub import services
from replayhub.celery import Task
from replayhub.health import describe_sandbox
from replayhub.ingest import preflight
from replayhub.ingest.services import (
    follow_claimed,
    follow_due,
    import_job_requeue_stale,
    import_job_run,
)
from replayhub.models import WorkerCheck
from replayhub.outbound.services import (
    ATTEMPT_SECONDS,
    delivery_cut,
    delivery_send,
    delivery_sweep,
)
from replayhub.replay import sweep
from replayhub.replay.services import host_declines, host_restarted
from replayhub.texttier.services import (
    suite_dispatch,
    text_replay_execute,
    text_replay_reap_stale,
    text_replay_requeue_stale,
)


@shared_task(name=Task.ANSWER_WORKER_CHECK)
def answer_worker_check(check_id: int) -> None:
    # Conditional UPDATE: a redelivered message leaves the first answer alone.
    WorkerCheck.objects.filter(pk=check_id, answered_at__isnull=True).update(
        answered_at=timezone.now(),
        worker=socket.gethostname(),
        sandbox=describe_sandbox()[:300],
    )


@worker_ready.connect
def sweep_leftovers(**_: object) -> None:
    """A worker starting on a host removes what dead workers left there (and
    keeps doing so while it runs), and claims replays again if its host had
    stopped."""
    work_dir = Path(settings.REPLAYHUB_WORK_DIR)
    sweep.sweep_every(work_dir, settings.REPLAYHUB_SWEEP_SECONDS)
    try:
        host_restarted()
        sweep.sweep(work_dir)
    except (OperationalError, InterfaceError):
        # The database is out of reach: the periodic sweep comes later.
        return


# The errors a task is retried on: the database or the broker out of reach
# for a moment (a restart, a failover, a dropped connection). Anything else is
# a bug or a verdict, never retried blindly. Without the retry Celery acks a
# task that raises, and a queued replay waits for the sweep with no message.
TRANSIENT = (OperationalError, InterfaceError, BrokerError)
RETRIED = {
    "autoretry_for": TRANSIENT,
    "retry_backoff": 2,  # 2, 4, 8 … seconds,
    "retry_backoff_max": 60,  # at most a minute apart,
    "retry_jitter": True,  # spread so that workers do not all return at once,
    # about 20 minutes in all; after that the sweep sends the replay again.
    "max_retries": 25,
}


@shared_task(name=Task.RUN_REPLAY, bind=True, **RETRIED)
def run_replay(self, replay_id: int) -> None:
    # A host short of disk, or stopped, sends the replay back for another.
    if host_declines(replay_id=replay_id, worker=self.request.hostname or ""):
        return
    # Safe to deliver twice: only a queued replay can be claimed. The lease is
    # named for the message, so that its retries (the database away) know
    # the replay their first try claimed.
    owner = f"{socket.gethostname()}:{self.request.id}" if self.request.id else None
    services.replay_execute(replay_id=replay_id, owner=owner)


@shared_task(name=Task.REAP_EXPIRED_LEASES)
def reap_expired_leases() -> None:
    # First, so that /healthz sees the beat alive even when a step below fails.
    services.beat_heartbeat()
    services.replay_reap_expired()
    services.replay_requeue_orphaned(
        older_than=timedelta(seconds=settings.REPLAYHUB_ORPHAN_AFTER_SECONDS)
    )
    services.replay_requeue_stale(
        older_than=timedelta(seconds=settings.REPLAYHUB_REQUEUE_AFTER_SECONDS)
    )
    import_job_requeue_stale()
    text_replay_reap_stale()
    text_replay_requeue_stale(
        older_than=timedelta(seconds=settings.REPLAYHUB_REQUEUE_AFTER_SECONDS)
    )


@shared_task(name=Task.NIGHTLY_TICK)
def nightly_tick() -> None:
    services.nights_tick()


@shared_task(name=Task.PREFLIGHT_PENDING)
def preflight_pending(project_id: int) -> None:
    # Idempotent: only runs still pending are looked at.
    preflight.preflight_pending(project_ids=[project_id])


@shared_task(name=Task.DISPATCH_NIGHT, **RETRIED)
def dispatch_night(night_id: int) -> None:
    """Send every queued replay a night admitted to the replay queue."""
    from replayhub.models import Replay, ReplayStatus

    ids = Replay.objects.filter(
        night_id=night_id, status=ReplayStatus.QUEUED
    ).values_list("pk", flat=True)
    with run_replay.app.producer_or_acquire() as producer:
        for replay_id in ids.iterator(chunk_size=2000):
            # A duplicate message is harmless: only a queued replay is claimed.
            run_replay.apply_async((replay_id,), producer=producer)


@shared_task(name=Task.IMPORT_UPLOAD)
def import_upload(job_id: int) -> None:
    # Safe to deliver twice: a finished job is left alone, and importing the
    # same file again stores nothing twice.
    import_job_run(job_id=job_id)


@shared_task(name=Task.RUN_TEXT_REPLAY)
def run_text_replay(text_replay_id: int) -> None:
    # Safe to deliver twice: only a queued text replay can be claimed.
    text_replay_execute(text_replay_id=text_replay_id)


@shared_task(name=Task.RUN_TEXT_SUITE)
def run_text_suite(suite_id: int) -> None:
    # Safe to deliver twice: the suite's runs are selected once, and only a
    # queued text replay is claimed.
    suite_dispatch(suite_id=suite_id)


@shared_task(name=Task.FOLLOW_ROLLOUTS)
def follow_rollouts() -> None:
    follow_due()


@shared_task(name=Task.FOLLOW_SOURCE)
def follow_source(source_id: int) -> None:
    # Safe to deliver twice: a pass is claimed, and offsets only move forward
    # from the value a pass read.
    follow_claimed(source_id=source_id)


@shared_task(name=Task.DISPATCH_TEXT_NIGHT, **RETRIED)
def dispatch_text_night(night_id: int) -> None:
    """Send every queued text replay a night admitted to the workers."""
    from replayhub.models import TextReplay, TextStatus

    ids = TextReplay.objects.filter(
        night_id=night_id, status=TextStatus.QUEUED
    ).values_list("pk", flat=True)
    for text_replay_id in ids.iterator(chunk_size=2000):
        # A duplicate message is harmless: only a queued row is claimed.
        run_text_replay.delay(text_replay_id)


@shared_task(
    name=Task.DELIVER,
    bind=True,
    max_retries=None,
    # A server that drips its answer a byte at a time, each within the socket's
    # timeout, is cut off here: the attempt ends and is tried again.
    soft_time_limit=ATTEMPT_SECONDS,
    time_limit=ATTEMPT_SECONDS + 15,
)
def deliver(self, delivery_id: int) -> None:
    """One attempt at a commit status or webhook; the delivery row bounds the
    attempts and holds the answer."""
    try:
        countdown = delivery_send(delivery_id=delivery_id)
    except SoftTimeLimitExceeded:
        countdown = delivery_cut(delivery_id=delivery_id, seconds=ATTEMPT_SECONDS)
    if countdown is not None:
        raise self.retry(countdown=countdown)


@shared_task(name=Task.DELIVER_SWEEP)
def deliver_sweep() -> None:
    delivery_sweep()
