"""Review workflows: claims, decisions, and the audit events they write.

Every function here is keyword-only, runs in one transaction and leaves an
``AuditEvent`` behind for each change it makes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Final, Literal, cast

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from replayhub import signals
from replayhub.models import BudgetShare, Replay, ReplayStatus, Run, Tier, Trigger
from replayhub.models.replays import ReplayQuerySet
from replayhub.nights import shares, tiers
from replayhub.services import replay_request
from replayhub.verdicts import Verdict
from reviews import queue_reads
from reviews.models import AuditEvent, Claim, Label, Review
from reviews.queue_reads import QueueFilters
from reviews.replay_page.evidence import read_evidence
from reviews.replay_page.overrule import contradicted
from reviews.together import gold, opinions
from reviews.together.labels import labels_save
from reviews.trends import rollups

# claim_next locks one candidate at a time (locking a few would hide them from
# the reviewers pressing "Next" at the same moment, who would find nothing) and
# looks again this many times when it loses that candidate to another claim.
_ROUNDS = 5


class ClaimHeld(Exception):
    """Another reviewer holds an active claim on the replay."""

    def __init__(self, claim: Claim):
        super().__init__(
            f"replay {claim.replay_id} is held by {claim.reviewer} "
            f"until {claim.expires_at:%H:%M:%S}"
        )
        self.claim = claim


class NotDecidable(Exception):
    """The replay has no verdict to decide on yet, or the decision is malformed."""


class OverrulesEvidence(Exception):
    """An overturn contradicts cryptographically verified evidence and was not
    explicitly acknowledged; ``reasons`` name what it contradicts."""

    def __init__(self, reasons: list[str]):
        super().__init__(" ".join(reasons))
        self.reasons = reasons


class DecidedMeanwhile(Exception):
    """The decision was taken from a page that showed another standing
    decision than the one stored now: ``standing``, the latest standing
    decision (None: none stands, the one shown was taken back)."""

    def __init__(self, standing: Review | None):
        super().__init__("another decision was recorded or taken back meanwhile")
        self.standing = standing


# What ``review_decide`` is told of a page that showed nothing to check
# against (a script, the API).
UNCHECKED: Final = "unchecked"


class NotUndoable(Exception):
    """The decision is not the reviewer's own, is no longer the latest, or its
    time to be taken back has passed."""


def lease_end(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.REPLAYHUB_REVIEW_LEASE_SECONDS)


def _take(*, replay_id: int, reviewer, now: datetime) -> Claim | None:
    """Write the claim row if nobody else holds it; None when someone does.

    This conditional write, not the row lock taken before it, is what makes
    a claim exclusive. A reviewer's SELECT may have run on a snapshot from
    before another reviewer's claim committed; the UPDATE re-reads the claim
    row as committed, and the INSERT meets the unique replay constraint.
    """
    expires_at = lease_end(now)
    free_or_mine = Q(expires_at__lte=now) | Q(reviewer=reviewer)
    updated = Claim.objects.filter(Q(replay_id=replay_id) & free_or_mine).update(
        reviewer=reviewer, claimed_at=now, expires_at=expires_at
    )
    if updated:
        return Claim(
            replay_id=replay_id,
            reviewer=reviewer,
            claimed_at=now,
            expires_at=expires_at,
        )
    try:
        with transaction.atomic():
            return Claim.objects.create(
                replay_id=replay_id,
                reviewer=reviewer,
                claimed_at=now,
                expires_at=expires_at,
            )
    except IntegrityError:
        return None


def _release_others(*, reviewer, keep_replay_id: int, now: datetime) -> None:
    """One item at a time: taking the next item lets go of the one held before."""
    held = Claim.objects.filter(reviewer=reviewer).exclude(replay_id=keep_replay_id)
    for replay_id in held.filter(expires_at__gt=now).values_list(
        "replay_id", flat=True
    ):
        AuditEvent.objects.record(
            actor=reviewer,
            action="claim.release",
            replay_id=replay_id,
            before={"claimed_by": reviewer.get_username()},
            after={"reason": "took the next item"},
        )
    held.delete()


def claim_next(
    *,
    reviewer,
    now: datetime | None = None,
    gold_roll: float | None = None,
    filters: QueueFilters | None = None,
) -> Replay | None:
    """Claim the highest-priority queued replay nobody holds; None when there is none.

    ``filters`` are the queue's as the reviewer reads it: the item comes from
    the replays they list (whom one is assigned to aside: a held one is never
    handed out).

    Now and then (the project's gold rate; ``gold_roll`` fixes the dice) the
    item is a gold item the reviewer has not judged yet, served without a
    claim. A replay waiting for a second opinion is never handed to the
    reviewer it must not come from.

    Two reviewers calling this at once get different replays. On PostgreSQL,
    ``skip_locked`` lets each pass over the row the other is claiming instead of
    waiting for it; on SQLite the IMMEDIATE transaction already serialises
    writers. In both, ``_take``'s conditional write is the final arbiter.
    """
    now = now or timezone.now()
    filters = dataclasses.replace(
        filters or QueueFilters(), assignee_id=None, unassigned=False
    )
    if filters == QueueFilters() or (
        filters == QueueFilters(project_id=filters.project_id)
    ):
        served = gold.gold_pick(
            reviewer=reviewer, now=now, roll=gold_roll, project_id=filters.project_id
        )
        if served is not None:
            return served
    queued = cast(ReplayQuerySet, filters.apply(Replay.objects.awaiting_review()))
    if filters.verdict:
        queued = queued.filter(verdict=filters.verdict)
    held = Claim.objects.filter(replay=OuterRef("pk"), expires_at__gt=now)
    for _ in range(_ROUNDS):
        with transaction.atomic():
            # A run's newest queued replay only, as the queue lists it.
            candidate = (
                queue_reads.newest_of_runs(queued, filters)
                .filter(~Exists(held), ~opinions.excluded_for(reviewer))
                .in_queue_order()
                .select_for_update(skip_locked=True)
                .values_list("pk", "review_band")
                .first()
            )
            if candidate is None:
                return None
            replay_id, band = candidate
            if _take(replay_id=replay_id, reviewer=reviewer, now=now) is None:
                # Claimed by someone else after this transaction's snapshot:
                # look again with a fresh one.
                continue
            _release_others(reviewer=reviewer, keep_replay_id=replay_id, now=now)
            AuditEvent.objects.record(
                actor=reviewer,
                action="claim.take",
                replay_id=replay_id,
                after={
                    "claimed_by": reviewer.get_username(),
                    "expires_at": lease_end(now).isoformat(),
                    "review_band": band,
                },
            )
            # The caller goes to its page: the big columns stay unread.
            return Replay.objects.defer(
                "agent_output", "evidence", "provenance", "reason"
            ).get(pk=replay_id)
    return None


def claim_take(*, replay: Replay, reviewer, now: datetime | None = None) -> Claim:
    """Claim one particular replay (or extend one's own claim on it).

    Raises ClaimHeld when another reviewer's claim is still active.
    """
    now = now or timezone.now()
    with transaction.atomic():
        claim = _take(replay_id=replay.pk, reviewer=reviewer, now=now)
        if claim is None:
            raise ClaimHeld(
                Claim.objects.select_related("reviewer").get(replay_id=replay.pk)
            )
        AuditEvent.objects.record(
            actor=reviewer,
            action="claim.take",
            replay_id=replay.pk,
            after={
                "claimed_by": reviewer.get_username(),
                "expires_at": claim.expires_at.isoformat(),
            },
        )
    return claim


def claim_release(*, replay: Replay, reviewer) -> bool:
    """Give back one's own claim; False when the reviewer held none."""
    with transaction.atomic():
        released, _ = Claim.objects.filter(replay=replay, reviewer=reviewer).delete()
        if released:
            AuditEvent.objects.record(
                actor=reviewer,
                action="claim.release",
                replay_id=replay.pk,
                before={"claimed_by": reviewer.get_username()},
            )
    return bool(released)


def review_decide(
    *,
    replay: Replay,
    reviewer,
    decision: str,
    verdict_after: str | None = None,
    note: str = "",
    labels: dict[int, str] | None = None,
    overrule: bool = False,
    standing_shown: int | Literal["unchecked"] | None = UNCHECKED,
) -> Review:
    """Record a reviewer's decision on a finished replay.

    ``confirm`` lets the verdict stand, ``overturn`` names a different one, and
    ``rerun`` queues a fresh replay of the same run. The replay's own verdict is
    left as the machine reached it; the human one is the Review. Any decision
    takes the replay out of the queue and releases its claim. Raises ClaimHeld
    when another reviewer holds the replay, NotDecidable for an unfinished
    replay or an overturn that does not change the verdict, and
    OverrulesEvidence for an overturn against cryptographically verified
    evidence unless ``overrule`` says the reviewer means it.

    ``standing_shown`` is the latest standing decision the reviewer's page
    showed (its id, None for none): when another one stands now, or the one
    shown was taken back, DecidedMeanwhile is raised and nothing is recorded,
    so a page opened before someone else decided never silently adds its
    decision over theirs. ``UNCHECKED`` checks nothing.
    """
    now = timezone.now()
    with transaction.atomic():
        locked = _locked_finished(replay.pk)
        if standing_shown != UNCHECKED:
            # Under the replay's row lock: two pages deciding at once take
            # turns, and the second sees the first's decision here.
            standing = latest_standing(locked.pk)
            if (standing.pk if standing else None) != standing_shown:
                raise DecidedMeanwhile(standing)
        verdict_after, overruled = _verdict_after(
            locked, decision=decision, verdict_after=verdict_after, overrule=overrule
        )
        claim = Claim.objects.filter(replay=locked).select_related("reviewer").first()
        if claim and claim.expires_at > now and claim.reviewer_id != reviewer.pk:
            raise ClaimHeld(claim)
        try:
            opinion = opinions.check_may_give(replay_id=locked.pk, reviewer=reviewer)
        except opinions.OpinionRefused as exc:
            raise NotDecidable(str(exc)) from None

        rerun = None
        if decision == Review.Decision.RERUN:
            run = Run.objects.only("id", "project_id").get(pk=locked.run_id)
            # A rollout replay is rerun from the same seed.
            rerun = replay_request(
                run=run, trigger=Trigger.RERUN, user=reviewer, seed_id=locked.seed_id
            )
        Replay.objects.leave_review_queue(locked.pk)
        Claim.objects.filter(replay=locked).delete()
        review = Review.objects.create(
            replay=locked,
            reviewer=reviewer,
            decision=decision,
            verdict_before=locked.verdict,
            verdict_after=verdict_after,
            note=note,
            created_at=now,
        )
        if labels:
            labels_save(review=review, values=labels)
        AuditEvent.objects.record(
            actor=reviewer,
            action=f"review.{decision}",
            replay_id=locked.pk,
            before={
                "verdict": locked.verdict,
                "review_band": locked.review_band,
                "claimed_by": claim.reviewer.get_username() if claim else None,
            },
            after=_decision_after(
                review, labels=labels, overruled=overruled, rerun=rerun
            ),
        )
        opinions.after_decision(
            review=review, opinion=opinion, project_id=locked.project_id
        )
        transaction.on_commit(lambda: rollups.rollup_request(locked.pk))
        signals.send_after_commit(
            signals.review_decided,
            Review,
            replay_id=locked.pk,
            review_id=review.pk,
            decision=decision,
            verdict=verdict_after,
        )
    return review


def latest_standing(replay_id: int) -> Review | None:
    """The replay's latest decision not taken back (a rerun included, a gold
    check never), with its reviewer; None when none stands."""
    return (
        Review.objects.standing()
        .filter(replay_id=replay_id)
        .select_related("reviewer")
        .order_by("-created_at", "-id")
        .first()
    )


def _locked_finished(replay_id: int) -> Replay:
    """The replay, locked for a decision; NotDecidable before its verdict."""
    # The row lock orders two decisions on one replay; on SQLite the
    # IMMEDIATE transaction does.
    locked = (
        Replay.objects.select_for_update()
        .only(
            "id",
            "status",
            "verdict",
            "review_band",
            "project_id",
            "run_id",
            "seed_id",
            "evidence",
        )
        .get(pk=replay_id)
    )
    if locked.status != ReplayStatus.FINISHED:
        raise NotDecidable("the replay has not reached a verdict yet")
    return locked


def _verdict_after(
    locked: Replay, *, decision: str, verdict_after: str | None, overrule: bool
) -> tuple[str, list[str]]:
    """The verdict a decision leaves standing ("" for a rerun) and the verified
    checks an overturn overrules; NotDecidable for an unknown decision or an
    overturn to the same verdict, OverrulesEvidence for an overturn against
    verified evidence the reviewer did not acknowledge."""
    if decision not in Review.Decision.values:
        raise NotDecidable(f"unknown decision {decision!r}")
    if decision == Review.Decision.CONFIRM:
        return locked.verdict, []
    if decision != Review.Decision.OVERTURN:
        return "", []
    if verdict_after not in tuple(Verdict) or verdict_after == locked.verdict:
        raise NotDecidable("an overturn names a different verdict")
    overruled = contradicted(read_evidence(locked.evidence).checks, verdict_after)
    if overruled and not overrule:
        raise OverrulesEvidence(overruled)
    return verdict_after, overruled


def _decision_after(
    review: Review,
    *,
    labels: dict[int, str] | None,
    overruled: list[str],
    rerun: Replay | None,
) -> dict:
    """What the decision's audit event records as the state after it."""
    after: dict[str, Any] = {
        "decision": review.decision,
        "verdict": review.verdict_after or review.verdict_before,
        "review_band": None,
    }
    if review.note:
        after["note"] = review.note
    if labels:
        names = dict(Label.objects.filter(pk__in=labels).values_list("pk", "name"))
        after["labels"] = {names[pk]: value for pk, value in labels.items()}
    if review.decision == Review.Decision.OVERTURN and overruled:
        after["overruled"] = overruled
    if rerun is not None:
        after["rerun_replay"] = rerun.pk
    return after


def replay_tape_request(*, replay: Replay, actor) -> Replay:
    """Queue a tape replay of ``replay``'s run (its model answers served from
    the run's tape), as an event of ``replay``'s trail."""
    with transaction.atomic():
        run = Run.objects.only("id", "project_id").get(pk=replay.run_id)
        queued = replay_request(
            run=run, trigger=Trigger.TAPE, user=actor, tier=Tier.TAPE
        )
        AuditEvent.objects.record(
            actor=actor,
            action="tape_replay",
            replay_id=replay.pk,
            after={"replay": queued.pk, "tier": Tier.TAPE.value},
        )
    return queued


def undo_deadline(review: Review) -> datetime:
    return review.created_at + timedelta(seconds=settings.REPLAYHUB_REVIEW_UNDO_SECONDS)


def review_undo(*, review: Review, reviewer, now: datetime | None = None) -> Review:
    """Take back one's own latest decision on a replay, shortly after making it.

    The decision stays in the history, marked undone; the replay goes back to
    the queue in the band it had, held by the reviewer so they can decide
    again. A rerun's new replay is already queued, so a rerun is not taken
    back. Raises NotUndoable otherwise.
    """
    now = now or timezone.now()
    with transaction.atomic():
        locked = Replay.objects.select_for_update().only("id").get(pk=review.replay_id)
        latest = (
            Review.objects.standing()
            .filter(replay=locked)
            .order_by("-created_at", "-id")
            .first()
        )
        if latest is None or latest.pk != review.pk:
            raise NotUndoable("a later decision stands on this replay")
        if latest.reviewer_id != reviewer.pk:
            raise NotUndoable("only the reviewer who decided can take it back")
        if latest.decision == Review.Decision.RERUN:
            raise NotUndoable("a rerun is already queued and cannot be taken back")
        if now > undo_deadline(latest):
            raise NotUndoable("the time to take this decision back has passed")
        event = (
            AuditEvent.objects.filter(
                object_type="replay",
                object_id=str(locked.pk),
                action=f"review.{latest.decision}",
            )
            .order_by("-created_at", "-id")
            .first()
        )
        band = (event.before if event else {}).get("review_band")
        Review.objects.filter(pk=latest.pk).update(undone_at=now)
        latest.undone_at = now
        if band is not None:
            Replay.objects.return_to_review_queue(locked.pk, band=band)
        opinions.after_undo(review=latest)
        claim = _take(replay_id=locked.pk, reviewer=reviewer, now=now)
        AuditEvent.objects.record(
            actor=reviewer,
            action="review.undo",
            replay_id=locked.pk,
            before={
                "decision": latest.decision,
                "verdict": latest.verdict_after or latest.verdict_before,
                "review_band": None,
            },
            after={
                "verdict": latest.verdict_before,
                "review_band": band,
                "claimed_by": reviewer.get_username() if claim else None,
            },
        )
        transaction.on_commit(lambda: rollups.rollup_request(locked.pk))
        signals.send_after_commit(
            signals.review_decided,
            Review,
            replay_id=locked.pk,
            review_id=latest.pk,
            decision="undo",
            verdict=_standing_verdict(locked.pk),
        )
    return latest


def _standing_verdict(replay_id: int) -> str:
    """The verdict standing on a replay: its latest standing decision's, or
    the machine's."""
    review = (
        Review.objects.standing()
        .filter(replay_id=replay_id)
        .exclude(decision=Review.Decision.RERUN)
        .order_by("-created_at", "-id")
        .first()
    )
    if review is not None:
        return review.verdict_after
    return Replay.objects.values_list("verdict", flat=True).get(pk=replay_id)


CENT = Decimal("0.01")
# What the budgets page edits of a budget itself; each tier's limits are its
# share (``shares.share_fields``).
BUDGET_FIELDS = [
    "window_start_hour",
    "window_end_hour",
    "timezone",
    "tape_enabled",
    # The text tier's nightly settings.
    "text_enabled",
    "text_target",
    "text_judge",
    "agentic_after_text",
    "text_similarity_below",
    "text_score_at_most",
    "escalate_categories",
]
CAP_FIELDS = [
    "agentic_enabled",
    "time_limit_seconds",
    "test_time_limit_seconds",
    "memory_limit_mb",
    "max_processes",
    "max_disk_mb",
    "max_files",
    "max_tokens",
    "max_turns",
    "flake_reruns",
    "evidence_floor",
    "max_attempts",
]


def _snapshot(obj, names: list[str]) -> dict:
    return {name: _plain(getattr(obj, name)) for name in names}


def _plain(value):
    # JSON-friendly: money as a string, never a float.
    return (
        str(value)
        if value is not None and not isinstance(value, bool | int | list)
        else value
    )


def _share_snapshots(found: dict[str, tiers.Share], names: Iterable[str]) -> dict:
    # Money to the cent, as the column keeps it: 12.5 typed is 12.50 saved.
    return {
        tier: _snapshot(
            dataclasses.replace(
                found[tier], max_cost_usd=found[tier].max_cost_usd.quantize(CENT)
            ),
            shares.share_fields(tier),
        )
        for tier in names
    }


def budget_update(
    *,
    project,
    budget,
    actor,
    budget_data: dict,
    cap_data: dict,
    share_data: dict[str, dict] | None = None,
) -> bool:
    """Apply an edit of a project's budget, its tiers' shares (``share_data``:
    the fields given per tier) and its per-replay caps; audit what changed.

    The audit event keeps each field under its owner — ``budget``, ``caps``,
    and ``shares`` by tier — with its value before and after. Returns False
    when nothing changed (no audit event is written then).
    """
    share_data = share_data or {}
    with transaction.atomic():
        found = shares.budget_shares(budget)
        edited = {
            tier: dataclasses.replace(found[tier], **data)
            for tier, data in share_data.items()
        }
        before = {
            "budget": _snapshot(budget, BUDGET_FIELDS),
            "caps": _snapshot(project, CAP_FIELDS),
            "shares": _share_snapshots(found, edited),
        }
        for name, value in budget_data.items():
            setattr(budget, name, value)
        for name, value in cap_data.items():
            setattr(project, name, value)
        after = {
            "budget": _snapshot(budget, BUDGET_FIELDS),
            "caps": _snapshot(project, CAP_FIELDS),
            "shares": _share_snapshots(found | edited, edited),
        }
        if before == after:
            return False
        budget.save()
        project.save()
        for tier, share in edited.items():
            if before["shares"][tier] != after["shares"][tier]:
                BudgetShare.objects.update_or_create(
                    budget=budget, tier=tier, defaults=dataclasses.asdict(share)
                )
        # Each field under its owner: the night's budget and the replay's caps
        # both have a max_tokens, and every tier's share has one.
        changed_before, changed_after = _changed(before, after)
        AuditEvent.objects.create(
            actor=actor,
            action="budget.update",
            object_type="project",
            object_id=str(project.pk),
            before=changed_before,
            after=changed_after,
        )
    return True


def _changed(before: dict, after: dict) -> tuple[dict, dict]:
    """The entries of two snapshots that differ, nested as the snapshots are."""
    old: dict = {}
    new: dict = {}
    for key, value in after.items():
        was = before.get(key)
        if isinstance(value, dict):
            inner_old, inner_new = _changed(was or {}, value)
            if inner_new:
                old[key], new[key] = inner_old, inner_new
        elif was != value:
            old[key], new[key] = was, value
    return old, new
