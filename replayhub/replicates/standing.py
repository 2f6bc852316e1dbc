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
from replayhub.replicates.stopping import ReplicatePolicy, Standing, decide
from replayhub.verdicts import Verdict

SUCCESSES = (Verdict.IDENTICAL, Verdict.EQUIVALENT)
# The tiers whose replays are samples of a run: live, and from a tape.
SAMPLED = (Tier.AGENTIC, Tier.TAPE)


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
    one query. A pair with no finished replay is absent."""
    rows = (
        Replay.objects.filter(
            run_id__in=list(run_ids), status=ReplayStatus.FINISHED, tier__in=SAMPLED
        )
        .order_by()
        .values("run_id", "tier")
        .annotate(**COUNTED)
    )
    return {(row.pop("run_id"), row.pop("tier")): Counts(**row) for row in rows}


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
    """The run's sampled replays (finished or in flight, oldest first), their
    counts per tier and, under ``policy``, the run's standing."""
    counts = counts_by_run([run.pk])
    live = counts.get((run.pk, Tier.AGENTIC), Counts())
    replays = list(
        Replay.objects.filter(run=run, tier__in=SAMPLED)
        .exclude(status=ReplayStatus.CANCELLED)
        .only("id", "tier", "status", "verdict", "replicate", "created_at")
        .order_by("created_at", "id")
    )
    return RunReplicates(
        live=live,
        tape=counts.get((run.pk, Tier.TAPE), Counts()),
        standing=standing_of(policy, live) if policy else None,
        replays=replays,
    )
