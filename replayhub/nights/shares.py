"""A night's shares, one row per tier, and the one way every tier spends them.

Each tier (tape, text, agentic; ``tiers.SHARE_TIERS``) has a ``NightShare``
row per night with the same limit/reserved/used columns. Every tier admits
through ``reserve`` — one conditional UPDATE of its share row, after locking
the night — and ends through ``settle``, which gives the reservation back and
charges what was spent where ``tiers.charges`` says. Candidates a share could
not take are counted on it (``defer``). The night's ``CheckConstraint`` on
the share row is the backstop: no caller can reserve past a limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.db.models import F

from replayhub.models import Budget, Night, NightShare, NightStatus
from replayhub.nights import arithmetic, tiers
from replayhub.nights.arithmetic import DIMENSIONS, Amounts

# The budget's field for each dimension of a share (sandbox time is set in
# minutes there, counted in seconds on the night).
SHARE_FIELD = {
    "replays": "max_replays",
    "sandbox_seconds": "max_sandbox_minutes",
    "tokens": "max_tokens",
    "cost_usd": "max_cost_usd",
}


def share_fields(tier: str) -> list[str]:
    """The fields of ``tier``'s BudgetShare that it budgets."""
    return [SHARE_FIELD[d] for d in tiers.budgeted(tier)]


@dataclass
class NightReport:
    """What one admission of one tier did. The agentic tier's report, as
    ``services.night_run`` returns it, keeps the other tiers' of the same
    night in ``others``."""

    tier: str
    night: Night | None = None
    admitted: list[int] = field(default_factory=list)
    deferred: int = 0
    # Runs an earlier admission of the same night had admitted already.
    already: int = 0
    skipped_reason: str = ""
    others: dict[str, NightReport] = field(default_factory=dict)

    def of(self, tier: str) -> NightReport | None:
        """This report or the one of ``tier`` it keeps; None when that tier
        was not asked to admit."""
        return self if tier == self.tier else self.others.get(tier)


def budget_shares(budget: Budget) -> dict[str, tiers.Share]:
    """Each tier's share of ``budget``: its row, else the tier's default (an
    unsaved budget has no rows). Reads ``budget.shares`` (prefetch it for a
    page of budgets)."""
    saved = (
        {row.tier: row.as_share() for row in budget.shares.all()} if budget.pk else {}
    )
    return {
        tier: saved.get(tier, tiers.DEFAULT_SHARES[tier]) for tier in tiers.SHARE_TIERS
    }


def limits_of(budget: Budget) -> dict[str, Amounts]:
    """What a night of ``budget`` may spend, per tier, in the night's units."""
    return {
        tier: tiers.night_limits(tier, share)
        for tier, share in budget_shares(budget).items()
    }


def open_shares(night: Night, budget: Budget) -> None:
    """Give a new night its shares, copied from the budget: editing the budget
    mid-night changes the next night, not this one. A share the night has
    already is left as it is."""
    NightShare.objects.bulk_create(
        [
            NightShare(
                night=night,
                tier=tier,
                limit_replays=limits.replays,
                limit_sandbox_seconds=limits.sandbox_seconds,
                limit_tokens=limits.tokens,
                limit_cost_usd=limits.cost_usd,
            )
            for tier, limits in limits_of(budget).items()
        ],
        ignore_conflicts=True,
    )


def _is_open(night_id: int, now: datetime) -> bool:
    """Whether the night admits at ``now``; its row stays locked (against
    a concurrent close) until the caller's transaction ends."""
    row = (
        # NO KEY: replays being created on this night (a foreign key to it)
        # are not held up; a close, or another reservation, waits.
        Night.objects.select_for_update(no_key=True)
        .filter(pk=night_id)
        .values_list("status", "window_end")
        .first()
    )
    return row is not None and row[0] == NightStatus.OPEN and now < row[1]


def reserve(*, night: Night, tier: str, amount: Amounts, now: datetime) -> bool:
    """Reserve ``amount`` on every dimension of the night's ``tier`` share at
    once, or nothing. A dimension the tier does not budget is not its to
    reserve: only the tier's own dimensions of ``amount`` are taken.

    The night row is locked and checked open first; the reservation is then
    one conditional UPDATE whose WHERE reads only the share row's own columns.
    On PostgreSQL a concurrent UPDATE of the same row makes this one re-check
    its WHERE against the row as committed, so two workers can never both
    take the last of a dimension. (A join or a subquery through the night in
    that WHERE is not re-checked that way, which would allow an overspend.)
    """
    amount = tiers.only(tier, amount)
    over = {
        f"reserved_{d}__lte": F(f"limit_{d}") - F(f"used_{d}") - getattr(amount, d)
        for d in DIMENSIONS
    }
    with transaction.atomic():
        if not _is_open(night.pk, now):
            return False
        return bool(
            NightShare.objects.filter(night_id=night.pk, tier=tier, **over).update(
                **{
                    f"reserved_{d}": F(f"reserved_{d}") + getattr(amount, d)
                    for d in DIMENSIONS
                }
            )
        )


def admit(
    *, night: Night, tier: str, estimate: Amounts, wanted: int, now: datetime
) -> int:
    """Reserve as many replays of one ``estimate`` as fit, up to ``wanted``,
    together (one conditional UPDATE per try); how many were reserved."""
    estimate = tiers.only(tier, estimate)
    count = arithmetic.how_many_fit(estimate, remaining(night, tier), wanted)
    while count and not reserve(
        night=night, tier=tier, amount=estimate * count, now=now
    ):
        # Someone else reserved meanwhile, or the night was closed.
        with transaction.atomic():
            if not _is_open(night.pk, now):
                return 0
        count = arithmetic.how_many_fit(estimate, remaining(night, tier), count)
    return count


def settle(night_id: int, tier: str, *, release: Amounts, actual: Amounts) -> None:
    """Give a replay's reservation back to its ``tier`` share and charge what
    it spent (``tiers.charges``: its own dimensions there, the others to the
    agentic share). Once per replay is the caller's part (the replay's own
    ``settled`` flag); call it inside the transaction that ends the replay."""
    release = tiers.only(tier, release)
    for share_tier, spent in tiers.charges(tier, actual).items():
        back = release if share_tier == tier else Amounts()
        changes = {f"used_{d}": F(f"used_{d}") + getattr(spent, d) for d in DIMENSIONS}
        changes |= {
            f"reserved_{d}": F(f"reserved_{d}") - getattr(back, d) for d in DIMENSIONS
        }
        NightShare.objects.filter(night_id=night_id, tier=share_tier).update(**changes)


def charged_night(
    *, project_id: int, night_id: int | None, now: datetime
) -> int | None:
    """The night a replay is charged to: the one that admitted it, else the
    project's night running at ``now`` (an explicit replay, a reviewer's
    rerun); None when there is none."""
    if night_id is not None:
        return night_id
    return (
        Night.objects.filter(
            project_id=project_id, window_start__lte=now, window_end__gt=now
        )
        .values_list("pk", flat=True)
        .first()
    )


def remaining(night: Night | int, tier: str) -> Amounts:
    """What the night's ``tier`` share has left to admit, read now; nothing
    for a night without that share."""
    night_id = night if isinstance(night, int) else night.pk
    share = NightShare.objects.filter(night_id=night_id, tier=tier).first()
    if share is None:
        return Amounts()
    return arithmetic.remaining(
        limits=share.amounts("limit"),
        reserved=share.amounts("reserved"),
        used=share.amounts("used"),
    )


def defer(night: Night, tier: str, count: int) -> None:
    """Count the candidates the ``tier`` share could not take at this admission."""
    NightShare.objects.filter(night_id=night.pk, tier=tier).update(deferred=count)


def defer_one(night_id: int, tier: str) -> None:
    """One more candidate deferred: an admitted replay the night ended before
    a worker reached it."""
    NightShare.objects.filter(night_id=night_id, tier=tier).update(
        deferred=F("deferred") + 1
    )
