from __future__ import annotations

from django.apps import AppConfig


class ReplayhubConfig(AppConfig):
    name = "replayhub"
    verbose_name = "ReplayHub"

    def ready(self) -> None:
        from replayhub import checks  # noqa: F401 - registers the deploy checks
