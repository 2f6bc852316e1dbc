from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from replayhub.models import Run, TextTrigger
from replayhub.texttier import services
from replayhub.texttier.replay import BadTarget, Target


def target_arg(value: str) -> Target:
    try:
        return Target.parse(value)
    except BadTarget as error:
        raise CommandError(str(error), returncode=2) from None


def describe(summary: dict) -> str:
    """One line (or two) a person reads after a text replay."""
    head = f"text replay {summary['text_replay']} of run {summary['run']} on "
    head += summary["target"]
    if summary["error"]:
        line = f"{head}: failed — {summary['error']}"
        return "".join(c if c.isprintable() else "?" for c in line)
    line = f"{head}: similarity {summary['similarity']:.3f}"
    if summary["equivalence_score"] is not None:
        line += f", judge {summary['equivalence_score']}/10 — {summary['rationale']}"
    elif summary["judge_error"]:
        line += f"; judge: {summary['judge_error']}"
    tokens = summary["input_tokens"] + summary["output_tokens"]
    line += f" ({tokens} tokens, {summary['duration_ms'] / 1000:.1f} s)"
    # A provider's error and a judge's rationale are data: no control
    # characters reach the terminal.
    line = "".join(c if c.isprintable() else "?" for c in line)
    return line + "\n(text tier: another model's answer, not a reproduction)"


class Command(BaseCommand):
    help = (
        "Send a recorded run's prompt to another provider and model (the text "
        "tier), compare the answer with the original output and print the "
        "similarity (and, with --judge, the judge's 1-10 score). Runs here, "
        "with the key from the provider's environment variable."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--target", required=True, metavar="PROVIDER:MODEL")
        parser.add_argument("--judge", metavar="PROVIDER:MODEL")
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="Print one JSON object."
        )

    def handle(self, *args, run_id, target, judge, as_json, **options):
        run = Run.objects.filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"there is no run {run_id}.", returncode=2)
        try:
            row = services.text_replay_create(
                run=run,
                target=target_arg(target),
                judge=target_arg(judge) if judge else None,
                trigger=TextTrigger.COMMAND,
            )
        except BadTarget as error:
            raise CommandError(str(error), returncode=2) from None
        done = services.text_replay_execute(text_replay_id=row.pk)
        if done is None:
            raise CommandError(f"text replay {row.pk} was taken by another process.")
        summary = done.summary()
        if as_json:
            self.stdout.write(json.dumps(summary, sort_keys=True))
        else:
            self.stdout.write(describe(summary))
        if summary["error"]:
            raise SystemExit(1)
