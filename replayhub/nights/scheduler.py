"""The nightly scheduler: open a project's night, admit agentic replays while
the agentic share lasts.

Admission reserves the replays' estimates on the night's agentic share
(``shares.admit``: one conditional UPDATE a try), so concurrent schedulers or
workers can never push a dimension past its limit. A replay of any tier
settles its actual cost when it finishes and gives back the rest of its
reservation (``settle``). Candidates that do not fit are deferred: counted on
the share, marked on the run, and first in line next night.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet
from django.utils import timezone

from replayhub import signals
from replayhub.models import (
    Budget,
    Night,
    NightStatus,
    Preflight,
    Project,
    Replay,
    ReplayStatus,
    Run,
    Tier,
    Trigger,
)
from replayhub.nights import arithmetic, shares, tiers
from replayhub.nights.arithmetic import Amounts
from replayhub.nights.shares import NightReport
from replayhub.verdicts import Verdict

log = logging.getLogger(__name__)

# An inconclusive run is retried only after this long, so a flapping harness
# does not spend the whole night on one run.
RETRY_MIN_AGE = timedelta(hours=6)
RECENT_REPLAYS = arithmetic.ESTIMATE_WINDOW


def budget_of(project: Project) -> Budget:
    budget, _ = Budget.objects.get_or_create(project=project)
    return budget


def night_open(*, project: Project, now: datetime, immediate: bool = False) -> Night:
    """The project's night containing ``now`` (or, ``immediate``, one starting now).

    Its shares are copied from the budget when the night is created, so
    editing the budget mid-night changes the next night, not this one.
    """
    budget = budget_of(project)
    window: dict[str, Any] = {
        "start_hour": budget.window_start_hour,
        "end_hour": budget.window_end_hour,
        "tz": budget.timezone,
    }
    day = arithmetic.night_containing(now, **window)
    if day is None or immediate:
        day = timezone.localtime(now, timezone=_zone(budget)).date()
        start, end = arithmetic.window_for(day, **window)
        start, end = now, now + (end - start)
    else:
        start, end = arithmetic.window_for(day, **window)
    with transaction.atomic():
        # The night and its shares commit together: a concurrent opener that
        # finds the night finds its shares.
        night, created = Night.objects.get_or_create(
            project=project,
            date=day,
            defaults={"window_start": start, "window_end": end},
        )
        if created:
            shares.open_shares(night, budget)
    if (
        immediate
        and not created
        and (night.window_end <= now or night.status != "open")
    ):
        # Running a night on demand reopens today's window from now.
        Night.objects.filter(pk=night.pk).update(
            status=NightStatus.OPEN, window_start=now, window_end=end
        )
        night.refresh_from_db()
    return night


def _zone(budget: Budget):
    from zoneinfo import ZoneInfo

    return ZoneInfo(budget.timezone)


def recent_actuals(project: Project, *, tape: bool = False) -> list[Amounts]:
    """What the project's recent finished replays spent: its tape replays'
    (``tape``) or its live ones' — a tape replay costs no tokens, and would
    pull the live estimate down."""
    replays = Replay.objects.filter(project=project, status=ReplayStatus.FINISHED)
    replays = (
        replays.filter(tier=Tier.TAPE) if tape else replays.exclude(tier=Tier.TAPE)
    )
    rows = (
        replays.exclude(sandbox_seconds=0)
        .order_by("-finished_at")
        .values_list("sandbox_seconds", "tokens", "cost_usd")[:RECENT_REPLAYS]
    )
    return [Amounts(1, math.ceil(s), t, c) for s, t, c in reversed(rows)]


def caps_of(project: Project) -> Amounts:
    """The most one replay may spend, as far as its caps say.

    Sandbox time is bounded by the agent's limit plus every test run. Tokens
    are bounded only when the project caps them, and nothing caps money per
    replay: without history those dimensions are estimated at zero and the
    replay's actual spend is settled when it ends.
    """
    test_runs = 2 * (1 + project.flake_reruns)
    seconds = project.time_limit_seconds + test_runs * project.test_time_limit
    return Amounts(1, seconds, project.max_tokens or 0, Decimal(0))


def settle(*, replay: Replay, actual: Amounts, now: datetime) -> None:
    """Give back the reservation and record the actual cost, once per replay,
    on the share of the replay's tier (``shares.settle``).

    A replay that was never admitted (an explicit reproduce, a reviewer's
    rerun, a retry) is charged to the project's night running at ``now``, if
    there is one. Call it inside the transaction that finishes the replay.
    """
    night_id = shares.charged_night(
        project_id=replay.project_id, night_id=replay.night_id, now=now
    )
    if night_id is None or not Replay.objects.settle(replay.pk, night_id=night_id):
        return
    tier = share_tier(replay)
    shares.settle(
        night_id,
        tier,
        release=Amounts.from_dict(replay.reservation or {}),
        actual=actual,
    )


def share_tier(replay: Replay) -> str:
    """The share a replay spends: a replicate's, else the tape tier's or,
    whatever else it is, the agentic tier's."""
    if replay.replicate:
        return tiers.REPLICATE
    return tiers.TAPE if replay.tier == Tier.TAPE else tiers.AGENTIC


def candidates(project: Project, now: datetime):
    """Runs worth replaying tonight, best first.

    Deferred runs first (oldest deferral first), then never-replayed runs, then
    runs whose latest replay is inconclusive with attempts left and old enough,
    then the rest, least recently replayed first. Runs preflight ruled out and
    runs with a replay still queued or running are never candidates.
    """
    replays = Replay.objects.filter(run=OuterRef("pk"))
    active = replays.filter(status__in=[ReplayStatus.QUEUED, ReplayStatus.RUNNING])
    latest = replays.filter(status=ReplayStatus.FINISHED).order_by("-finished_at")
    return (
        Run.objects.filter(project=project, preflight=Preflight.READY)
        .annotate(
            active=Exists(active),
            replayed=Exists(replays),
            attempts=_count(replays),
            last_verdict=latest.values("verdict")[:1],
            last_finished=latest.values("finished_at")[:1],
        )
        .filter(active=False)
        # Spelled out rather than exclude(): last_verdict is NULL for runs never
        # finished, and NOT (NULL AND ...) would drop them.
        .filter(
            Q(last_verdict__isnull=True)
            | ~Q(last_verdict=Verdict.INCONCLUSIVE)
            | Q(
                attempts__lt=project.max_attempts,
                last_finished__lte=now - RETRY_MIN_AGE,
            )
        )
        .order_by(
            F("deferred_at").asc(nulls_last=True),
            "replayed",
            F("last_verdict").desc(nulls_last=True),  # "inconclusive" sorts first
            F("last_finished").asc(nulls_first=True),
            "imported_at",
            "id",
        )
    )


def _count(queryset):
    from django.db.models import Count, Subquery

    return Subquery(
        queryset.order_by().values("run").annotate(n=Count("id")).values("n")[:1]
    )


def night_day(project: Project, now: datetime) -> date | None:
    """The local date of the project's night whose window holds ``now``."""
    budget = budget_of(project)
    return arithmetic.night_containing(
        now,
        start_hour=budget.window_start_hour,
        end_hour=budget.window_end_hour,
        tz=budget.timezone,
    )


def night_for(
    *, tier: str, project: Project, now: datetime, immediate: bool
) -> NightReport:
    """The report of ``tier``'s admission with the night it admits into, or
    with the reason it admits nothing: ``now`` is outside the night's window
    (unless ``immediate``: the night opens now), or the window has ended."""
    if night_day(project, now) is None and not immediate:
        return NightReport(tier, skipped_reason="outside the night's window")
    night = night_open(project=project, now=now, immediate=immediate)
    report = NightReport(tier, night=night)
    # Not ``window_start <= now``: a night run on demand by another operator
    # at the same moment opens at their ``now``, which may be a little after
    # this one's; it has not ended for that.
    if now >= night.window_end:
        report.skipped_reason = "the night's window has ended"
    return report


def night_admit(
    *,
    project: Project,
    now: datetime | None = None,
    immediate: bool = False,
    gate: Callable[[QuerySet[Run]], QuerySet[Run]] | None = None,
) -> NightReport:
    """Admit this night's replays for ``project`` while the budget lasts.

    Agentic replays are spent only on opted-in projects. Whatever does not fit
    is deferred, never dropped. The admitted replays are queued rows; sending
    them to the workers is ``services.night_run``'s part. ``gate`` narrows the
    candidates (the tier policy: only runs the text tier passed on).
    """
    now = now or timezone.now()
    if not project.agentic_enabled:
        return NightReport(
            tiers.AGENTIC, skipped_reason="agentic replays are off for this project"
        )
    report = night_for(
        tier=tiers.AGENTIC, project=project, now=now, immediate=immediate
    )
    night = report.night
    if night is None:
        return report
    Night.objects.filter(pk=night.pk, scheduled_at__isnull=True).update(
        scheduled_at=now
    )
    if report.skipped_reason:
        return report
    estimate = arithmetic.estimate(
        recent=recent_actuals(project), caps=caps_of(project)
    )
    # Admission is idempotent: a run this night has already admitted (queued,
    # running or replayed) is not admitted again when the night is run twice
    # (`nightly --now` again, a tier-gated tick). One the window's end
    # cancelled may be, should the night be reopened.
    tonight = (
        Replay.objects.filter(night=night)
        .exclude(tier=Tier.TAPE)
        .exclude(status=ReplayStatus.CANCELLED)
        .values("run_id")
    )
    with transaction.atomic():
        # Two admissions of one night at once (`nightly --now` run twice) take
        # turns on its row: the second sees what the first admitted.
        Night.objects.select_for_update().get(pk=night.pk)
        report.already = tonight.distinct().count()
        runs = candidates(project, now).exclude(pk__in=tonight)
        if gate is not None:
            runs = gate(runs)
        wanted = list(runs.values_list("pk", flat=True))
        # Every candidate shares one estimate, so the night admits the first k
        # at once: one conditional UPDATE reserves k estimates, or nothing.
        count = shares.admit(
            night=night,
            tier=tiers.AGENTIC,
            estimate=estimate,
            wanted=len(wanted),
            now=now,
        )
        admitted, deferred = wanted[:count], wanted[count:]
        report.admitted = _create_replays(project, night, admitted, estimate, now)
        Run.objects.filter(pk__in=admitted).update(deferred_at=None)
        if deferred:
            Run.objects.filter(pk__in=deferred, deferred_at__isnull=True).update(
                deferred_at=now
            )
        shares.defer(night, tiers.AGENTIC, len(deferred))
        report.deferred = len(deferred)
    log.info(
        "night %s of %s: admitted %d, deferred %d",
        night.date,
        project.slug,
        len(report.admitted),
        report.deferred,
    )
    return report


def _create_replays(
    project: Project, night: Night, run_ids: list[int], estimate: Amounts, now
) -> list[int]:
    """Queue one replay per run, each with its reservation and caps."""
    if not run_ids:
        return []
    attempts = dict(
        Replay.objects.filter(run_id__in=run_ids)
        .values("run_id")
        .annotate(n=Count("id"))
        .values_list("run_id", "n")
    )
    # What remains once this batch is reserved; the i-th replay's caps may use
    # the estimates of those admitted after it, never more.
    after = shares.remaining(night, tiers.AGENTIC)
    caps = [
        arithmetic.caps_for_replay(
            time_limit_seconds=project.time_limit_seconds,
            max_tokens=project.max_tokens,
            left=after + estimate * (len(run_ids) - i),
        )
        for i in range(len(run_ids))
    ]
    common = {
        "trigger": Trigger.SCHEDULER,
        "night": night,
        "reservation": estimate.as_json(),
        "created_at": now,
        "enqueued_at": now,
    }
    if caps[0] == caps[-1]:
        # The usual night: the budget is roomy and every replay gets the same
        # caps, so one statement creates them all.
        Replay.objects.queue_for_runs(run_ids, caps=_caps(caps[0]), **common)
        # Only the rows just made: a run may have a replay the window's end
        # cancelled on this night, when the night was reopened.
        return list(
            Replay.objects.filter(
                night=night, run_id__in=run_ids, status=ReplayStatus.QUEUED
            )
            .order_by("id")
            .values_list("pk", flat=True)
        )
    created = Replay.objects.bulk_create(
        [
            Replay(
                run_id=run_id,
                project=project,
                attempt=attempts.get(run_id, 0) + 1,
                caps=_caps(cap),
                **common,
            )
            for run_id, cap in zip(run_ids, caps, strict=True)
        ],
        batch_size=2000,
    )
    return [r.pk for r in created]


def _caps(cap) -> dict:
    return {"wall_seconds": cap.wall_seconds, "max_tokens": cap.max_tokens}


def night_claim(*, project: Project, now: datetime) -> bool:
    """Whether ``now`` is in the project's night and this caller is the one to
    run its selection: the night is claimed once, by a conditional UPDATE of
    ``scheduled_at``."""
    if night_day(project, now) is None:
        return False
    night = night_open(project=project, now=now)
    return bool(
        Night.objects.filter(pk=night.pk, scheduled_at__isnull=True).update(
            scheduled_at=now
        )
    )


def night_close_ended(*, now: datetime) -> list[Night]:
    """Close the nights whose window has ended; no new replay is admitted there.

    Each night this call closes is announced with ``signals.night_closed``
    (the trends rollup counts it).
    """
    ended = list(
        Night.objects.filter(
            status=NightStatus.OPEN, window_end__lte=now
        ).select_related("project")
    )
    for night in ended:
        closed = Night.objects.filter(pk=night.pk, status=NightStatus.OPEN).update(
            status=NightStatus.CLOSED
        )
        if not closed:
            continue  # another tick closed it and announces it
        # A failing receiver must not keep the remaining nights open; a night
        # can be counted again with `manage.py rollup --since`.
        for receiver, result in signals.night_closed.send_robust(Night, night=night):
            if isinstance(result, Exception):
                log.error(
                    "%s failed on the close of %s",
                    getattr(receiver, "__qualname__", receiver),
                    night,
                    exc_info=result,
                )
    return ended
