"""The tape tier in the night: replay the runs that have a tape from it, first.

A tape replay answers the agent's model calls from a tape (the run's recorded
one, else the tape a previous replay recorded), so it spends no model tokens
or money: only a sandbox. It runs before the agentic tier, under its own
share of the night (a count and sandbox time), reserved for the whole batch
through ``shares.admit`` as the agentic tier reserves its own.

A run is the tape tier's when it has a tape and no tape replay since its
last live replay: the tape replay asks "does the environment still
reproduce?", a live replay then asks "does the model?", and the tape that
live replay records makes the run the tape tier's again. While the tier is
on, the agentic tier leaves those runs to it (``without_taped``), so a taped
run never spends model money in a night its tape replay could have answered.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.fields.json import KT
from django.utils import timezone

from replayhub.models import (
    Night,
    Preflight,
    Project,
    Replay,
    ReplayStatus,
    Run,
    Tape,
    Tier,
    Trigger,
)
from replayhub.nights import arithmetic, scheduler, shares, tiers
from replayhub.nights.arithmetic import Amounts
from replayhub.nights.shares import NightReport

log = logging.getLogger(__name__)


def tape_candidates(project: Project) -> QuerySet[Run]:
    """Runs the tape tier should replay, never tape-replayed first, oldest first.

    A run qualifies when preflight passed it, nothing of it is queued or
    running, it has a tape (its record's, or one a replay recorded), and it
    has no tape replay since its last finished live replay. A tape replay the
    window's end cancelled does not count: the run waits for the next night.
    """
    replays = Replay.objects.filter(run=OuterRef("pk"))
    active = replays.filter(status__in=[ReplayStatus.QUEUED, ReplayStatus.RUNNING])
    last_tape = (
        replays.filter(tier=Tier.TAPE)
        .exclude(status=ReplayStatus.CANCELLED)
        .order_by("-created_at")
        .values("created_at")[:1]
    )
    last_live = (
        replays.filter(status=ReplayStatus.FINISHED)
        .exclude(tier=Tier.TAPE)
        .order_by("-created_at")
        .values("created_at")[:1]
    )
    stored = Tape.objects.filter(replay__run=OuterRef("pk"), exchanges__gt=0)
    return (
        Run.objects.filter(project=project, preflight=Preflight.READY)
        .annotate(
            active=Exists(active),
            stored_tape=Exists(stored),
            # The record's tape is an array of exchanges (``replayhub-record``);
            # its type is read in SQL so that no tape is unpacked here.
            recorded_tape=KT("raw__tape__0"),
            last_tape=Subquery(last_tape),
            last_live=Subquery(last_live),
        )
        .filter(active=False)
        .filter(Q(stored_tape=True) | Q(recorded_tape__isnull=False))
        .filter(Q(last_tape__isnull=True) | Q(last_live__gt=F("last_tape")))
        .order_by(F("last_tape").asc(nulls_first=True), "imported_at", "id")
    )


def without_taped(runs: QuerySet[Run], project: Project) -> QuerySet[Run]:
    """The agentic candidates less the runs the tape tier is to replay."""
    return runs.exclude(pk__in=tape_candidates(project).values("pk"))


def night_admit_tape(
    *, project: Project, now: datetime | None = None, immediate: bool = False
) -> NightReport:
    """Queue tonight's tape replays while the night's tape share lasts.

    Every candidate shares one estimate (the median of the project's recent
    tape replays, else its caps), so the night reserves k of them with one
    conditional UPDATE and creates the k replays with one statement. What
    does not fit is counted on the tape share and is first in line at the
    next admission (it has still had no tape replay).
    """
    now = now or timezone.now()
    if not scheduler.budget_of(project).tape_enabled:
        return NightReport(
            tiers.TAPE, skipped_reason="the tape tier is off for this project"
        )
    report = scheduler.night_for(
        tier=tiers.TAPE, project=project, now=now, immediate=immediate
    )
    night = report.night
    if night is None or report.skipped_reason:
        return report
    estimate = tiers.tape_estimate(
        recent=scheduler.recent_actuals(project, tape=True),
        caps=scheduler.caps_of(project),
    )
    wanted = list(tape_candidates(project).values_list("pk", flat=True))
    with transaction.atomic():
        # The caps are set from what is left before this batch's reservation.
        left = Amounts(
            sandbox_seconds=shares.remaining(night, tiers.TAPE).sandbox_seconds,
            tokens=shares.remaining(night, tiers.AGENTIC).tokens,
        )
        count = shares.admit(
            night=night, tier=tiers.TAPE, estimate=estimate, wanted=len(wanted), now=now
        )
        admitted = wanted[:count]
        report.deferred = len(wanted) - count
        if admitted:
            report.admitted = _create_tape_replays(
                project, night, admitted, estimate, now, left=left
            )
        shares.defer(night, tiers.TAPE, report.deferred)
    log.info(
        "night %s of %s: tape tier admitted %d, deferred %d",
        night.date,
        project.slug,
        len(report.admitted),
        report.deferred,
    )
    return report


def _create_tape_replays(
    project: Project,
    night: Night,
    run_ids: list[int],
    estimate: Amounts,
    now,
    *,
    left: Amounts,
) -> list[int]:
    # One set of caps for the batch, from what was ``left`` before its
    # reservation: the agent's wall time is bounded by the tape share, and
    # tokens (spent only by a replay that leaves its tape and goes live) by
    # what the agentic share has.
    caps = arithmetic.caps_for_replay(
        time_limit_seconds=project.time_limit_seconds,
        max_tokens=project.max_tokens,
        left=left,
    )
    Replay.objects.queue_for_runs(
        run_ids,
        tier=Tier.TAPE,
        trigger=Trigger.SCHEDULER,
        night=night,
        reservation=estimate.as_json(),
        caps={"wall_seconds": caps.wall_seconds, "max_tokens": caps.max_tokens},
        created_at=now,
        enqueued_at=now,
    )
    return list(
        Replay.objects.filter(night=night, run_id__in=run_ids, tier=Tier.TAPE)
        .order_by("id")
        .values_list("pk", flat=True)
    )
