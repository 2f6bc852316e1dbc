"""Gold items: decided replays with a settled verdict, mixed into reviewers' queues.

A gold item is served to each reviewer at most once, at the project's rate,
and looks like any queued item until the reviewer has judged it; the judgement
is a Review with purpose "gold" that changes nothing on the replay.
"""

from __future__ import annotations

import random
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Q

from replayhub.models import Replay, ReplayStatus, ReviewBand
from replayhub.verdicts import Verdict
from reviews.models import (
    AuditEvent,
    GoldItem,
    GoldServing,
    Purpose,
    Review,
    ReviewPolicy,
)
from reviews.together.labels import labels_save

_random = random.SystemRandom()


class NotGold(Exception):
    """The replay cannot be a gold item (not decided, or a bad verdict)."""


def gold_mark(*, replay: Replay, actor, verdict: str = "") -> GoldItem:
    """Mark a decided replay as gold, with ``verdict`` or its latest decided one."""
    with transaction.atomic():
        latest = (
            Review.objects.filter(
                replay=replay,
                decision__in=[Review.Decision.CONFIRM, Review.Decision.OVERTURN],
            )
            .exclude(purpose=Purpose.GOLD)
            .order_by("-created_at", "-id")
            .first()
        )
        if replay.status != ReplayStatus.FINISHED or latest is None:
            raise NotGold("only a replay a reviewer has decided can be gold")
        verdict = verdict or latest.verdict_after
        if verdict not in tuple(Verdict):
            raise NotGold(f"unknown verdict {verdict!r}")
        band = ReviewBand.for_verdict(replay.verdict, True) or ReviewBand.DIVERGENT
        item, _ = GoldItem.objects.update_or_create(
            replay=replay,
            defaults={
                "verdict": verdict,
                "band": band,
                "marked_by": actor,
                "active": True,
            },
        )
        AuditEvent.objects.record(
            actor=actor,
            action="gold.mark",
            replay_id=replay.pk,
            after={"gold": verdict},
        )
    return item


def gold_unmark(*, replay: Replay, actor) -> bool:
    with transaction.atomic():
        changed = GoldItem.objects.filter(replay=replay, active=True).update(
            active=False
        )
        if changed:
            AuditEvent.objects.record(
                actor=actor, action="gold.unmark", replay_id=replay.pk
            )
    return bool(changed)


def gold_pick(
    *,
    reviewer,
    now: datetime,
    roll: float | None = None,
    project_id: int | None = None,
) -> Replay | None:
    """Serve the reviewer a gold item they have not seen, at the project's rate
    (of ``project_id`` only, when given).

    ``roll`` is a number in [0, 100); an item of a project whose rate is above
    it may be served. A reviewer never gets a gold item they decided on
    themselves: they would know the answer.
    """
    roll = _random.random() * 100 if roll is None else roll
    # Most installations serve no gold at all: one cheap read says so, rather
    # than the joins below on every claim.
    if not ReviewPolicy.objects.filter(gold_rate_percent__gt=roll).exists():
        return None
    candidates = (
        GoldItem.objects.filter(
            active=True, replay__project__review_policy__gold_rate_percent__gt=roll
        )
        .exclude(served__reviewer=reviewer)
        .exclude(
            Q(replay__reviews__reviewer=reviewer) | Q(replay__claim__reviewer=reviewer)
        )
        .order_by("?")
    )
    if project_id is not None:
        candidates = candidates.filter(replay__project_id=project_id)
    for item in candidates[:3]:
        try:
            with transaction.atomic():
                GoldServing.objects.create(gold=item, reviewer=reviewer, served_at=now)
        except IntegrityError:
            continue
        return Replay.objects.get(pk=item.replay_id)
    return None


def pending(*, replay_id: int, user) -> GoldServing | None:
    """The user's unjudged serving of this replay as a gold item, if any."""
    if not user.is_authenticated:
        return None
    return (
        GoldServing.objects.select_related("gold")
        .filter(
            gold__replay_id=replay_id,
            gold__active=True,
            reviewer=user,
            review__isnull=True,
        )
        .first()
    )


def gold_release(*, replay_id: int, user) -> bool:
    """Hand back an unjudged gold item; it may be served to the user again."""
    serving = pending(replay_id=replay_id, user=user)
    if serving is None:
        return False
    serving.delete()
    return True


def gold_judge(
    *,
    serving: GoldServing,
    decision: str,
    verdict_after: str | None,
    note: str = "",
    labels: dict[int, str] | None = None,
) -> Review:
    """Record a reviewer's judgement of a gold item; the replay itself is untouched."""
    with transaction.atomic():
        replay = Replay.objects.only("id", "verdict").get(pk=serving.gold.replay_id)
        if decision == Review.Decision.OVERTURN:
            if verdict_after not in tuple(Verdict) or verdict_after == replay.verdict:
                raise NotGold("an overturn names a different verdict")
        elif decision == Review.Decision.CONFIRM:
            verdict_after = replay.verdict
        else:
            verdict_after = ""
        review = Review.objects.create(
            replay=replay,
            reviewer=serving.reviewer,
            decision=decision,
            verdict_before=replay.verdict,
            verdict_after=verdict_after or "",
            note=note,
            purpose=Purpose.GOLD,
        )
        serving.review = review
        serving.save(update_fields=["review"])
        if labels:
            labels_save(review=review, values=labels)
        AuditEvent.objects.record(
            actor=serving.reviewer,
            action="gold.judge",
            replay_id=replay.pk,
            after={
                "decision": decision,
                "verdict": verdict_after or None,
                "gold": serving.gold.verdict,
                "agrees": verdict_after == serving.gold.verdict,
            },
        )
    return review
