from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from replayhub import services
from replayhub.models import Project


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
        results = []
        for item in projects:
            report = services.night_run(project=item, immediate=now)
            result = {
                "project": item.slug,
                "admitted": len(report.admitted),
                "deferred": report.deferred,
                "skipped": report.skipped_reason,
            }
            if report.night is not None:
                night = report.night
                night.refresh_from_db()
                result.update(
                    night=str(night.date),
                    reserved_replays=night.reserved_replays,
                    limit_replays=night.limit_replays,
                )
            text = report.text
            if text is not None and not text.skipped_reason:
                result.update(
                    text_admitted=len(text.admitted), text_deferred=text.deferred
                )
            tape = report.tape
            if tape is not None and not tape.skipped_reason:
                result.update(
                    tape_admitted=len(tape.admitted), tape_deferred=tape.deferred
                )
            results.append(result)
        if as_json:
            self.stdout.write(json.dumps(results, sort_keys=True))
            return
        for r in results:
            if "tape_admitted" in r:
                self.stdout.write(
                    f"{r['project']} tape tier: admitted {r['tape_admitted']}, "
                    f"deferred {r['tape_deferred']}"
                )
            if "text_admitted" in r:
                self.stdout.write(
                    f"{r['project']} text tier: admitted {r['text_admitted']}, "
                    f"deferred {r['text_deferred']}"
                )
            if r["skipped"]:
                self.stdout.write(f"{r['project']}: skipped ({r['skipped']})")
            else:
                self.stdout.write(
                    f"{r['project']} night of {r['night']}: admitted {r['admitted']}, "
                    f"deferred {r['deferred']} (replays reserved "
                    f"{r['reserved_replays']}/{r['limit_replays']})"
                )
