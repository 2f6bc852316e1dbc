"""Heartbeats: the last time a periodic job ran, read by ``/healthz``."""

from __future__ import annotations

from django.db import models


class Heartbeat(models.Model):
    """One row per periodic job (``name``), touched each time it runs.

    A row rather than a cache key: the web, the beat and the workers may run
    on different hosts and share only the database.
    """

    BEAT = "beat"

    name = models.CharField(max_length=40, unique=True)
    beat_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} at {self.beat_at:%Y-%m-%d %H:%M:%S}"
