"""Handing work over: an admin releases or reassigns a claim; a filtered set is
confirmed at once, each item decided and audited on its own."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from replayhub import roles
from replayhub.models import Replay
from reviews.models import AuditEvent, Claim, Label, Review, ReviewPolicy
from reviews.services import ClaimHeld, NotDecidable, lease_end, review_decide
from reviews.together.notices import notify

BULK_MAX = 500


class HandoffRefused(Exception):
    """One line for the user."""


def reviewers():
    """Users who may decide: the people a replay can be assigned to."""
    users = get_user_model().objects.filter(is_active=True).order_by("username")
    return [user for user in users if user.has_perm(roles.DECIDE)]


def claim_release_any(*, replay: Replay, actor) -> bool:
    with transaction.atomic():
        claim = Claim.objects.select_related("reviewer").filter(replay=replay).first()
        if claim is None:
            return False
        claim.delete()
        AuditEvent.objects.record(
            actor=actor,
            action="claim.release",
            replay_id=replay.pk,
            before={"claimed_by": claim.reviewer.get_username()},
            after={"reason": f"released by {actor.get_username()}"},
        )
    return True


def claim_reassign(*, replay: Replay, actor, to) -> Claim:
    if not to.is_active or not to.has_perm(roles.DECIDE):
        raise HandoffRefused(f"{to.get_username()} does not decide on replays")
    now = timezone.now()
    with transaction.atomic():
        before = Claim.objects.select_related("reviewer").filter(replay=replay).first()
        claim, _ = Claim.objects.update_or_create(
            replay=replay,
            defaults={"reviewer": to, "claimed_at": now, "expires_at": lease_end(now)},
        )
        AuditEvent.objects.record(
            actor=actor,
            action="claim.reassign",
            replay_id=replay.pk,
            before={"claimed_by": before.reviewer.get_username() if before else None},
            after={
                "claimed_by": to.get_username(),
                "expires_at": claim.expires_at.isoformat(),
            },
        )
        notify(
            user=to,
            actor=actor,
            kind="assigned",
            replay_id=replay.pk,
            text=f"{actor.get_username()} assigned replay {replay.pk} to you",
        )
    return claim


def undecided(rows: QuerySet) -> QuerySet:
    """Finished replays no human has decided on yet."""
    return rows.filter(~Exists(Review.objects.filter(replay=OuterRef("pk"))))


@dataclass
class BulkResult:
    confirmed: int
    skipped: list[str]


def bulk_confirm(*, replay_ids: list[int], reviewer, note: str = "") -> BulkResult:
    """Confirm each replay in turn; each is its own decision and audit event.

    A replay someone else holds, or one that changed state meanwhile, is
    skipped with its reason; the others are still confirmed.
    """
    confirmed, skipped = 0, []
    replay_ids = replay_ids[:BULK_MAX]
    labelled = set(
        Label.objects.filter(required=True).values_list("project_id", flat=True)
    )
    blind = set(
        ReviewPolicy.objects.filter(blind=True).values_list("project_id", flat=True)
    )
    project_of = dict(
        Replay.objects.filter(pk__in=replay_ids).values_list("pk", "project_id")
    )
    for replay_id in replay_ids:
        if project_of.get(replay_id) in labelled:
            skipped.append(f"#{replay_id}: its project asks for labels")
            continue
        if project_of.get(replay_id) in blind:
            # Blind review asks for a judgement made without the verdict.
            skipped.append(f"#{replay_id}: its project reviews blind")
            continue
        try:
            review_decide(
                replay=Replay(pk=replay_id),
                reviewer=reviewer,
                decision=Review.Decision.CONFIRM,
                note=note or "bulk confirm",
            )
        except (ClaimHeld, NotDecidable, Replay.DoesNotExist) as exc:
            skipped.append(f"#{replay_id}: {exc}")
            continue
        confirmed += 1
    return BulkResult(confirmed=confirmed, skipped=skipped)
