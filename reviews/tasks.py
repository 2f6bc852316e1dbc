"""Celery tasks of the people's side: thin adapters that call its services."""

from __future__ import annotations

from datetime import date, timedelta

from celery import shared_task

from replayhub.celery import Task
from reviews.trends import rollups


@shared_task(name=Task.ROLLUP_NIGHT)
def rollup_night(project_id: int, day: str) -> None:
    # Safe to deliver twice: the second finds nothing owed.
    rollups.rollup_owed(project_id=project_id, day=date.fromisoformat(day))


@shared_task(name=Task.ROLLUP_SWEEP)
def rollup_sweep() -> None:
    rollups.rollup_sweep(older_than=timedelta(minutes=2))
