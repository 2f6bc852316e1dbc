from __future__ import annotations

from django.apps import AppConfig


class ReviewsConfig(AppConfig):
    name = "reviews"
    verbose_name = "Reviews"

    def ready(self) -> None:
        from replayhub.signals import night_closed

        from .rollups import on_night_closed

        night_closed.connect(on_night_closed, dispatch_uid="reviews.rollup_night")
