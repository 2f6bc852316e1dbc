"""A run's standing from its replays, read from the database.

The one module of the package that reads tables; the statistics it calls are
the pure modules'. Nothing is stored: a run's replays are its samples, so
its standing is computed on read, from one aggregate query per batch of runs.

- Samples are the run's finished live replays (tier agentic: the first
  replay, replicates, reviewers' reruns alike): identical and equivalent
  ones succeed, divergent ones fail, inconclusive ones are counted apart.
  They measure the model's randomness.
- A tape replay's model answers are fixed, so tape replays measure the
  environment's: a run with two or more conclusive tape replays that are not
  all identical has a nondeterministic environment or tests
  (``environment_problem``), whatever its live samples say.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count, Q

from replayhub.models import Replay, ReplayStatus, Run, Tier
from replayhub.replicates.intervals import wilson
from replayhub.replicates.rates import rate_text
from replayhub.replicates.stopping import ReplicatePolicy, Standing, decide
from replayhub.verdicts import Verdict

SUCCESSES = (Verdict.IDENTICAL, Verdict.EQUIVALENT)
# The tiers whose replays are samples of a run: live, and from a tape.
SAMPLED = (Tier.AGENTIC, Tier.TAPE)
# The most replays a run's strip lists: a run replayed every night for months
# keeps a page of its latest; the counts are always of them all.
LISTED = 60
# Runs counted per query: the parameters stay under every backend's limit.
CHUNK = 2000


@dataclass(frozen=True)
class Counts:
    """A run's finished replays of one tier, as samples."""

    successes: int = 0
    failures: int = 0
    inconclusive: int = 0
    identical: int = 0

    @property
    def samples(self) -> int:
        return self.successes + self.failures

    @property
    def replays(self) -> int:
        return self.samples + self.inconclusive


# The aggregates of ``Counts`` over a run's replays.
COUNTED = {
    "successes": Count("pk", filter=Q(verdict__in=SUCCESSES)),
    "failures": Count("pk", filter=Q(verdict=Verdict.DIVERGENT)),
    "inconclusive": Count("pk", filter=Q(verdict=Verdict.INCONCLUSIVE)),
    "identical": Count("pk", filter=Q(verdict=Verdict.IDENTICAL)),
}


def counts_by_run(run_ids: Iterable[int]) -> dict[tuple[int, str], Counts]:
    """(run, tier) -> its finished replays' counts, for the sampled tiers;
    one query per ``CHUNK`` runs. A pair with no finished replay is absent."""
    ids = list(run_ids)
    found: dict[tuple[int, str], Counts] = {}
    for start in range(0, len(ids), CHUNK):
        rows = (
            Replay.objects.filter(
                run_id__in=ids[start : start + CHUNK],
                status=ReplayStatus.FINISHED,
                tier__in=SAMPLED,
            )
            .order_by()
            .values("run_id", "tier")
            .annotate(**COUNTED)
        )
        found |= {(row.pop("run_id"), row.pop("tier")): Counts(**row) for row in rows}
    return found


def standing_of(policy: ReplicatePolicy, counts: Counts) -> Standing:
    return decide(policy, counts.successes, counts.failures, counts.inconclusive)


def environment_problem(tape: Counts) -> bool:
    """Whether a run's tape replays say its environment or tests vary: two
    or more of them concluded, and not all identical."""
    return tape.samples >= 2 and tape.identical < tape.samples


@dataclass(frozen=True)
class RunReplicates:
    """What a run's page and the API show of its samples."""

    live: Counts
    tape: Counts
    standing: Standing | None  # None without a policy
    replays: list[Replay]

    @property
    def environment_problem(self) -> bool:
        return environment_problem(self.tape)


def run_replicates(run: Run, policy: ReplicatePolicy | None) -> RunReplicates:
    """The run's latest ``LISTED`` sampled replays (finished or in flight,
    oldest first), its counts per tier (all its replays) and, under
    ``policy``, its standing."""
    counts = counts_by_run([run.pk])
    live = counts.get((run.pk, Tier.AGENTIC), Counts())
    latest = (
        Replay.objects.filter(run=run, tier__in=SAMPLED)
        .exclude(status=ReplayStatus.CANCELLED)
        .only("id", "tier", "status", "verdict", "replicate", "created_at")
        .order_by("-created_at", "-id")[:LISTED]
    )
    replays = list(reversed(latest))
    return RunReplicates(
        live=live,
        tape=counts.get((run.pk, Tier.TAPE), Counts()),
        standing=standing_of(policy, live) if policy else None,
        replays=replays,
    )


# The confidence of the interval shown for a run of a project without a
# policy (its replicates were made under one since turned off).
SHOWN_CONFIDENCE = 0.9


def as_json(found: RunReplicates, policy: ReplicatePolicy | None) -> dict:
    """The API's ``replicates`` of a run: the decision (null without a
    policy), the live samples and their interval (null before any), the
    rate as a sentence, the tape samples and whether they name an
    environment problem, and the sampled replays, oldest first."""
    live = found.live
    confidence = policy.confidence if policy else SHOWN_CONFIDENCE
    interval = None
    if live.samples:
        low, high = wilson(live.successes, live.samples, confidence)
        interval = [round(low, 4), round(high, 4)]
    return {
        "decision": found.standing.decision.value if found.standing else None,
        "successes": live.successes,
        "failures": live.failures,
        "inconclusive": live.inconclusive,
        "interval": interval,
        "confidence": confidence,
        "rate": rate_text(
            successes=live.successes,
            failures=live.failures,
            inconclusive=live.inconclusive,
            confidence=confidence,
        ),
        "tape": {
            "identical": found.tape.identical,
            "samples": found.tape.samples,
            "inconclusive": found.tape.inconclusive,
        },
        "environment_problem": found.environment_problem,
        "replays": [
            {
                "id": replay.pk,
                "tier": replay.tier,
                "status": replay.status,
                "verdict": replay.verdict or None,
                "replicate": replay.replicate,
            }
            for replay in found.replays
        ],
    }
