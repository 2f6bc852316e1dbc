"""The question a pipeline asks: did the agent's change at this commit reproduce?

:func:`commit_prefix` reads the commit the URL names (pure);
:func:`latest_replays` finds the runs whose original is that commit and each
one's latest finished replay; :func:`run_gate` and :func:`overall` are the
rule, pure: a run whose settled verdict (the reviewer's when a standing
decision overturned it, else the automated one) is identical or equivalent
reproduced, divergent did not, and anything else -- inconclusive, no
finished replay yet, a verdict the asker may not see -- is unknown.

``Run.original_commit`` has no index of its own: a question scans the runs
(of the token's project, for a token). That is milliseconds for the tables
ReplayHub holds today; an index is the fix when it is not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery

from replayhub.models import Project, Replay, ReplayStatus, Run
from replayhub.verdicts import Verdict

# At most this many runs are answered for one commit, newest first.
MAX_RUNS = 50

REPRODUCED = "reproduced"
DIVERGENT = "divergent"
UNKNOWN = "unknown"

_PREFIX = re.compile(r"[0-9a-f]{7,64}")


class Ambiguous(Exception):
    """A prefix names more than one commit."""


@dataclass(frozen=True)
class Answer:
    """One run's part of the answer."""

    run: Run
    replay: Replay | None
    # The standing reviewer's decision and the verdict it names, if any.
    decision: str | None
    verdict_after: str | None
    # Blind review keeps the verdict from the asker.
    hidden: bool

    @property
    def settled(self) -> str | None:
        if self.replay is None or self.hidden:
            return None
        if self.decision == "overturn" and self.verdict_after:
            return self.verdict_after
        return self.replay.verdict or None


def commit_prefix(text: str) -> str:
    """The commit (7 to 64 hex digits) the URL names, lowercased;
    ValueError with a one-line message otherwise."""
    sha = text.strip().lower()
    if not _PREFIX.fullmatch(sha):
        raise ValueError(
            "the commit must be 7 to 64 hexadecimal digits (a sha or a prefix of one)"
        )
    return sha


def runs_of_commit(sha: str, *, project: Project | None) -> list[Run]:
    """The runs whose original commit is ``sha`` or begins with it (of
    ``project`` only, when given), newest first; Ambiguous when a prefix
    names two commits."""
    runs = Run.objects.select_related("project").filter(original_commit__startswith=sha)
    if project is not None:
        runs = runs.filter(project=project)
    commits = runs.order_by().values_list("original_commit", flat=True).distinct()
    if len(commits[:2]) > 1:
        raise Ambiguous(
            f"the prefix {sha} names more than one commit: send more of its digits"
        )
    return list(runs.order_by("-imported_at", "-id")[:MAX_RUNS])


def latest_replays(
    runs: list[Run], *, settle: Callable[[QuerySet[Replay]], QuerySet[Replay]]
) -> dict[int, Replay]:
    """Each run's latest finished replay, by run id, annotated by ``settle``
    (``human_decision``, ``human_verdict``)."""
    latest = (
        Replay.objects.filter(run=OuterRef("pk"), status=ReplayStatus.FINISHED)
        .order_by("-finished_at", "-id")
        .values("pk")[:1]
    )
    ids = (
        Run.objects.filter(pk__in=[run.pk for run in runs])
        .annotate(latest=Subquery(latest))
        .exclude(latest=None)
        .values_list("latest", flat=True)
    )
    replays = settle(Replay.objects.filter(pk__in=list(ids)))
    return {replay.run_id: replay for replay in replays}


def answers(
    runs: Iterable[Run], replays: dict[int, Replay], hidden: set[int]
) -> list[Answer]:
    found = []
    for run in runs:
        replay = replays.get(run.pk)
        found.append(
            Answer(
                run=run,
                replay=replay,
                decision=getattr(replay, "human_decision", None),
                verdict_after=getattr(replay, "human_verdict", None),
                hidden=replay is not None and replay.pk in hidden,
            )
        )
    return found


def run_gate(settled: str | None) -> str:
    """What one run's settled verdict tells a pipeline."""
    if settled in (Verdict.IDENTICAL, Verdict.EQUIVALENT):
        return REPRODUCED
    if settled == Verdict.DIVERGENT:
        return DIVERGENT
    return UNKNOWN


def overall(gates: Iterable[str]) -> str:
    """The commit's answer: divergent if any run diverged, reproduced if every
    run reproduced, unknown otherwise (and for no runs at all)."""
    seen = list(gates)
    if DIVERGENT in seen:
        return DIVERGENT
    if seen and all(gate == REPRODUCED for gate in seen):
        return REPRODUCED
    return UNKNOWN


def answer_json(answer: Answer, links: dict[str, Any]) -> dict[str, Any]:
    replay = answer.replay
    shown = replay is not None and not answer.hidden
    return {
        "project": answer.run.project.slug,
        "run": answer.run.pk,
        "external_id": answer.run.external_id,
        "original_commit": answer.run.original_commit,
        "replay": replay.pk if replay is not None else None,
        "verdict": replay.verdict if shown and replay else None,
        "reason_code": (replay.reason_code or None) if shown and replay else None,
        "reviewed_verdict": answer.verdict_after
        if shown and answer.decision == "overturn"
        else None,
        "settled_verdict": answer.settled,
        "run_gate": run_gate(answer.settled),
        "blind": answer.hidden,
        **links,
    }
