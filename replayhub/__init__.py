"""ReplayHub: does an agent-made change reproduce?"""

from __future__ import annotations

from replayhub.celery import app as celery_app

__all__ = ("celery_app",)
