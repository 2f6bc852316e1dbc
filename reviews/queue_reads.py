"""The review queue as reads: filters, keyset pages and band counts.

A run replayed on several nights has several replays awaiting review; the
queue shows one row per run, its newest replay the filters select
(``newest_of_runs``), and counts what it shows. The row says how many of
the run's replays await review (``queued_per_run``).

The queue is ordered by ``(review_band, finished_at desc, id desc)``, exactly
the partial index ``replay_review_queue``. Pages are cut with a keyset cursor,
never with OFFSET and never with a COUNT over the table: the cost of a page does
not grow with how deep it is. List queries load only the columns a row shows,
as plain values rather than model instances (several times cheaper for a page
of joined rows); the diff texts, the agent's output and the prompt stay in the
database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any, TypeVar, cast
from zoneinfo import ZoneInfo

from django.db import connection
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from replayhub.models import (
    Night,
    Replay,
    ReplayQuerySet,
    ReplayStatus,
    ReviewBand,
    Run,
)
from reviews.models import Claim, Purpose, Review, ReviewLabel

PAGE_SIZE = 50
_Rows = TypeVar("_Rows", bound=QuerySet)
_LAST_BAND = max(ReviewBand.values)

# Every value a queue row displays, across the joins it needs.
ROW_FIELDS = (
    "id",
    "verdict",
    "reason_code",
    "review_band",
    "tier",
    "finished_at",
    "project_id",
    "run_id",
    "run__title",
    "run__external_id",
    "run__model",
    "run__source",
    "comparison__files_changed",
    "comparison__insertions",
    "comparison__deletions",
    # A stored count: the per-path classes are JSON the queue never reads.
    "comparison__substantive_files",
    "claim__expires_at",
    "claim__reviewer__username",
)
# Band counts stop counting here: the figure a reviewer needs is "a lot", and
# counting a long queue exactly would make every page pay for its length.
COUNT_CAP = 1000

# The Model filter's suggestions: at most this many names, read from this
# many of the newest runs. Run.model has no index: the newest runs are read
# backwards on the primary key, about a millisecond whatever the table's size
# (a DISTINCT over the table, or over an IN of the newest ids, which the
# planner turns into a scan, takes a quarter of a second at a million runs).
MODEL_NAMES_SHOWN = 200
MODEL_NAMES_FROM = 2000

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CURSOR = re.compile(
    r"(?P<band>[0-9]+|-)\.(?P<micros>[0-9]{1,20})\.(?P<id>[0-9]{1,19})"
)


@dataclass(frozen=True)
class Cursor:
    """The last row of a page: the next page starts strictly after it.

    ``band`` is None when the listing is not in band order (a verdict filter).
    """

    band: int | None
    finished_at: datetime
    id: int

    def encode(self) -> str:
        # Integer arithmetic: a float timestamp can be off by a microsecond,
        # and the next page would then repeat or skip a row.
        micros = (self.finished_at - _EPOCH) // timedelta(microseconds=1)
        band = "-" if self.band is None else str(self.band)
        return f"{band}.{micros}.{self.id}"

    @classmethod
    def decode(cls, text: str) -> Cursor:
        """Parse ``encode``'s output; ValueError for anything else."""
        match = _CURSOR.fullmatch(text)
        if match is None:
            raise ValueError(f"not a queue cursor: {text[:40]!r}")
        band = None if match["band"] == "-" else int(match["band"])
        try:
            when = _EPOCH + timedelta(microseconds=int(match["micros"]))
        except OverflowError as exc:
            raise ValueError("cursor time out of range") from exc
        return cls(band=band, finished_at=when, id=int(match["id"]))

    @classmethod
    def after_row(cls, row: dict, *, banded: bool) -> Cursor:
        return cls(
            band=row["review_band"] if banded else None,
            finished_at=row["finished_at"],
            id=row["id"],
        )


def model_matching(text: str, field: str = "run__model") -> Q:
    """The Model filter of every page (the queue, search, the trends): the
    models whose name holds ``text`` in any case, so "coder" finds
    "Coder-small". ``field`` is the model's name as the rows reach it."""
    return Q(**{f"{field}__icontains": text})


def model_names() -> list[str]:
    """The model names a Model filter suggests: those of the newest runs,
    sorted, at most ``MODEL_NAMES_SHOWN``."""
    newest = Run.objects.order_by("-id").values_list("model", flat=True)
    return sorted(set(newest[:MODEL_NAMES_FROM]) - {""})[:MODEL_NAMES_SHOWN]


@dataclass(frozen=True)
class QueueFilters:
    project_id: int | None = None
    model: str = ""
    verdict: str = ""
    reason_code: str = ""
    # A label given in an earlier decision (a replay decided, then queued
    # again for a second opinion or listed by verdict); "" value: any value.
    label_id: int | None = None
    label_value: str = ""
    # Projects under blind review, listed apart (``blind_rows``) for a reviewer
    # who may not know a verdict's band.
    exclude_project_ids: frozenset[int] = frozenset()
    # Whom a replay is assigned to: the user holding an unexpired claim on it
    # (taken, or handed over by an admin); ``unassigned``: nobody holds one.
    assignee_id: int | None = None
    unassigned: bool = False

    @property
    def banded(self) -> bool:
        """Without a verdict filter the listing is the queue, in band order.

        A verdict filter lists every finished replay with that verdict, queued
        or not, so identical and still-retryable inconclusive replays (never
        queued) and already decided ones stay reachable.
        """
        return not self.verdict

    def apply(self, rows: QuerySet) -> QuerySet:
        if self.exclude_project_ids:
            rows = rows.exclude(project_id__in=self.exclude_project_ids)
        if self.project_id is not None:
            rows = rows.filter(project_id=self.project_id)
        if self.model:
            rows = rows.filter(model_matching(self.model))
        if self.reason_code:
            rows = rows.filter(reason_code=self.reason_code)
        if self.label_id is not None:
            given = ReviewLabel.objects.filter(
                review__replay=OuterRef("pk"), label_id=self.label_id
            )
            if self.label_value:
                given = given.filter(value=self.label_value)
            rows = rows.filter(Exists(given))
        if self.assignee_id is not None or self.unassigned:
            now = timezone.now()
            if self.assignee_id is not None:
                rows = rows.filter(
                    claim__reviewer_id=self.assignee_id, claim__expires_at__gt=now
                )
            else:
                rows = rows.exclude(claim__expires_at__gt=now)
        return rows


@dataclass
class Page:
    rows: list[dict]
    next_cursor: Cursor | None


def newest_of_runs(rows: _Rows, filters: QueueFilters) -> _Rows:
    """``rows`` less every queued replay a newer one of the same run outranks.

    Newer is the queue's own order inside a band: later ``finished_at``, then
    the higher id. Only a replay the same filters select outranks one, so a
    filter never hides a run whose newest replay it leaves out. A run has a
    few replays: each row's probe is an index lookup on ``replay_run_recent``.
    """
    newer = Replay.objects.awaiting_review().filter(
        Q(finished_at__gt=OuterRef("finished_at"))
        | Q(finished_at=OuterRef("finished_at"), id__gt=OuterRef("id")),
        run_id=OuterRef("run_id"),
        finished_at__isnull=False,
    )
    return rows.filter(~Exists(filters.apply(newer)))


def queued_per_run(run_ids: list[int]) -> dict[int, int]:
    """How many replays of each run await review, for the runs with more than
    one (one grouped read of the runs on a page)."""
    if not run_ids:
        return {}
    counted = (
        Replay.objects.awaiting_review()
        .filter(run_id__in=set(run_ids))
        .order_by()
        .values("run_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .values_list("run_id", "n")
    )
    return dict(counted)


def listing(filters: QueueFilters) -> QuerySet:
    """The rows a filter selects, unordered, as dicts of ``ROW_FIELDS``.

    The queue (no verdict filter) holds one row per run; a verdict's listing
    holds every finished replay, decided ones too.
    """
    if filters.banded:
        # finished_at is always set on a queued replay; requiring it keeps the
        # keyset comparisons below total.
        rows = Replay.objects.awaiting_review().filter(finished_at__isnull=False)
        return newest_of_runs(filters.apply(rows), filters).values(*ROW_FIELDS)
    else:
        rows = Replay.objects.finished().filter(
            verdict=filters.verdict, finished_at__isnull=False
        )
    return filters.apply(rows).values(*ROW_FIELDS)


def ordered(rows: QuerySet, *, banded: bool) -> QuerySet:
    if banded:
        # Every listing is drawn from Replay.objects, so its rows are a ReplayQuerySet.
        return cast(ReplayQuerySet, rows).in_queue_order()
    return rows.order_by("-finished_at", "-id")


def _older_than(cursor: Cursor) -> Q:
    # "finished_at <= t" is redundant with the OR but is the part an index can
    # seek on, so a deep page starts at its cursor instead of scanning to it.
    return Q(finished_at__lte=cursor.finished_at) & (
        Q(finished_at__lt=cursor.finished_at) | Q(id__lt=cursor.id)
    )


def page(filters: QueueFilters, *, after: Cursor | None, size: int = PAGE_SIZE) -> Page:
    """One page of the listing, strictly after ``after``.

    In band order the rest of the cursor's band and the bands after it are two
    index range scans; the second query runs only when the first leaves the
    page short.
    """
    base = listing(filters)
    banded = filters.banded
    if after is None:
        rows = list(ordered(base, banded=banded)[: size + 1])
    elif not banded or after.band is None:
        rows = list(ordered(base.filter(_older_than(after)), banded=False)[: size + 1])
    else:
        rows = list(
            base.filter(_older_than(after), review_band=after.band).order_by(
                "-finished_at", "-id"
            )[: size + 1]
        )
        if len(rows) <= size and after.band < _LAST_BAND:
            rows += ordered(base.filter(review_band__gt=after.band), banded=True)[
                : size + 1 - len(rows)
            ]
    next_cursor = None
    if len(rows) > size:
        rows = rows[:size]
        next_cursor = Cursor.after_row(rows[-1], banded=banded)
    return Page(rows=rows, next_cursor=next_cursor)


def blind_rows(
    project_ids: frozenset[int], filters: QueueFilters, size: int = PAGE_SIZE
) -> list[dict]:
    """Queued replays of projects under blind review, newest first: one
    neutral band, so neither a band nor a row's place says its verdict."""
    scoped = QueueFilters(
        project_id=filters.project_id,
        model=filters.model,
        label_id=None,
        assignee_id=filters.assignee_id,
        unassigned=filters.unassigned,
    )
    rows = scoped.apply(
        Replay.objects.awaiting_review().filter(
            project_id__in=project_ids, finished_at__isnull=False
        )
    )
    rows = newest_of_runs(rows, scoped)
    return list(rows.order_by("-finished_at", "-id").values(*ROW_FIELDS)[:size])


def blind_count(
    project_ids: frozenset[int], filters: QueueFilters, cap: int | None = None
) -> int:
    """How many replays ``blind_rows`` lists in all, counted up to ``cap + 1``:
    one figure, never per band, so it tells no verdict."""
    cap = COUNT_CAP if cap is None else cap
    scoped = QueueFilters(
        project_id=filters.project_id,
        model=filters.model,
        assignee_id=filters.assignee_id,
        unassigned=filters.unassigned,
    )
    rows = scoped.apply(
        Replay.objects.awaiting_review().filter(
            project_id__in=project_ids, finished_at__isnull=False
        )
    )
    return newest_of_runs(rows, scoped).order_by().values("id")[: cap + 1].count()


def band_counts(filters: QueueFilters, cap: int | None = None) -> dict[int, int]:
    """Queued replays per band, counted up to ``cap + 1`` (more means "cap+").

    One statement: per band, a count over at most ``cap + 1`` entries of the
    partial queue index, so its cost does not grow with the queue.
    """
    cap = COUNT_CAP if cap is None else cap
    queued = newest_of_runs(
        filters.apply(Replay.objects.awaiting_review()), filters
    ).order_by()
    parts: list[str] = []
    params: list[Any] = []
    for band in ReviewBand.values:
        sql, band_params = (
            queued.filter(review_band=band).values("id")[: cap + 1].query
        ).sql_with_params()
        # The band is an int from ReviewBand, the rest bound parameters.
        parts.append(f"SELECT {int(band)}, COUNT(*) FROM ({sql}) AS band_{band}")  # noqa: S608
        params.extend(band_params)
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(parts), params)
        return {band: n for band, n in cursor.fetchall() if n}


def running(limit: int = 100) -> list[Replay]:
    """Replays waiting for a worker or running, newest first."""
    return list(
        Replay.objects.filter(status__in=[ReplayStatus.QUEUED, ReplayStatus.RUNNING])
        .select_related("project", "run")
        .only(
            "id",
            "status",
            "phase",
            "trigger",
            "attempt",
            "created_at",
            "started_at",
            "project__slug",
            "run__title",
            "run__external_id",
            "run__model",
        )
        .order_by("-created_at", "-id")[:limit]
    )


def assigned_to(user, now: datetime) -> int:
    """How many replays awaiting review ``user`` holds: their share of the
    queue, taken or handed to them. One user's live claims, a few rows read
    through ``claim_reviewer_active``, never the queue."""
    return Claim.objects.filter(
        reviewer=user, expires_at__gt=now, replay__review_band__isnull=False
    ).count()


def holder(row: dict, now: datetime | None = None) -> str | None:
    """Who holds an active claim on a row from ``listing``, or None."""
    expires_at = row["claim__expires_at"]
    if expires_at is None or expires_at <= (now or timezone.now()):
        return None
    return row["claim__reviewer__username"]


def my_progress(user, now: datetime) -> list[dict]:
    """Per project, what ``user`` decided lately: ``today`` since the project's
    local midnight (its night's time zone), ``night`` on the replays of its
    latest night. Decisions taken back and gold checks do not count."""
    rows = Review.objects.filter(
        reviewer=user, undone_at__isnull=True, created_at__gte=now - timedelta(days=2)
    ).exclude(purpose=Purpose.GOLD)
    decided = list(
        rows.values_list(
            "replay__project_id",
            "replay__project__slug",
            "replay__project__budget__timezone",
            "replay__night_id",
            "created_at",
        )
    )
    if not decided:
        return []
    latest: dict[int, int] = {}
    project_ids = {row[0] for row in decided}
    for project_id, night_id in (
        Night.objects.filter(project_id__in=project_ids)
        .order_by("date", "id")
        .values_list("project_id", "id")
    ):
        latest[project_id] = night_id
    progress: dict[int, dict] = {}
    for project_id, slug, tz, night_id, created_at in decided:
        zone = ZoneInfo(tz or "UTC")
        midnight = datetime.combine(now.astimezone(zone).date(), time(), tzinfo=zone)
        one = progress.setdefault(project_id, {"project": slug, "today": 0, "night": 0})
        one["today"] += created_at >= midnight
        one["night"] += night_id is not None and night_id == latest.get(project_id)
    return sorted(progress.values(), key=lambda one: one["project"])
