from __future__ import annotations

import json
import sys
from datetime import date

from django.core.management.base import BaseCommand, CommandError

from replayhub.management.commands.replay_text import target_arg
from replayhub.models import Project
from replayhub.texttier import services
from replayhub.texttier.replay import BadTarget


def _date(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise CommandError(f"--since {value!r} is not a date (YYYY-MM-DD).") from None


def _mean(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


class Command(BaseCommand):
    help = (
        "Replay every matching run of a project as text (the text tier) on one "
        "target model, past individual failures, and print a summary."
    )

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True, metavar="SLUG")
        parser.add_argument("--model", default="", help="Only runs of this model.")
        parser.add_argument(
            "--since", metavar="DATE", help="Only runs started on or after."
        )
        parser.add_argument(
            "--include-failed",
            action="store_true",
            help="Also runs whose original failed its tests.",
        )
        parser.add_argument("--max", type=int, metavar="N", help="At most N runs.")
        parser.add_argument("--target", required=True, metavar="PROVIDER:MODEL")
        parser.add_argument("--judge", metavar="PROVIDER:MODEL")
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="Print one JSON object."
        )

    def handle(self, *args, project, model, since, include_failed, max, **options):
        found = Project.objects.filter(slug=project).first()
        if found is None:
            raise CommandError(f"there is no project {project!r}.", returncode=2)
        if max is not None and max < 1:
            raise CommandError("--max must be at least 1.", returncode=2)
        filters = services.SuiteFilters(
            model=model.strip(),
            since=_date(since) if since else None,
            include_failed=include_failed,
            max=max,
        )
        target = target_arg(options["target"])
        judge = target_arg(options["judge"]) if options["judge"] else None
        self.as_json = options["as_json"]
        self.live = not self.as_json and sys.stdout.isatty()
        try:
            suite = services.suite_run(
                project=found,
                target=target,
                judge=judge,
                filters=filters,
                progress=self._progress,
            )
        except BadTarget as error:
            raise CommandError(str(error), returncode=2) from None
        if self.live:
            self.stdout.write("")
        summary = {
            "suite": suite.pk,
            "project": found.slug,
            "target": suite.target,
            "judge": suite.judge or None,
            "total": suite.total,
            "replayed": suite.replayed,
            "skipped": suite.skipped,
            "failed": suite.failed,
            "mean_similarity": suite.mean_similarity,
            "mean_equivalence": suite.mean_equivalence,
            "scores_8_or_more": suite.scores_high,
            "scores_4_or_less": suite.scores_low,
        }
        if self.as_json:
            self.stdout.write(json.dumps(summary, sort_keys=True))
            return
        self.stdout.write(
            f"suite {suite.pk} on {suite.target}: {suite.total} runs — "
            f"{suite.replayed} replayed, {suite.skipped} skipped, "
            f"{suite.failed} failed\n"
            f"mean similarity {_mean(suite.mean_similarity, 3)}, "
            f"mean equivalence {_mean(suite.mean_equivalence, 1)}; "
            f"scores ≥ 8: {suite.scores_high}, ≤ 4: {suite.scores_low}\n"
            "(text tier: another model's answers, not reproductions)"
        )

    def _progress(self, done, total, run, skipped, row) -> None:
        if self.as_json:
            return
        if skipped:
            what = f"skipped ({skipped})"
        elif row is None or row.error:
            what = f"failed: {row.error if row else 'taken by another process'}"
        else:
            what = f"similarity {row.similarity:.3f}"
            if row.equivalence_score is not None:
                what += f", judge {row.equivalence_score}/10"
        # A record's id and a provider's error are data: no control characters
        # reach the terminal.
        line = "".join(
            c if c.isprintable() else "?"
            for c in f"[{done}/{total}] {run.external_id}: {what}"
        )
        if self.live:
            # One line rewritten in place on a terminal.
            self.stdout.write(f"\r\x1b[2K{line[:200]}", ending="")
            self.stdout.flush()
        else:
            self.stdout.write(line)
