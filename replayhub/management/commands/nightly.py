from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from replayhub import services
from replayhub.models import Project
from replayhub.nights.admitted import night_figures, night_lines


class Command(BaseCommand):
    help = (
        "Run a night: admit replays while the budget lasts, defer the rest. "
        "Without --now, only projects whose window is open now are run."
    )

    def add_arguments(self, parser):
        parser.add_argument("--project", metavar="SLUG")
        parser.add_argument(
            "--now", action="store_true", help="Open tonight's window now and run it."
        )
        parser.add_argument("--json", action="store_true", dest="as_json")

    def handle(self, *args, project, now, as_json: bool, **options):
        projects = Project.objects.all()
        if project:
            projects = projects.filter(slug=project)
            if not projects:
                raise CommandError(f"there is no project {project!r}.", returncode=2)
        results = [
            night_figures(item.slug, services.night_run(project=item, immediate=now))
            for item in projects
        ]
        if as_json:
            self.stdout.write(json.dumps(results, sort_keys=True))
            return
        for result in results:
            for line in night_lines(result):
                self.stdout.write(line)
