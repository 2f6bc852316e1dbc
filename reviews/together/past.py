"""Past decisions and search: the Done tab's reads."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import connection
from django.db.models import Exists, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from replayhub.models import Replay
from reviews.models import Comment, Purpose, Review
from reviews.queue_reads import model_matching

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
    # A part of the run's model name, in any case (``model_matching``).
    model: str = ""
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
    if filters.model:
        rows = rows.filter(model_matching(filters.model, "replay__run__model"))
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


def seen_by(
    rows: QuerySet[Review], *, viewer_id: int | None, blind: set[int], gold: bool
) -> QuerySet[Review]:
    """Of decisions ``rows``, those the viewer may read: none on a replay of a
    ``blind`` project they have not judged themselves (another reviewer's
    verdict is what blind review hides), and no one else's gold check unless
    ``gold`` (the viewer manages gold: to anyone else a gold item is not one).
    """
    if blind:
        judged = Review.objects.filter(
            replay=OuterRef("replay_id"), reviewer_id=viewer_id
        )
        rows = rows.exclude(Q(replay__project_id__in=blind) & ~Exists(judged))
    if not gold:
        rows = rows.exclude(Q(purpose=Purpose.GOLD) & ~Q(reviewer_id=viewer_id))
    return rows


@dataclass(frozen=True)
class SearchFilters:
    """What a search narrows to besides its text: the run's model (a part of
    its name), the settled verdict, the automated reason code and the tier."""

    model: str = ""
    verdict: str = ""
    reason: str = ""
    tier: str = ""

    def __bool__(self) -> bool:
        return bool(self.model or self.verdict or self.reason or self.tier)


def with_settled(rows: QuerySet[Replay]) -> QuerySet[Replay]:
    """Annotate each replay with its standing human decision, if any
    (``human_decision``, ``human_verdict``, ``human_by``) and the verdict that
    settles it (``settled_verdict``): the reviewer's when one stands, else the
    automated one."""
    standing = (
        Review.objects.standing()
        .filter(replay=OuterRef("pk"))
        .exclude(decision=Review.Decision.RERUN)
        .order_by("-created_at", "-id")
    )
    return rows.annotate(
        human_decision=Subquery(standing.values("decision")[:1]),
        human_verdict=Subquery(standing.values("verdict_after")[:1]),
        human_by=Subquery(standing.values("reviewer__username")[:1]),
        settled_verdict=Coalesce(
            Subquery(standing.values("verdict_after")[:1]), F("verdict")
        ),
    )


def search(
    text: str,
    filters: SearchFilters | None = None,
    *,
    blind_to: tuple[int | None, set[int]] | None = None,
) -> list[Replay]:
    """Replays whose id, run external id, title or a comment matches ``text``,
    narrowed by ``filters``; with no text, the filters alone choose.

    PostgreSQL ranks words with its full-text search (the "simple"
    configuration: ids and names are not English); SQLite falls back to a
    plain case-insensitive substring filter.

    ``blind_to`` is ``(viewer id, blind project ids)`` for a viewer under blind
    review: a filter on the verdict or the reason then leaves out the replays
    of those projects the viewer has not judged, or the answer would tell
    their verdict; and others' comments on them match nothing (a comment can
    tell the verdict too).
    """
    text = text.strip()
    filters = filters or SearchFilters()
    if not text and not filters:
        return []
    rows = with_settled(Replay.objects.all())
    ids = _ids_in(text)
    if text:
        rows = rows.filter(_matching(text, ids, blind_to))
    if filters.model:
        rows = rows.filter(model_matching(filters.model))
    if filters.verdict:
        rows = rows.filter(Q(settled_verdict=filters.verdict))
    if filters.reason:
        rows = rows.filter(reason_code=filters.reason)
    if filters.tier:
        rows = rows.filter(tier=filters.tier)
    if blind_to is not None and (filters.verdict or filters.reason):
        viewer_id, blind = blind_to
        judged = Review.objects.filter(replay=OuterRef("pk"), reviewer_id=viewer_id)
        rows = rows.exclude(Q(project_id__in=blind) & ~Exists(judged))
    matched = rows.select_related("run", "project").order_by("-created_at", "-id")
    found = list(matched[:SEARCH_LIMIT])
    # An exact id or external id first: that is the one being looked for.
    found.sort(key=lambda r: not (r.pk in ids or r.run.external_id == text))
    return found


def matching_count(
    text: str, *, blind_to: tuple[int | None, set[int]] | None = None
) -> int:
    """How many replays ``text`` matches with no filter: what a search whose
    filters leave nothing says instead of "nothing matches". No filter names
    a verdict or a reason, and others' comments count as ``search`` lets them
    match, so the count tells nothing blind review hides."""
    text = text.strip()
    if not text:
        return 0
    return Replay.objects.filter(_matching(text, _ids_in(text), blind_to)).count()


def _ids_in(text: str) -> set[int]:
    """The replay id ``text`` names ("12" or "#12"), if it names one."""
    bare = text.lstrip("#")
    return {int(bare)} if bare.isdigit() else set()


def _matching(
    text: str, ids: set[int], blind_to: tuple[int | None, set[int]] | None = None
) -> Q:
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
    if blind_to is not None:
        viewer_id, blind = blind_to
        judged = Review.objects.filter(
            replay_id=OuterRef("replay_id"), reviewer_id=viewer_id
        )
        by_comment = by_comment.exclude(
            Q(replay__project_id__in=blind) & ~Q(author_id=viewer_id) & ~Exists(judged)
        )
    return (
        exact | Q(pk__in=by_run.values("pk")) | Q(pk__in=by_comment.values("replay_id"))
    )
