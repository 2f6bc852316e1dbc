"""What the domain announces to the apps built on it.

The domain never imports the people's side; an app that must act on a domain
event connects a receiver in its ``AppConfig.ready``.
"""

from __future__ import annotations

from django.dispatch import Signal

# A night's window ended and it was closed: no more replays are admitted.
# Sent once per night, with ``night``; the trends rollup listens.
night_closed = Signal()
