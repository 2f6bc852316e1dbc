from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from replayhub import services
from replayhub.models import Run, RunSource, Seed, Tier, Trigger
from replayhub.replay import tapes


class Command(BaseCommand):
    help = (
        "Replay one recorded run: queue it for a worker (default) or, with --sync, "
        "run it here (still sandboxed) and print the verdict."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id", nargs="?", type=int)
        parser.add_argument("--project", metavar="SLUG")
        parser.add_argument("--external-id", metavar="ID")
        parser.add_argument(
            "--seed",
            type=int,
            metavar="N",
            help="A rollout's seed to replay, numbered from 1 (default: the first).",
        )
        parser.add_argument(
            "--tape",
            action="store_true",
            help="Serve the agent the original's own model answers from the run's "
            "tape (no model cost); the first request that differs is named.",
        )
        parser.add_argument("--sync", action="store_true", help="Run in this process.")
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="Print one JSON object."
        )

    def handle(
        self, *args, run_id, project, external_id, seed, tape, sync, as_json, **options
    ):
        run = self._find_run(run_id, project, external_id)
        chosen = self._find_seed(run, seed)
        tier = Tier.TAPE if tape else Tier.AGENTIC
        if tape and (chosen is not None or not tapes.has_tape(run)):
            raise CommandError(
                f"{run} has no tape: its record carries none and no replay "
                "of it recorded one."
            )
        if not sync:
            replay = services.replay_request(
                run=run, trigger=Trigger.COMMAND, seed=chosen, tier=tier
            )
            self._print(
                {"replay": replay.pk, "status": replay.status},
                as_json,
                f"queued replay {replay.pk} of {run}",
            )
            return
        replay = services.replay_create(
            run=run, trigger=Trigger.COMMAND, seed=chosen, tier=tier
        )
        report = services.replay_execute(replay_id=replay.pk)
        if report is None:
            raise CommandError(f"replay {replay.pk} was taken over; see its page.")
        summary = {"replay": replay.pk, **report.summary()}
        self._print(
            summary,
            as_json,
            f"replay {replay.pk}: {summary['verdict']} "
            f"({summary['reason_code']}) — {summary['reason']}",
        )

    def _print(self, data, as_json, text):
        self.stdout.write(
            json.dumps(data, default=str, sort_keys=True) if as_json else text
        )

    def _find_seed(self, run: Run, number: int | None) -> Seed | None:
        if run.source != RunSource.ROLLOUT:
            if number is not None:
                raise CommandError(f"{run} is not a rollout; it has no seeds.")
            return None
        seeds = run.seeds.order_by("number")
        if number is None:
            seed = seeds.first()
            if seed is None:
                raise CommandError(f"rollout {run.external_id!r} has no seeds.")
            return seed
        seed = seeds.filter(number=number).first()
        if seed is None:
            count = seeds.count()
            raise CommandError(
                f"rollout {run.external_id!r} has no seed {number} "
                f"(its seeds are numbered 1 to {count})."
                if count
                else f"rollout {run.external_id!r} has no seeds."
            )
        return seed

    def _find_run(self, run_id, project, external_id) -> Run:
        if run_id is not None:
            if project or external_id:
                raise CommandError("give a run id, or --project with --external-id.")
            run = Run.objects.filter(pk=run_id).select_related("project").first()
            if run is None:
                raise CommandError(f"there is no run {run_id}.")
            return run
        if not (project and external_id):
            raise CommandError("give a run id, or --project with --external-id.")
        run = (
            Run.objects.filter(project__slug=project, external_id=external_id)
            .select_related("project")
            .first()
        )
        if run is None:
            raise CommandError(f"project {project!r} has no run {external_id!r}.")
        return run
