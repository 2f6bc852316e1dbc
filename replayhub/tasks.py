"""Celery tasks: thin adapters that take ids, re-read rows and call services."""

import socket

from celery import shared_task
from django.utils import timezone

from .models import WorkerCheck


@shared_task
def answer_worker_check(check_id: int) -> None:
    # Conditional UPDATE: a redelivered message leaves the first answer alone.
    WorkerCheck.objects.filter(pk=check_id, answered_at__isnull=True).update(
        answered_at=timezone.now(), worker=socket.gethostname()
    )
