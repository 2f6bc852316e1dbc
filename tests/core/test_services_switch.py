"""CI must exercise the production stack, not the embedded defaults."""

from __future__ import annotations

from django.conf import settings
from django.db import connection

from tests.conftest import REQUIRE_SERVICES


def test_required_services_are_the_ones_in_use(db):
    if not REQUIRE_SERVICES:
        assert connection.vendor in {"sqlite", "postgresql"}
        return
    assert connection.vendor == "postgresql"
    assert settings.CELERY_BROKER_URL.startswith("redis://")
