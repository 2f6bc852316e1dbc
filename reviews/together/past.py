"""Past decisions and search: the Done tab's reads."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from replayhub.models import Replay
from reviews.models import Comment, Review

DONE_PAGE = 100
SEARCH_LIMIT = 100


def day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


@dataclass(frozen=True)
class Period:
    """Days ``since`` to ``until`` inclusive, of one project or all."""

    since: date
    until: date
    project_id: int | None = None


@dataclass(frozen=True)
class DoneFilters:
    reviewer_id: int | None = None
    project_id: int | None = None
    decision: str = ""
    verdict: str = ""
    label_id: int | None = None
    label_value: str = ""
    since: date | None = None
    until: date | None = None
    before_id: int | None = None


def done(filters: DoneFilters) -> QuerySet:
    """Decisions, newest first, filtered; gold checks included (they are decided)."""
    rows = Review.objects.select_related(
        "reviewer", "replay__run", "replay__project"
    ).prefetch_related("labels__label")
    if filters.reviewer_id is not None:
        rows = rows.filter(reviewer_id=filters.reviewer_id)
    if filters.project_id is not None:
        rows = rows.filter(replay__project_id=filters.project_id)
    if filters.decision:
        rows = rows.filter(decision=filters.decision)
    if filters.verdict:
        rows = rows.filter(verdict_after=filters.verdict)
    if filters.label_id is not None:
        labelled = Q(labels__label_id=filters.label_id)
        if filters.label_value:
            labelled &= Q(labels__value=filters.label_value)
        rows = rows.filter(labelled)
    if filters.since:
        rows = rows.filter(created_at__gte=day_start(filters.since))
    if filters.until:
        rows = rows.filter(created_at__lt=day_start(filters.until + timedelta(days=1)))
    if filters.before_id is not None:
        rows = rows.filter(id__lt=filters.before_id)
    return rows.order_by("-created_at", "-id")


def search(text: str) -> list[Replay]:
    """Replays whose id, run external id, title or a comment matches ``text``.

    PostgreSQL ranks words with its full-text search (the "simple"
    configuration: ids and names are not English); SQLite falls back to a
    plain case-insensitive substring filter.
    """
    text = text.strip()
    if not text:
        return []
    ids: set[int] = set()
    if text.lstrip("#").isdigit():
        ids.add(int(text.lstrip("#")))
    exact = Q(run__external_id=text) | Q(pk__in=ids)
    by_comment: QuerySet[Comment]
    if connection.vendor == "postgresql":
        query = SearchQuery(text, config="simple", search_type="websearch")
        by_run = Replay.objects.annotate(
            found=SearchVector("run__title", "run__external_id", config="simple")
        ).filter(Q(found=query))
        by_comment = Comment.objects.annotate(
            found=SearchVector("body", config="simple")
        ).filter(found=query)
    else:
        by_run = Replay.objects.filter(
            Q(run__title__icontains=text) | Q(run__external_id__icontains=text)
        )
        by_comment = Comment.objects.filter(body__icontains=text)
    matched = (
        Replay.objects.filter(
            exact
            | Q(pk__in=by_run.values("pk"))
            | Q(pk__in=by_comment.values("replay_id"))
        )
        .select_related("run", "project")
        .order_by("-created_at", "-id")
    )
    found = list(matched[:SEARCH_LIMIT])
    # An exact id or external id first: that is the one being looked for.
    found.sort(key=lambda r: not (r.pk in ids or r.run.external_id == text))
    return found
