"""The Celery application; its configuration is the ``CELERY_*`` settings.

Work is sent to the workers by task name (:class:`Task`), never by importing
``replayhub.tasks``: the tasks call the services, and the services enqueue
without importing the tasks back, so no import cycle runs through them.
"""

from __future__ import annotations

import os
from enum import StrEnum
from functools import partial

from celery import Celery
from django.db import transaction

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "replayhub.settings")

app = Celery("replayhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


class Task(StrEnum):
    """Every task's name: ``replayhub.tasks`` and ``reviews.tasks`` register
    each under its name here, and the settings route and schedule them by the
    same names."""

    ANSWER_WORKER_CHECK = "replayhub.tasks.answer_worker_check"
    RUN_REPLAY = "replayhub.tasks.run_replay"
    REAP_EXPIRED_LEASES = "replayhub.tasks.reap_expired_leases"
    NIGHTLY_TICK = "replayhub.tasks.nightly_tick"
    PREFLIGHT_PENDING = "replayhub.tasks.preflight_pending"
    DISPATCH_NIGHT = "replayhub.tasks.dispatch_night"
    IMPORT_UPLOAD = "replayhub.tasks.import_upload"
    RUN_TEXT_REPLAY = "replayhub.tasks.run_text_replay"
    RUN_TEXT_SUITE = "replayhub.tasks.run_text_suite"
    FOLLOW_ROLLOUTS = "replayhub.tasks.follow_rollouts"
    FOLLOW_SOURCE = "replayhub.tasks.follow_source"
    DISPATCH_TEXT_NIGHT = "replayhub.tasks.dispatch_text_night"
    DELIVER = "replayhub.tasks.deliver"
    DELIVER_SWEEP = "replayhub.tasks.deliver_sweep"
    ROLLUP_NIGHT = "reviews.tasks.rollup_night"
    ROLLUP_SWEEP = "reviews.tasks.rollup_sweep"


def enqueue(
    task: Task, *args: object, on_commit: bool = True, countdown: float = 0
) -> None:
    """Send ``task`` with ``args`` to the workers, to start ``countdown``
    seconds from now; by default once the current transaction commits (at
    once outside one), so a worker never reads a row before it is there."""
    send = partial(app.send_task, task.value, args=args, countdown=countdown or None)
    if on_commit:
        transaction.on_commit(send)
    else:
        send()


# The queue run_replay is routed to (CELERY_TASK_ROUTES).
REPLAY_QUEUE = "replay"


def queue_length(queue: str) -> int:
    """How many messages wait in the broker's ``queue``, not counting those a
    worker has already taken. Raises the broker's error when it does not
    answer.

    kombu's in-process transports (Redis, the filesystem) count what they
    hold on a declare: the Redis lists of the queue's priorities, or the
    queue's message files.
    """
    with app.connection_for_read() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)
        return conn.default_channel.queue_declare(queue=queue, passive=False)[1]
