from __future__ import annotations

from django.apps import AppConfig


class ReviewsConfig(AppConfig):
    name = "reviews"
    verbose_name = "Reviews"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_migrate, pre_delete

        from replayhub import roles
        from replayhub.models import Project
        from replayhub.signals import night_closed
        from reviews.trends import alarms, rollups

        # The last app: by its post_migrate every app's permissions are made.
        post_migrate.connect(
            roles.set_groups, sender=self, dispatch_uid="reviews.roles"
        )
        night_closed.connect(
            rollups.on_night_closed, dispatch_uid="reviews.rollup_night"
        )
        # After the rollup: the night's point is read from its counts.
        night_closed.connect(
            alarms.on_night_closed, dispatch_uid="reviews.trends_signal"
        )
        pre_delete.connect(
            rollups.before_project_deleted,
            sender=Project,
            dispatch_uid="reviews.rollup_span",
        )
        post_delete.connect(
            rollups.after_project_deleted,
            sender=Project,
            dispatch_uid="reviews.rollup_totals",
        )
