from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from replayhub.management import project_options
from replayhub.models import Project
from replayhub.project_setup import ProjectInvalid
from reviews.project_services import project_update


class Command(BaseCommand):
    help = (
        "Change a project's settings: only the options given, with the checks "
        "project_add makes. Prints each change (time_limit_seconds: 600 -> 900); "
        "a bad value is refused in one line and nothing is changed."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug")
        project_options.add_options(parser, editing=True)

    def handle(self, *args, slug, **options):
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            raise CommandError(f"there is no project {slug!r}.", returncode=2)
        if not project_options.given(options):
            raise CommandError(
                "give at least one option to change (see --help).", returncode=2
            )
        try:
            fields, providers = project_options.project_values(
                slug=slug, options=options, project=project
            )
            updated = project_update(
                actor=None, project=project, fields=fields, providers=providers
            )
        except ProjectInvalid as exc:
            raise CommandError(exc.message, returncode=2) from None
        if not updated.changes:
            self.stdout.write(f"{slug}: nothing changed")
        for name, (before, after) in updated.changes.items():
            self.stdout.write(f"{name}: {_shown(before)} -> {_shown(after)}")


def _shown(value: Any) -> str:
    """A value as the options take it: none, a number, text, or JSON for a list."""
    if value is None:
        return "none"
    if isinstance(value, str | int | float | Decimal):
        return str(value)
    return json.dumps(value)
