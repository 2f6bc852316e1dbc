from __future__ import annotations

from datetime import date

from django.core.management.base import BaseCommand, CommandError

from replayhub.models import Project
from reviews.trends.rollups import rollup_range


def _date(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise CommandError(
            f"{value!r} is not a date: write it as YYYY-MM-DD.", returncode=2
        ) from None


class Command(BaseCommand):
    help = (
        "Recompute the nightly rollups the trends dashboard reads, for the nights "
        "from --since to --until (inclusive; default: up to today). Safe to run "
        "again: the rows of the range are replaced."
    )

    def add_arguments(self, parser):
        parser.add_argument("--since", required=True, metavar="DATE")
        parser.add_argument("--until", metavar="DATE")
        parser.add_argument("--project", metavar="SLUG")

    def handle(self, *args, since: str, until: str | None, project: str | None, **kw):
        first = _date(since)
        last = _date(until) if until else None
        if last is not None and last < first:
            raise CommandError(
                f"--until {last} is before --since {first}.", returncode=2
            )
        target = None
        if project:
            target = Project.objects.filter(slug=project).first()
            if target is None:
                raise CommandError(f"there is no project {project!r}.", returncode=2)
        written = rollup_range(since=first, until=last, project=target)
        scope = f"project {target.slug}" if target else "all projects"
        through = f" to {last}" if last else " onwards"
        self.stdout.write(
            f"Wrote {written} rollup row{'s' if written != 1 else ''} "
            f"for the nights from {first}{through} ({scope})."
        )
