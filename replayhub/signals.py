"""What the domain announces to the apps built on it.

The domain never imports the people's side; an app that must act on a domain
event connects a receiver in its ``AppConfig.ready``.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.dispatch import Signal

log = logging.getLogger(__name__)

# A night's window ended and it was closed: no more replays are admitted.
# Sent once per night, with ``night``; the trends rollup listens.
night_closed = Signal()

# A replay ended with its verdict; sent once its finish is committed, with
# ``replay_id``. Outbound deliveries (commit statuses, webhooks) listen.
replay_finished = Signal()

# A reviewer's decision on a finished replay was committed; sent with
# ``replay_id``, ``review_id``, ``decision`` and ``verdict`` (the verdict the
# decision leaves standing, "" for a rerun); ``decision`` is "undo" when the
# review was taken back, ``verdict`` then the one standing again. Sent by the
# people's side, whose decisions the domain does not import.
review_decided = Signal()


def send_after_commit(signal: Signal, sender: Any, **kwargs: Any) -> None:
    """Send ``signal`` once the current transaction commits (at once outside
    one). Every receiver runs: one that fails is logged and holds nothing."""

    def send() -> None:
        for receiver, result in signal.send_robust(sender, **kwargs):
            if isinstance(result, Exception):
                log.error(
                    "%s failed on %s",
                    getattr(receiver, "__qualname__", receiver),
                    kwargs,
                    exc_info=result,
                )

    transaction.on_commit(send)
