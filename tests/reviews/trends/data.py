"""Replays, nights and rollups made directly in the database, for the trends tests."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from itertools import count

from replayhub.models import (
    Night,
    Phase,
    Project,
    Replay,
    ReplayStatus,
    Rollup,
    Run,
)
from reviews.models import Review
from reviews.trends.rollups import refresh_totals
from tests.factories import make_night

_serial = count(1)

DEFAULT_REASON = {
    "identical": "same_tree",
    "equivalent": "tests_agree",
    "divergent": "replay_fails_tests",
    "inconclusive": "flaky_tests",
}


def night(item: Project, day: date, *, deferred: int = 0, status: str = "closed"):
    limits = {
        "limit_replays": 100,
        "limit_sandbox_seconds": 100_000,
        "limit_tokens": 10_000_000,
        "limit_cost_usd": 100,
    }
    return make_night(
        item,
        start=datetime(day.year, day.month, day.day, 22, tzinfo=UTC),
        status=status,
        shares={"agentic": limits | {"deferred": deferred}},
    )


def replay(
    item: Project,
    *,
    finished_at: datetime,
    verdict: str = "equivalent",
    reason_code: str | None = None,
    model: str = "gpt-5",
    night: Night | None = None,
    status: str = ReplayStatus.FINISHED,
    source: str = "code",
    tier: str = "agentic",
) -> Replay:
    n = next(_serial)
    run = Run.objects.create(
        project=item,
        external_id=f"run-{n}",
        model=model,
        original_commit="a" * 40,
        source=source,
    )
    finished = status == ReplayStatus.FINISHED
    return Replay.objects.create(
        run=run,
        project=item,
        tier=tier,
        status=status,
        phase=Phase.DONE if finished else Phase.AGENT,
        verdict=verdict if finished else "",
        reason_code=(reason_code or DEFAULT_REASON[verdict]) if finished else "",
        reason="Counted by hand." if finished else "",
        night=night,
        started_at=finished_at - timedelta(minutes=10),
        finished_at=finished_at if finished else None,
    )


def decide(replay: Replay, reviewer, decision: str, *, after: str = "", minutes=0):
    """A Review as ``review_decide`` stores it, ``minutes`` after the replay ended."""
    if decision == "confirm":
        after = replay.verdict
    return Review.objects.create(
        replay=replay,
        reviewer=reviewer,
        decision=decision,
        verdict_before=replay.verdict,
        verdict_after=after,
        created_at=replay.finished_at + timedelta(minutes=5 + minutes),
    )


def rollup(
    item: Project,
    day: date,
    *,
    attempted: int,
    by_reason: dict[str, int],
    model: str = "gpt-5",
    deferred: int = 0,
    confirmed: dict | None = None,
    overturned: dict | None = None,
    totals: bool = True,
) -> Rollup:
    """A rollup row whose decided verdicts split evenly-ish three ways, summed
    into its night's all-projects totals as ``rollup_range`` would (with
    ``totals=False``, the caller sums many nights at once by ``refresh_totals``)."""
    inconclusive = sum(by_reason.values())
    reached = attempted - inconclusive
    identical = reached // 2
    equivalent = (reached - identical) // 2
    row = Rollup.objects.create(
        date=day,
        project=item,
        model=model,
        attempted=attempted,
        identical=identical,
        equivalent=equivalent,
        divergent=reached - identical - equivalent,
        inconclusive=inconclusive,
        by_reason=by_reason,
        confirmed=confirmed or {},
        overturned=overturned or {},
        deferred=deferred,
    )
    if totals:
        refresh_totals(day, day)
    return row


def steady_then_bad(
    item: Project,
    last: date,
    *,
    nights: int = 40,
    model: str = "gpt-5",
    bad_reason: str = "baseline_failed",
) -> date:
    """``nights`` steady nights (10% inconclusive of 100), then one bad night.

    The bad night (``last``) has 35% inconclusive, 25 points of it from
    ``bad_reason``: with a center of 10% and 100 replays, its upper limit is
    10% + 3·sqrt(0.1·0.9/100) = 19%.
    """
    for i in range(nights, 0, -1):
        rollup(
            item,
            last - timedelta(days=i),
            attempted=100,
            by_reason={"timeout": 6, "flaky_tests": 4},
            model=model,
            deferred=i % 3,
        )
    rollup(
        item,
        last,
        attempted=100,
        by_reason={"timeout": 6, "flaky_tests": 4, bad_reason: 25},
        model=model,
        deferred=7,
    )
    return last
