"""Reproducibility by project, agent and model: the replicated runs' rates,
their intervals and pass^k, split by tier.

A run's replays are samples of whether it reproduces
(``replayhub.replicates``); a tape replay's measure the environment, a live
one's the model too. For each project, agent (the project's profile), model
and tier, over the runs replicated in the shown nights:

- the rate: the samples' successes over the samples, pooled over the runs,
  with Wilson's interval at ``CONFIDENCE``; inconclusive replays counted
  apart;
- pass^k for k = 1..5: the mean over the runs with at least k samples of each
  run's unbiased ``C(c, k) / C(n, k)``, so an unbiased estimate of the mean of
  ``p^k`` over those runs; none where no run has k samples.

*Departure:* unlike the rest of the dashboard this reads the replays, not the
rollups: a rate per run needs each run's counts, which no nightly row keeps.
One aggregate query over the shown nights' finished replays of runs that have
a replicate, grouped by run and tier (the ``replay_project_finished`` index
serves one project's page).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from typing import Any

from django.db.models import Exists, OuterRef
from django.utils import timezone

from replayhub.models import Replay, ReplayStatus
from replayhub.replicates.intervals import wilson
from replayhub.replicates.passk import TRIES, pass_hat_k
from replayhub.replicates.standing import COUNTED, SAMPLED
from reviews.queue_reads import model_matching
from reviews.trends.forms import TrendFilters

CONFIDENCE = 0.9
TIER_NAMES = {"agentic": "live (model)", "tape": "tape (environment)"}


@dataclass
class Group:
    """One project, agent, model and tier of replicated runs."""

    project: str
    agent: str
    model: str
    tier: str
    runs: int = 0
    successes: int = 0
    failures: int = 0
    inconclusive: int = 0
    # Per k, the runs with at least k samples and their pass^k estimates.
    estimates: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))

    @property
    def samples(self) -> int:
        return self.successes + self.failures

    @property
    def rate(self) -> float | None:
        return self.successes / self.samples if self.samples else None

    @property
    def interval(self) -> tuple[float, float] | None:
        if not self.samples:
            return None
        return wilson(self.successes, self.samples, CONFIDENCE)

    @property
    def pass_k(self) -> list[float | None]:
        """pass^1 .. pass^5; None where no run has k samples."""
        return [
            sum(found) / len(found) if (found := self.estimates.get(k)) else None
            for k in TRIES
        ]

    @property
    def tier_name(self) -> str:
        return TIER_NAMES.get(self.tier, self.tier)

    def add(self, successes: int, failures: int, inconclusive: int) -> None:
        self.runs += 1
        self.successes += successes
        self.failures += failures
        self.inconclusive += inconclusive
        for k in TRIES:
            estimate = pass_hat_k(successes + failures, successes, k)
            if estimate is not None:
                self.estimates[k].append(estimate)

    def as_json(self) -> dict[str, Any]:
        interval = self.interval
        return {
            "project": self.project,
            "agent": self.agent,
            "model": self.model,
            "tier": self.tier,
            "runs": self.runs,
            "successes": self.successes,
            "failures": self.failures,
            "inconclusive": self.inconclusive,
            "rate": self.rate,
            "interval": [round(b, 4) for b in interval] if interval else None,
            "confidence": CONFIDENCE,
            "pass_k": {
                str(k): None if v is None else round(v, 4)
                for k, v in zip(TRIES, self.pass_k, strict=True)
            },
        }


def _rows(filters: TrendFilters) -> Iterable[dict]:
    zone = timezone.get_current_timezone()
    start = datetime.combine(filters.since, time.min, tzinfo=zone)
    end = datetime.combine(filters.until + timedelta(days=1), time.min, tzinfo=zone)
    replays = Replay.objects.filter(
        status=ReplayStatus.FINISHED,
        tier__in=[filters.tier] if filters.tier in SAMPLED else SAMPLED,
        finished_at__gte=start,
        finished_at__lt=end,
    ).exclude(project_id__in=filters.hidden_project_ids)
    if filters.project_id is not None:
        replays = replays.filter(project_id=filters.project_id)
    if filters.model:
        replays = replays.filter(model_matching(filters.model))
    if filters.source:
        replays = replays.filter(run__source=filters.source)
    replicated = Replay.objects.filter(run=OuterRef("run"), replicate=True)
    return (
        replays.filter(Exists(replicated))
        .order_by()
        .values("run_id", "tier", "project__slug", "project__agent", "run__model")
        .annotate(**COUNTED)
    )


def reproducibility(filters: TrendFilters) -> list[Group]:
    """The groups of the shown nights' replicated runs, by project, agent,
    model and tier (live first)."""
    groups: dict[tuple[str, str, str, str], Group] = {}
    for row in _rows(filters):
        key = (
            row["project__slug"],
            row["project__agent"],
            row["run__model"],
            row["tier"],
        )
        group = groups.get(key) or groups.setdefault(key, Group(*key))
        group.add(row["successes"], row["failures"], row["inconclusive"])
    return sorted(groups.values(), key=lambda g: (g.project, g.agent, g.model, g.tier))
