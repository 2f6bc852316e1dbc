"""The replicate tier in the night: more samples of the runs still undecided.

A project with a replicate policy (``Budget.replicate_policy``) gets, after
its runs' first replays, more replays of them — replicates — each one more
sample of whether the run reproduces (``replayhub.replicates``). They spend
the night's replicate share through ``shares.admit``, as every tier does, so
a replicate never passes a cap or a budget.

A run is a candidate when preflight passed it, nothing of it is queued or
running, it has at least one finished live replay, and its standing is
undecided with fewer than ``k`` samples (and fewer than ``k`` plus its
attempts replays, so that a run whose replays keep ending inconclusive is
not replayed for ever). A decided run is never one. Each admission gives a
run one replicate at most: the next is weighed once this one's verdict is
in, which is what sequential stopping asks.

- Tape first: a run with a tape and fewer than ``ENVIRONMENT_SAMPLES``
  finished tape replays gets a tape replicate (no model spend), which asks
  whether the environment reproduces; tape replays that disagree name the
  run an environment problem (``replicates.standing``).
- Then live replicates (agentic replays, for projects with agentic replays
  on), ranked by ``next_sample_value``, highest first: the runs whose next
  sample is likeliest to settle them per replicate spent.

Every tick in the window admits again (``services.nights_tick``), so a run
gets its next replicate soon after the last one's verdict. What the share
cannot take is counted on it (``deferred``) and waits for the next tick or
night; the report says why nothing was admitted when nothing could be.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import (
    BooleanField,
    Exists,
    ExpressionWrapper,
    OuterRef,
    Q,
)
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
from replayhub.replicates.standing import Counts, counts_by_run, standing_of
from replayhub.replicates.stopping import (
    ReplicateDecision,
    ReplicatePolicy,
    next_sample_value,
)

log = logging.getLogger(__name__)

# Tape replicates a run gets before its live ones: enough for two to disagree
# and a third to break the tie.
ENVIRONMENT_SAMPLES = 3


@dataclass(frozen=True)
class Replicand:
    """A run the replicate tier may sample again, and how."""

    run_id: int
    tape: bool  # a tape replicate; else a live one
    value: float  # next_sample_value of its live samples


def ready_runs(project: Project):
    """The project's runs that may take a replicate now: preflight passed,
    nothing in flight, at least one finished live replay."""
    replays = Replay.objects.filter(run=OuterRef("pk"))
    active = replays.filter(status__in=[ReplayStatus.QUEUED, ReplayStatus.RUNNING])
    replayed = replays.filter(status=ReplayStatus.FINISHED, tier=Tier.AGENTIC)
    stored = Tape.objects.filter(replay__run=OuterRef("pk"), exchanges__gt=0)
    return (
        Run.objects.filter(project=project, preflight=Preflight.READY)
        .annotate(
            active=Exists(active),
            replayed=Exists(replayed),
            stored_tape=Exists(stored),
            # As the tape tier reads it: the record's tape, never unpacked here.
            recorded_tape=KT("raw__tape__0"),
        )
        .filter(active=False, replayed=True)
        .annotate(
            taped=ExpressionWrapper(
                Q(stored_tape=True) | Q(recorded_tape__isnull=False),
                output_field=BooleanField(),
            )
        )
    )


def replicate_candidates(
    project: Project, policy: ReplicatePolicy, *, live: bool = True
) -> list[Replicand]:
    """The undecided runs, best first: tape replicates (cheapest), then live
    ones by the value of their next sample, highest first (``live``: the
    project spends agentic replays). Ties go to the older run."""
    rows = list(
        ready_runs(project).order_by("imported_at", "id").values_list("pk", "taped")
    )
    counts = counts_by_run(pk for pk, _ in rows)
    tape, rest = [], []
    for run_id, taped in rows:
        samples = counts.get((run_id, Tier.AGENTIC), Counts())
        standing = standing_of(policy, samples)
        if standing.decision is not ReplicateDecision.UNDECIDED:
            continue
        value = next_sample_value(policy, samples.successes, samples.failures)
        if value == 0 or samples.replays >= policy.most + project.max_attempts:
            continue  # k samples in, or too many replays that concluded nothing
        tapes = counts.get((run_id, Tier.TAPE), Counts())
        if taped and tapes.replays < ENVIRONMENT_SAMPLES:
            tape.append(Replicand(run_id, True, value))
        elif live:
            rest.append(Replicand(run_id, False, value))
    rest.sort(key=lambda c: -c.value)  # stable: older runs first on a tie
    return tape + rest


def night_admit_replicates(
    *, project: Project, now: datetime | None = None, immediate: bool = False
) -> NightReport:
    """Queue replicates of the project's undecided runs while the night's
    replicate share lasts; tape replicates first, then live ones."""
    now = now or timezone.now()
    policy = scheduler.budget_of(project).replicate_policy()
    if policy is None:
        return NightReport(
            tiers.REPLICATE, skipped_reason="no replicate policy for this project"
        )
    report = scheduler.night_for(
        tier=tiers.REPLICATE, project=project, now=now, immediate=immediate
    )
    night = report.night
    if night is None or report.skipped_reason:
        return report
    wanted = replicate_candidates(project, policy, live=project.agentic_enabled)
    if not wanted:
        report.skipped_reason = "no undecided run is ready for another sample"
        shares.defer(night, tiers.REPLICATE, 0)
        return report
    caps = scheduler.caps_of(project)
    estimates = {
        True: tiers.tape_estimate(
            recent=scheduler.recent_actuals(project, tape=True), caps=caps
        ),
        False: arithmetic.estimate(recent=scheduler.recent_actuals(project), caps=caps),
    }
    with transaction.atomic():
        for tape in (True, False):
            batch = [c.run_id for c in wanted if c.tape is tape]
            if not batch:
                continue
            count = shares.admit(
                night=night,
                tier=tiers.REPLICATE,
                estimate=estimates[tape],
                wanted=len(batch),
                now=now,
            )
            report.deferred += len(batch) - count
            # Each replicate may spend its own estimate and what no other
            # has reserved, never the others' reservations.
            left = shares.remaining(night, tiers.REPLICATE) + estimates[tape]
            report.admitted += _queue(
                project,
                night,
                batch[:count],
                estimates[tape],
                now,
                tape=tape,
                left=left,
            )
        shares.defer(night, tiers.REPLICATE, report.deferred)
    log.info(
        "night %s of %s: replicate tier admitted %d, deferred %d",
        night.date,
        project.slug,
        len(report.admitted),
        report.deferred,
    )
    return report


def _queue(
    project: Project,
    night: Night,
    run_ids: list[int],
    estimate: Amounts,
    now: datetime,
    *,
    tape: bool,
    left: Amounts,
) -> list[int]:
    """One replicate per run, with one set of caps from what is ``left``."""
    if not run_ids:
        return []
    caps = arithmetic.caps_for_replay(
        time_limit_seconds=project.time_limit_seconds,
        max_tokens=project.max_tokens,
        left=left,
    )
    tier = Tier.TAPE if tape else Tier.AGENTIC
    Replay.objects.queue_for_runs(
        run_ids,
        tier=tier,
        replicate=True,
        trigger=Trigger.SCHEDULER,
        night=night,
        reservation=estimate.as_json(),
        caps={"wall_seconds": caps.wall_seconds, "max_tokens": caps.max_tokens},
        created_at=now,
        enqueued_at=now,
    )
    return list(
        Replay.objects.filter(
            night=night,
            run_id__in=run_ids,
            tier=tier,
            replicate=True,
            status=ReplayStatus.QUEUED,
        )
        .order_by("id")
        .values_list("pk", flat=True)
    )
