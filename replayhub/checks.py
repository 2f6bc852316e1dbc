"""Deploy checks of ReplayHub's own (``manage.py check --deploy``)."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, register


@register(Tags.security, deploy=True)
def secret_key_is_not_the_development_default(app_configs, **kwargs):
    if settings.SECRET_KEY == settings.DEV_SECRET_KEY:
        return [
            Error(
                "SECRET_KEY is the development default.",
                hint="Set SECRET_KEY in the environment to a long random value.",
                id="replayhub.E001",
            )
        ]
    return []
