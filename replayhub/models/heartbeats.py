"""Heartbeats: the last time a periodic job ran, read by ``/healthz``; and
the worker hosts that stopped claiming replays, read by the status page."""

from __future__ import annotations

from django.db import models


class Heartbeat(models.Model):
    """One row per periodic job (``name``), touched each time it runs.

    A row rather than a cache key: the web, the beat and the workers may run
    on different hosts and share only the database.
    """

    BEAT = "beat"
    # A worker's host that stopped claiming replays after host failures in a
    # row, ``stopped:<host name>``, at the time it stopped; removed when a
    # worker starts there again (``replay.services``).
    STOPPED = "stopped:"

    name = models.CharField(max_length=40, unique=True)
    beat_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} at {self.beat_at:%Y-%m-%d %H:%M:%S}"
