from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from replayhub.management import project_options
from replayhub.models import Project
from replayhub.project_setup import ProjectInvalid
from reviews.project_services import project_update, replicates_update


class Command(BaseCommand):
    help = (
        "Change a project's settings: only the options given, with the checks "
        "project_add makes. Prints each change (time_limit_seconds: 600 -> 900); "
        "a bad value is refused in one line and nothing is changed."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug")
        project_options.add_options(parser, editing=True)

    def handle(self, *args, slug, replicates: str | None = None, **options):
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            raise CommandError(f"there is no project {slug!r}.", returncode=2)
        if replicates is not None:
            try:
                policy = project_options.replicate_policy(replicates)
            except ProjectInvalid as exc:
                raise CommandError(exc.message, returncode=2) from None
            changes = replicates_update(actor=None, project=project, policy=policy)
            self._print(slug, changes)
            if not project_options.given(options):
                return
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
        self._print(slug, updated.changes)

    def _print(self, slug: str, changes: dict[str, tuple[Any, Any]]) -> None:
        if not changes:
            self.stdout.write(f"{slug}: nothing changed")
        for name, (before, after) in changes.items():
            self.stdout.write(f"{name}: {_shown(before)} -> {_shown(after)}")


def _shown(value: Any) -> str:
    """A value as the options take it: none, a number, text, or JSON for a list."""
    if value is None:
        return "none"
    if isinstance(value, str | int | float | Decimal):
        return str(value)
    return json.dumps(value)
