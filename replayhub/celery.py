"""The Celery application; its configuration is the ``CELERY_*`` settings."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "replayhub.settings")

app = Celery("replayhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
