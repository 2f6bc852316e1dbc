from __future__ import annotations

from django.apps import AppConfig


class ReplayhubConfig(AppConfig):
    name = "replayhub"
    verbose_name = "ReplayHub"

    def ready(self) -> None:
        from django.db.models.signals import post_delete

        from replayhub import checks  # noqa: F401 - registers the deploy checks
        from replayhub.models import Project
        from replayhub.models.projects import project_deleted

        post_delete.connect(
            project_deleted, sender=Project, dispatch_uid="replayhub.mirrors"
        )
