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
        from replayhub.outbound import receivers
        from replayhub.signals import night_closed, replay_finished, review_decided

        post_delete.connect(
            project_deleted, sender=Project, dispatch_uid="replayhub.mirrors"
        )
        replay_finished.connect(
            receivers.on_replay_finished, dispatch_uid="replayhub.outbound.finished"
        )
        review_decided.connect(
            receivers.on_review_decided, dispatch_uid="replayhub.outbound.decided"
        )
        night_closed.connect(
            receivers.on_night_closed, dispatch_uid="replayhub.outbound.night"
        )
