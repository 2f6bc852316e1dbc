from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from replayhub.ingest.tokens import token_issue
from replayhub.models import Project


class Command(BaseCommand):
    help = (
        "Issue an ingest token for the HTTP API of a project and print it. The "
        "token is shown only now: ReplayHub keeps nothing but its hash."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug", metavar="SLUG")
        parser.add_argument(
            "--rotate",
            action="store_true",
            help="Revoke the project's other tokens in the same step.",
        )

    def handle(self, *args, slug, rotate, **options):
        try:
            project = Project.objects.get(slug=slug)
        except Project.DoesNotExist:
            raise CommandError(f"there is no project {slug!r}.", returncode=2) from None
        row, token = token_issue(project=project, rotate=rotate)
        self.stderr.write(
            f"ingest token {row.prefix} for {project.slug}"
            + (" (the project's other tokens are revoked)" if rotate else "")
            + "; store it now, it cannot be shown again:"
        )
        # Alone on stdout, so `TOKEN=$(manage.py ingest_token shop)` works.
        self.stdout.write(token)
