"""Nightly rollups: the replays of each night counted once, for the trends dashboard.

The rules every row follows (the dashboard and the exports rely on them):

* **Which night.** A finished replay belongs to the date of the night that
  admitted it (``Replay.night.date``). A replay no night admitted (an explicit
  ``reproduce``, a reviewer's rerun, an automatic retry outside a window, a
  replay from before budgets existed) belongs to the night that most recently
  started before it finished: see ``night_of``. A project without a Budget row
  uses Budget's defaults (start hour 1, UTC).
* **What counts.** Only finished replays: ``attempted`` is the number of
  finished replays and always equals the sum of the four verdicts (the
  ``rollup_verdicts_add_up`` constraint). Queued, running and cancelled replays
  are not attempts; a replay still running when its night closes is counted
  when a later rollup covers that night (closing a night recomputes the
  previous one too, see ``rollup_closed_night``).
* **Reasons.** ``by_reason`` counts the reason codes of *inconclusive* replays
  only (a replay without a code counts under ``""``), so its values add up to
  ``inconclusive``. That is the harness-health
  signal the dashboard stacks; the codes of the other verdicts follow from the
  verdict almost one to one and are left out.
* **Human decisions.** ``confirmed`` and ``overturned`` map an automated verdict
  to the number of that night's replays whose *latest* review confirmed or
  overturned it. A replay whose latest decision is a rerun counts in neither.
* **Sources.** Code runs and rollouts (``Run.source``) never share a row: each
  row counts one source, and the deferred count sits on a ``code`` row.
* **Tiers.** Tape replays (``Replay.tier``: the model's answers served from a
  tape, so what drifts is the environment) and live agentic replays (the
  model's drift too) never share a row either.
* **Models.** One row per (night, project, ``Run.model``, ``Run.source``,
  ``Replay.tier``). The row with model ``""``, source ``code`` and tier
  ``agentic`` carries the night's ``deferred`` count (the agentic share's
  ``NightShare.deferred``: runs the budget pushed to a later night have no
  replay, so no model to count under), together with the
  replays of code runs that recorded no model. It exists for every night that
  has a Night row, even with all counts zero, so a night that ran nothing
  still shows. A night's totals are the sums over all its rows; deferred
  lives only on that row.

Recomputation is idempotent: for each project, the rows of the whole date
range are deleted and inserted again in one transaction, from one aggregate
query over the replays (no per-replay work in Python).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import connection, transaction
from django.db.models import (
    BooleanField,
    Case,
    Count,
    F,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import ExtractHour, TruncDate
from django.utils import timezone

from replayhub.celery import Task, enqueue
from replayhub.models import (
    Budget,
    Night,
    NightShare,
    Project,
    Replay,
    ReplayStatus,
    Rollup,
    RollupRequest,
    RollupTotal,
    RunSource,
    Tier,
)
from replayhub.models.nights import NightCounts
from replayhub.verdicts import Verdict
from reviews.models import Review

log = logging.getLogger(__name__)

# Budget's own defaults, for projects that never had a Budget row.
DEFAULT_START_HOUR = 1
DEFAULT_TIMEZONE = "UTC"


def night_of(finished_at: datetime, *, start_hour: int, tz: str) -> date:
    """The local date of the night that most recently started before ``finished_at``.

    That is the local date of ``finished_at - start_hour`` hours, counted on
    the local wall clock: with nights starting at 01:00 in Europe/Berlin, a
    replay finishing at 00:30 local time on the 5th belongs to the night of the
    4th, one finishing at 01:00 to the night of the 5th. Wall-clock hours keep
    the rule right across DST changes, where a fixed UTC offset would move the
    boundary by an hour.
    """
    local = finished_at.astimezone(ZoneInfo(tz))
    if local.hour < start_hour:
        return local.date() - timedelta(days=1)
    return local.date()


def night_start(day: date, *, start_hour: int, tz: str) -> datetime:
    """When the night of local date ``day`` starts, in UTC.

    A start hour skipped by DST maps to the instant right after the gap, as
    ``budgets.window_for`` does, so the two never disagree about a boundary.
    """
    return datetime.combine(day, time(start_hour), tzinfo=ZoneInfo(tz)).astimezone(UTC)


_Counts = TypeVar("_Counts", bound=NightCounts)


@dataclass
class RollupCounts:
    """The counters of one (night, model) row while it is being built."""

    verdicts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    by_reason: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    confirmed: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    overturned: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    deferred: int = 0

    def add(self, *, verdict: str, reason: str, decision: str | None, n: int):
        self.verdicts[verdict] += n
        if verdict == Verdict.INCONCLUSIVE:
            self.by_reason[reason] += n
        if decision == Review.Decision.CONFIRM:
            self.confirmed[verdict] += n
        elif decision == Review.Decision.OVERTURN:
            self.overturned[verdict] += n

    def merge(self, row: dict) -> None:
        """Add the counts of a row (``Rollup`` values) to these."""
        for verdict in Verdict:
            self.verdicts[verdict] += row[verdict]
        for name in ("by_reason", "confirmed", "overturned"):
            mine = getattr(self, name)
            for key, n in (row[name] or {}).items():
                mine[key] += n
        self.deferred += row["deferred"]

    def row(self, cls: type[_Counts], *, day: date, now: datetime, **key) -> _Counts:
        """A row of ``cls`` with these counts; ``key`` names model, source,
        tier (and the project of a Rollup)."""
        verdicts: dict[str, int] = {v: self.verdicts.get(v, 0) for v in Verdict}
        return cls(
            date=day,
            **key,
            attempted=sum(verdicts.values()),
            **verdicts,
            by_reason=_sorted(self.by_reason),
            confirmed=_sorted(self.confirmed),
            overturned=_sorted(self.overturned),
            deferred=self.deferred,
            computed_at=now,
        )


def _sorted(counts: dict[str, int]) -> dict[str, int]:
    return {key: counts[key] for key in sorted(counts) if counts[key]}


def rollup_range(
    *, since: date, until: date | None = None, project: Project | None = None
) -> int:
    """Recompute the Rollup rows of the nights ``since``..``until`` (inclusive).

    ``until`` defaults to tomorrow in UTC, the latest local date any time zone
    can have reached. Without ``project``, every project is recomputed. The
    rows of the range are replaced whole, so running it twice writes the same
    rows, and a night that no longer has anything to count loses its rows.
    Returns the number of rows written.
    """
    if until is None:
        until = timezone.now().astimezone(UTC).date() + timedelta(days=1)
    if until < since:
        raise ValueError(f"until ({until}) is before since ({since})")
    projects = [project] if project is not None else list(Project.objects.all())
    budgets = {
        b.project_id: b
        for b in Budget.objects.filter(project_id__in=[p.pk for p in projects])
    }
    written = 0
    now = timezone.now()
    with transaction.atomic():
        for item in sorted(projects, key=lambda p: p.pk):
            # A project-row lock orders two recomputations of the same project
            # (the nightly close and a manual command): without it both could
            # delete, then both insert, and the second insert would hit the
            # unique constraint. NO KEY UPDATE leaves inserts that reference
            # the project (replays, runs) unblocked.
            list(
                Project.objects.select_for_update(no_key=True)
                .filter(pk=item.pk)
                .values_list("pk", flat=True)
            )
            rows = _project_rows(
                project_id=item.pk,
                budget=budgets.get(item.pk),
                since=since,
                until=until,
                now=now,
            )
            Rollup.objects.filter(
                project_id=item.pk, date__gte=since, date__lte=until
            ).delete()
            Rollup.objects.bulk_create(rows)
            written += len(rows)
        refresh_totals(since, until)
    return written


# Taken by every rewrite of the all-projects totals, until its transaction
# ends (PostgreSQL; SQLite writes one transaction at a time anyway).
TOTALS_LOCK = 0x52485F544F54  # "RH_TOT"


def refresh_totals(since: date, until: date, *, now: datetime | None = None) -> int:
    """Rewrite the all-projects rows (``RollupTotal``) of the nights
    ``since``..``until`` from their Rollup rows; returns the rows written.

    Call it in the transaction that rewrote those Rollup rows. Two such
    transactions for different projects of one night each see only their own
    rows until they commit; the lock makes the second wait for the first to
    commit, then sum both, so the totals end with every project counted.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [TOTALS_LOCK])
    now = now or timezone.now()
    sums: dict[tuple[date, str, str, str], RollupCounts] = defaultdict(RollupCounts)
    rows = Rollup.objects.filter(date__gte=since, date__lte=until).values(
        "date",
        "model",
        "source",
        "tier",
        *tuple(Verdict),
        "deferred",
        "by_reason",
        "confirmed",
        "overturned",
    )
    for row in rows.order_by().iterator(chunk_size=5000):
        sums[(row["date"], row["model"], row["source"], row["tier"])].merge(row)
    totals = [
        counts.row(RollupTotal, day=day, model=model, source=source, tier=tier, now=now)
        for (day, model, source, tier), counts in sorted(sums.items())
    ]
    RollupTotal.objects.filter(date__gte=since, date__lte=until).delete()
    RollupTotal.objects.bulk_create(totals)
    return len(totals)


def before_project_deleted(sender, *, instance: Project, **kwargs) -> None:
    """Receiver of ``pre_delete`` for Project: notes the nights its rollups span."""
    instance._rollup_span = Rollup.objects.filter(project=instance).aggregate(
        first=Min("date"), last=Max("date")
    )


def after_project_deleted(sender, *, instance: Project, **kwargs) -> None:
    """Receiver of ``post_delete`` for Project: its rollups went with it, so the
    all-projects totals of those nights are summed again without them."""
    span = getattr(instance, "_rollup_span", None)
    if span and span["first"] is not None:
        refresh_totals(span["first"], span["last"])


def on_night_closed(sender, *, night: Night, **kwargs) -> None:
    """Receiver of ``replayhub.signals.night_closed``."""
    rollup_closed_night(night)


def rollup_closed_night(night: Night) -> int:
    """Roll up a night that just closed, and the night before it again.

    Replays admitted near the end of a window may still be running when it
    closes; by the next close they have finished, and the second pass counts
    them. Both passes together cost about twice one night.
    """
    return rollup_range(
        since=night.date - timedelta(days=1),
        until=night.date,
        project=night.project,
    )


def _counted_night(replay_id: int) -> tuple[int, date] | None:
    """The project id and night a finished replay counts in (None when it
    does not count: not finished)."""
    row = (
        Replay.objects.filter(pk=replay_id, status=ReplayStatus.FINISHED)
        .values_list("project_id", "finished_at", "night__date")
        .first()
    )
    if row is None or row[1] is None:
        return None
    project_id, finished_at, night_date = row
    if night_date is not None:
        return project_id, night_date
    budget = Budget.objects.filter(project_id=project_id).first()
    day = night_of(
        finished_at,
        start_hour=budget.window_start_hour if budget else DEFAULT_START_HOUR,
        tz=budget.timezone if budget else DEFAULT_TIMEZONE,
    )
    return project_id, day


def rollup_replay(replay_id: int) -> int:
    """Recompute the night a finished replay counts in, now."""
    counted = _counted_night(replay_id)
    if counted is None:
        return 0
    project_id, day = counted
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        return 0
    return rollup_range(since=day, until=day, project=project)


def rollup_request(replay_id: int) -> bool:
    """Owe a recount of the night a decided replay counts in; True when this
    call sent the task that will make it.

    A decision changes its night's confirmed and overturned figures, and
    counting a night reads all of its replays (a 10,000-replay night takes a
    tenth of a second and more): too much to pay inside a reviewer's request.
    So the request only writes the night's one ``RollupRequest`` row (one
    statement), and the
    first decision of a burst sends the task, a few seconds later
    (``REPLAYHUB_ROLLUP_DELAY_SECONDS``), that counts every decision made by
    then. A decision that finds the row already there sends nothing: the task
    deletes the row before it reads the replays, so it counts that decision
    too, and a decision made after the deletion writes a new row.
    """
    counted = _counted_night(replay_id)
    if counted is None:
        return False
    project_id, day = counted
    created = RollupRequest.objects.owe(project_id=project_id, day=day)
    if created:
        enqueue(
            Task.ROLLUP_NIGHT,
            project_id,
            day.isoformat(),
            countdown=settings.REPLAYHUB_ROLLUP_DELAY_SECONDS,
        )
    return created


def rollup_owed(*, project_id: int, day: date) -> int:
    """Recount a night a decision asked for (the task's work); safe to run
    twice. Returns the rows written, 0 when nothing was owed."""
    # Deleted, and committed, before the replays are read: a decision that
    # commits after this point writes a new request (and task) of its own.
    taken, _ = RollupRequest.objects.filter(project_id=project_id, date=day).delete()
    if not taken:
        return 0
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        return 0
    try:
        return rollup_range(since=day, until=day, project=project)
    except Exception:
        # Still owed: the sweep sends the task again.
        RollupRequest.objects.get_or_create(project_id=project_id, date=day)
        raise


def rollup_sweep(*, older_than: timedelta) -> int:
    """Send the task again for every request older than ``older_than``: its
    message was lost (a broker restart) or its recount failed. Returns how
    many were sent."""
    stale = RollupRequest.objects.filter(
        requested_at__lt=timezone.now() - older_than
    ).values_list("pk", "project_id", "date")
    sent = 0
    for pk, project_id, day in stale:
        # Moves on, so each stale request is sent once per period.
        if RollupRequest.objects.filter(pk=pk).update(requested_at=timezone.now()):
            enqueue(Task.ROLLUP_NIGHT, project_id, day.isoformat(), on_commit=False)
            sent += 1
    return sent


def _project_rows(
    *, project_id: int, budget: Budget | None, since: date, until: date, now
) -> list[Rollup]:
    start_hour = budget.window_start_hour if budget else DEFAULT_START_HOUR
    tz = budget.timezone if budget else DEFAULT_TIMEZONE
    nights = _nights_deferred(project_id=project_id, since=since, until=until)
    counts: dict[tuple[date, str, str, str], RollupCounts] = defaultdict(RollupCounts)
    for day, deferred in nights.values():
        counts[(day, "", RunSource.CODE, Tier.AGENTIC)].deferred = deferred
    groups = _replay_groups(
        project_id=project_id,
        night_ids=list(nights),
        since=since,
        until=until,
        start_hour=start_hour,
        tz=tz,
    )
    for group in groups:
        if group["night_id"] is not None:
            day = nights[group["night_id"]][0]
        else:
            day = group["local_date"] - timedelta(days=1 if group["early"] else 0)
            if not since <= day <= until:
                continue
        counts[(day, group["model"], group["source"], group["tier"])].add(
            verdict=group["verdict"],
            reason=group["inconclusive_reason"],
            decision=group["decision"],
            n=group["n"],
        )
    return [
        c.row(
            Rollup,
            day=day,
            project_id=project_id,
            model=model,
            source=source,
            tier=tier,
            now=now,
        )
        for (day, model, source, tier), c in sorted(counts.items())
    ]


def _nights_deferred(
    *, project_id: int, since: date, until: date
) -> dict[int, tuple[date, int]]:
    """The project's nights of the range by id: each one's date, and the runs
    its agentic share deferred (the dashboard's "deferred by budget")."""
    deferred_by = NightShare.objects.filter(night=OuterRef("pk"), tier=Tier.AGENTIC)
    return {
        pk: (day, deferred or 0)
        for pk, day, deferred in Night.objects.filter(
            project_id=project_id, date__gte=since, date__lte=until
        )
        .annotate(deferred=Subquery(deferred_by.values("deferred")[:1]))
        .values_list("pk", "date", "deferred")
    }


def _replay_groups(
    *,
    project_id: int,
    night_ids: list[int],
    since: date,
    until: date,
    start_hour: int,
    tz: str,
) -> QuerySet[Replay, dict[str, Any]]:
    """The project's finished replays of the range counted by night (or local
    date and hour), model, source, tier, verdict, reason and standing
    decision; grouped by the database, never read one by one."""
    zone = ZoneInfo(tz)
    latest_decision = (
        Review.objects.standing()
        .filter(replay=OuterRef("pk"))
        .order_by("-created_at", "-id")
        .values("decision")[:1]
    )
    # A replay without a night is placed by its local finishing time: the local
    # date, moved one day back when it finished before the night's start hour
    # (see night_of). Both parts are computed by the database and grouped on,
    # so the rows never travel to Python one by one.
    early = (
        Case(
            When(local_hour__lt=start_hour, then=Value(True)),
            default=Value(False),
            output_field=BooleanField(),
        )
        if start_hour
        else Value(False, output_field=BooleanField())
    )
    return (
        Replay.objects.filter(project_id=project_id, status=ReplayStatus.FINISHED)
        .filter(
            Q(night_id__in=night_ids)
            | Q(
                night__isnull=True,
                finished_at__gte=night_start(since, start_hour=start_hour, tz=tz),
                finished_at__lt=night_start(
                    until + timedelta(days=1), start_hour=start_hour, tz=tz
                ),
            )
        )
        .annotate(
            local_date=TruncDate("finished_at", tzinfo=zone),
            local_hour=ExtractHour("finished_at", tzinfo=zone),
        )
        .annotate(
            early=early,
            model=F("run__model"),
            source=F("run__source"),
            inconclusive_reason=Case(
                When(verdict=Verdict.INCONCLUSIVE, then=F("reason_code")),
                default=Value(""),
            ),
            decision=Subquery(latest_decision),
        )
        .values(
            "night_id",
            "local_date",
            "early",
            "model",
            "source",
            "tier",
            "verdict",
            "inconclusive_reason",
            "decision",
        )
        .annotate(n=Count("id"))
        .order_by()
    )
