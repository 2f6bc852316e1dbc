"""The workers' Celery consumer (``CELERY_WORKER_CONSUMER``): Celery's own,
kept running when its broker goes away while it holds unacknowledged
messages. Only a worker imports it.

Celery 5.7 releases a lost connection's resources and then closes it; closing
its channel tries to give the channel's unacknowledged messages back through
the connection just released, and raises an AttributeError, which is no
connection error: the worker stopped for good ("Unrecoverable error") when
Redis restarted under a worker running a replay and holding another due
later (acks late; a replay tried again after a remote was out of reach is
sent with a countdown). Nothing is lost by going on: the messages stay in the
broker's unacked set, or went with a broker that restarted empty, and the
reap sends a queued replay again when its message is gone
(tests/nights/test_broker_lost.py).
"""

from __future__ import annotations

import logging

from celery.worker.consumer import Consumer as CeleryConsumer

log = logging.getLogger(__name__)


class Consumer(CeleryConsumer):
    def on_connection_error_after_connected(self, exc: Exception) -> None:
        try:
            super().on_connection_error_after_connected(exc)
        except AttributeError as error:
            log.warning("the lost broker connection did not close cleanly: %r", error)
            self.connection = None
