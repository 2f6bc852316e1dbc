"""Second opinions: a decided replay goes back to the queue for another reviewer.

A project's policy asks for one after an overturn or after a decision on chosen
verdicts; any reviewer can ask for one on any finished replay. While it is
open the replay sits in the "needs second review" band, which its first
reviewer (or whoever asked, before any decision) never gets.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef

from replayhub.models import Replay, ReplayStatus, ReviewBand
from reviews.models import (
    AuditEvent,
    Purpose,
    Review,
    ReviewPolicy,
    SecondOpinion,
)
from reviews.together.notices import notify


class OpinionRefused(Exception):
    """The second opinion cannot be asked for or given (one line, for the user)."""


def open_request(replay_id: int) -> SecondOpinion | None:
    return (
        SecondOpinion.objects.select_related("excluded", "first_review__reviewer")
        .filter(replay_id=replay_id, second_review__isnull=True)
        .first()
    )


def excluded_for(reviewer):
    """An Exists over replays whose open second opinion ``reviewer`` may not give."""
    return Exists(
        SecondOpinion.objects.filter(
            replay=OuterRef("pk"), second_review__isnull=True, excluded=reviewer
        )
    )


def second_opinion_ask(*, replay: Replay, user, note: str = "") -> SecondOpinion:
    with transaction.atomic():
        locked = (
            Replay.objects.select_for_update().only("id", "status").get(pk=replay.pk)
        )
        if locked.status != ReplayStatus.FINISHED:
            raise OpinionRefused("the replay has no verdict yet")
        first = (
            Review.objects.standing()
            .filter(replay=locked)
            .order_by("-created_at", "-id")
            .first()
        )
        excluded = first.reviewer if first else user
        why = f"asked by {user.get_username()}" + (f": {note}" if note else "")
        try:
            with transaction.atomic():
                opinion = SecondOpinion.objects.create(
                    replay=locked, first_review=first, excluded=excluded, why=why[:200]
                )
        except IntegrityError:
            raise OpinionRefused("a second opinion is already asked for") from None
        Replay.objects.enter_review_band(locked.pk, ReviewBand.NEEDS_SECOND_REVIEW)
        AuditEvent.objects.record(
            actor=user,
            action="second_opinion.ask",
            replay_id=locked.pk,
            after={"review_band": ReviewBand.NEEDS_SECOND_REVIEW, "why": why},
        )
    return opinion


def check_may_give(*, replay_id: int, reviewer) -> SecondOpinion | None:
    """The open request a decision by ``reviewer`` answers; refuses the excluded."""
    opinion = open_request(replay_id)
    if opinion is not None and opinion.excluded_id == reviewer.pk:
        raise OpinionRefused("a second opinion comes from another reviewer")
    return opinion


def after_decision(
    *, review: Review, opinion: SecondOpinion | None, project_id: int
) -> None:
    """Close the open request ``review`` answers, or open one the policy needs.

    Runs inside the decision's transaction, after the replay left the queue.
    """
    replay_id = review.replay_id
    if opinion is not None:
        first = opinion.first_review
        agrees = None
        if first is not None and review.decision != Review.Decision.RERUN:
            agrees = first.verdict_after == review.verdict_after
        opinion.second_review = review
        opinion.agrees = agrees
        opinion.save(update_fields=["second_review", "agrees"])
        review.purpose = Purpose.SECOND
        review.save(update_fields=["purpose"])
        action = {True: "agree", False: "disagree", None: "give"}[agrees]
        AuditEvent.objects.record(
            actor=review.reviewer,
            action=f"second_opinion.{action}",
            replay_id=replay_id,
            before={"first": first.verdict_after if first else None},
            after={"second": review.verdict_after or None},
        )
        if first is not None and agrees is False:
            notify(
                user=first.reviewer,
                actor=review.reviewer,
                kind="second",
                replay_id=replay_id,
                text=f"{review.reviewer.get_username()} disagrees on replay "
                f"{replay_id}: {first.verdict_after} / {review.verdict_after}",
            )
        return
    policy = ReviewPolicy.objects.filter(project_id=project_id).first()
    if policy is None or review.purpose != Purpose.DECISION:
        return
    why = policy.needs_second(
        decision=review.decision, verdict_after=review.verdict_after
    )
    if not why:
        return
    SecondOpinion.objects.create(
        replay_id=replay_id, first_review=review, excluded=review.reviewer, why=why
    )
    Replay.objects.return_to_review_queue(
        replay_id, band=ReviewBand.NEEDS_SECOND_REVIEW
    )
    AuditEvent.objects.record(
        actor=review.reviewer,
        action="second_opinion.required",
        replay_id=replay_id,
        after={"review_band": ReviewBand.NEEDS_SECOND_REVIEW, "why": why},
    )


def after_undo(*, review: Review) -> None:
    """A decision taken back: its request goes, the one it answered reopens."""
    SecondOpinion.objects.filter(
        first_review=review, second_review__isnull=True
    ).delete()
    SecondOpinion.objects.filter(second_review=review).update(
        second_review=None, agrees=None
    )
