"""Celery tasks: thin adapters that take ids, re-read rows and call services."""

import socket
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from . import nightly, services
from .models import WorkerCheck


@shared_task
def answer_worker_check(check_id: int) -> None:
    # Conditional UPDATE: a redelivered message leaves the first answer alone.
    WorkerCheck.objects.filter(pk=check_id, answered_at__isnull=True).update(
        answered_at=timezone.now(), worker=socket.gethostname()
    )


@shared_task
def run_replay(replay_id: int) -> None:
    # Safe to deliver twice: only a queued replay can be claimed.
    services.replay_execute(replay_id=replay_id)


@shared_task
def reap_expired_leases() -> None:
    services.replay_reap_expired()
    services.replay_requeue_stale(
        older_than=timedelta(seconds=settings.REPLAYHUB_REQUEUE_AFTER_SECONDS)
    )


@shared_task
def nightly_tick() -> None:
    nightly.tick()


@shared_task
def preflight_pending(project_id: int) -> None:
    # Idempotent: only runs still pending are looked at.
    from .ingest.preflight import preflight_pending as run_preflight

    run_preflight(project_ids=[project_id])
