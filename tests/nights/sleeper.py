"""A task that holds a worker's pool for a while, for a worker started with
``spawn_worker(..., include="tests.nights.sleeper")``."""

from __future__ import annotations

import time

from celery import shared_task


@shared_task(name="tests.nights.sleep")
def sleep(seconds: float) -> None:
    time.sleep(seconds)
