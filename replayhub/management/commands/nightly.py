from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from replayhub import services
from replayhub.models import NightShare, Project
from replayhub.nights import tiers
from replayhub.nights.shares import NightReport

# The tiers a night admits before the agentic one and after it, in order.
_AT = tiers.SHARE_TIERS.index(tiers.AGENTIC)
BEFORE_AGENTIC = tiers.SHARE_TIERS[:_AT]
AFTER_AGENTIC = tiers.SHARE_TIERS[_AT + 1 :]


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
            self._result(item.slug, services.night_run(project=item, immediate=now))
            for item in projects
        ]
        if as_json:
            self.stdout.write(json.dumps(results, sort_keys=True))
            return
        for r in results:
            self._tiers(r, BEFORE_AGENTIC)
            if r["skipped"]:
                self.stdout.write(f"{r['project']}: skipped ({r['skipped']})")
            else:
                self.stdout.write(
                    f"{r['project']} night of {r['night']}: admitted {r['admitted']}, "
                    f"deferred {r['deferred']} (replays reserved "
                    f"{r['reserved_replays']}/{r['limit_replays']})"
                )
                if r["already_admitted"]:
                    self.stdout.write(
                        f"{r['project']}: already admitted tonight: "
                        f"{r['already_admitted']}"
                    )
            self._tiers(r, AFTER_AGENTIC)

    def _tiers(self, r: dict, shown: tuple[str, ...]) -> None:
        for tier in shown:
            if f"{tier}_admitted" in r:
                self.stdout.write(
                    f"{r['project']} {tier} tier: admitted "
                    f"{r[f'{tier}_admitted']}, deferred {r[f'{tier}_deferred']}"
                )

    def _result(self, slug: str, report: NightReport) -> dict:
        """The agentic tier's figures unprefixed, each other tier's that ran
        prefixed with its name (``tape_admitted``)."""
        result: dict = {
            "project": slug,
            "admitted": len(report.admitted),
            "deferred": report.deferred,
            "already_admitted": report.already,
            "skipped": report.skipped_reason,
        }
        if report.night is not None:
            share = NightShare.objects.filter(
                night=report.night, tier=tiers.AGENTIC
            ).first()
            result.update(
                night=str(report.night.date),
                reserved_replays=share.reserved_replays if share else 0,
                limit_replays=share.limit_replays if share else 0,
            )
        for tier in BEFORE_AGENTIC + AFTER_AGENTIC:
            other = report.of(tier)
            if other is not None and not other.skipped_reason:
                result[f"{tier}_admitted"] = len(other.admitted)
                result[f"{tier}_deferred"] = other.deferred
        return result
