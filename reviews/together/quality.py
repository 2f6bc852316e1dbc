"""The lead's agreement page as reads: who judged what, and against which gold."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Count, Q

from reviews.models import GoldItem, Purpose, Review, SecondOpinion
from reviews.together import agreement
from reviews.together.labels import label_counts
from reviews.together.past import Period, day_start


def _reviews(period: Period):
    # Decisions taken back do not count; gold checks do (they are measured).
    rows = Review.objects.filter(
        undone_at__isnull=True,
        created_at__gte=day_start(period.since),
        created_at__lt=day_start(period.until + timedelta(days=1)),
    )
    if period.project_id is not None:
        rows = rows.filter(replay__project_id=period.project_id)
    return rows


def decided(period: Period):
    """The period's decisions on replays: no gold checks, nothing taken back."""
    return _reviews(period).exclude(purpose=Purpose.GOLD)


def _first_judgements(rows) -> dict[str, dict[int, str]]:
    """Each reviewer's first verdict on each replay (confirm or overturn)."""
    found: dict[str, dict[int, str]] = {}
    for name, replay_id, verdict in (
        rows.filter(decision__in=[Review.Decision.CONFIRM, Review.Decision.OVERTURN])
        .order_by("created_at", "id")
        .values_list("reviewer__username", "replay_id", "verdict_after")
    ):
        found.setdefault(name, {}).setdefault(replay_id, verdict)
    return found


def report(period: Period) -> dict:
    rows = _reviews(period)
    gold = dict(GoldItem.objects.values_list("replay_id", "verdict"))
    gold_scores = agreement.gold_agreement(
        _first_judgements(rows.filter(purpose=Purpose.GOLD)), gold
    )
    # Between reviewers, every judgement counts, gold checks included: gold
    # items are what most reviewers share.
    pairs = agreement.pairwise(_first_judgements(rows))
    judged = Q(decision__in=[Review.Decision.CONFIRM, Review.Decision.OVERTURN])
    per_reviewer = (
        rows.values("reviewer__username")
        .annotate(
            # A judgement confirms or overturns; a rerun asks for another
            # replay and is counted apart.
            decisions=Count("id", filter=judged & ~Q(purpose=Purpose.GOLD)),
            reruns=Count("id", filter=Q(decision=Review.Decision.RERUN)),
            overturns=Count(
                "id",
                filter=Q(decision=Review.Decision.OVERTURN) & ~Q(purpose=Purpose.GOLD),
            ),
            gold_checks=Count("id", filter=Q(purpose=Purpose.GOLD)),
        )
        .order_by("reviewer__username")
    )
    opinions = SecondOpinion.objects.filter(second_review__in=rows)
    return {
        "gold_scores": gold_scores,
        "pairs": pairs,
        "per_reviewer": list(per_reviewer),
        "second_opinions": {
            "given": opinions.count(),
            "agreed": opinions.filter(agrees=True).count(),
            "disagreed": opinions.filter(agrees=False).count(),
        },
        "labels": label_counts(decided(period)),
    }
