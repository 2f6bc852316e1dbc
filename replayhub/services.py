"""Workflows across models, or that enqueue work: keyword-only functions."""

from __future__ import annotations

from .models import WorkerCheck


def worker_check_request(*, user) -> WorkerCheck:
    from . import tasks

    check = WorkerCheck.objects.create(requested_by=user)
    tasks.answer_worker_check.delay_on_commit(check.pk)
    return check
