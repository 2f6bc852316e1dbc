"""ReplayHub: does an agent-made change reproduce?"""

from .celery import app as celery_app

__all__ = ("celery_app",)
