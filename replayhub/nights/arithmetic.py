"""Budget arithmetic and the nightly window, as pure functions over plain data.

A night has four dimensions: replays, sandbox seconds, tokens and money. A
replay is admitted only when its estimate fits in what is neither used nor
reserved; it settles its actual cost when it ends, giving back the rest of its
reservation. Money is ``Decimal`` throughout; nothing here touches the database.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

DIMENSIONS = ("replays", "sandbox_seconds", "tokens", "cost_usd")
# How many of a project's recent replays the estimate looks at.
ESTIMATE_WINDOW = 20


@dataclass(frozen=True)
class Amounts:
    """An amount on every budget dimension."""

    replays: int = 0
    sandbox_seconds: int = 0
    tokens: int = 0
    cost_usd: Decimal = Decimal(0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "cost_usd", Decimal(self.cost_usd))

    def __add__(self, other: Amounts) -> Amounts:
        return Amounts(*(getattr(self, d) + getattr(other, d) for d in DIMENSIONS))

    def __sub__(self, other: Amounts) -> Amounts:
        return Amounts(*(getattr(self, d) - getattr(other, d) for d in DIMENSIONS))

    def __mul__(self, times: int) -> Amounts:
        return Amounts(*(getattr(self, d) * times for d in DIMENSIONS))

    def clamp(self) -> Amounts:
        """No dimension below zero."""
        return Amounts(*(max(getattr(self, d), 0) for d in DIMENSIONS))

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def as_json(self) -> dict:
        """As a replay's reservation stores it: money as a string, never a float."""
        return self.as_dict() | {"cost_usd": str(self.cost_usd)}

    @classmethod
    def from_dict(cls, data: dict) -> Amounts:
        return cls(
            replays=int(data.get("replays", 0)),
            sandbox_seconds=int(data.get("sandbox_seconds", 0)),
            tokens=int(data.get("tokens", 0)),
            cost_usd=Decimal(str(data.get("cost_usd", 0))),
        )


def remaining(*, limits: Amounts, reserved: Amounts, used: Amounts) -> Amounts:
    """What is left to admit; an overrun leaves zero, never a negative amount."""
    return (limits - reserved - used).clamp()


def blocking_dimensions(estimate: Amounts, left: Amounts) -> list[str]:
    """The dimensions on which ``estimate`` does not fit; empty when it fits."""
    return [d for d in DIMENSIONS if getattr(estimate, d) > getattr(left, d)]


def fits(estimate: Amounts, left: Amounts) -> bool:
    return not blocking_dimensions(estimate, left)


def how_many_fit(estimate: Amounts, left: Amounts, wanted: int) -> int:
    """How many replays of ``estimate`` fit in ``left`` (at most ``wanted``)."""
    count = wanted
    for dimension in DIMENSIONS:
        per_replay = getattr(estimate, dimension)
        if per_replay > 0:
            count = min(count, int(getattr(left, dimension) // per_replay))
    return max(count, 0)


def estimate(*, recent: list[Amounts], caps: Amounts) -> Amounts:
    """One replay's expected cost: the median of recent actuals, else the caps.

    Every dimension is at most its cap when it has one (a zero cap means the
    dimension is not capped per replay), and one replay always counts as one.
    """
    if not recent:
        return Amounts(1, caps.sandbox_seconds, caps.tokens, caps.cost_usd)
    recent = recent[-ESTIMATE_WINDOW:]

    def median(dimension: str):
        return statistics.median_low([getattr(a, dimension) for a in recent])

    def capped(value, cap):
        return min(value, cap) if cap else value

    return Amounts(
        replays=1,
        sandbox_seconds=capped(int(median("sandbox_seconds")), caps.sandbox_seconds),
        tokens=capped(int(median("tokens")), caps.tokens),
        cost_usd=capped(Decimal(median("cost_usd")), caps.cost_usd),
    )


@dataclass(frozen=True)
class ReplayCaps:
    """The limits handed to one replay: the project's, cut to what is left."""

    wall_seconds: int
    max_tokens: int | None


def caps_for_replay(
    *, time_limit_seconds: int, max_tokens: int | None, left: Amounts
) -> ReplayCaps:
    """A replay never starts with a cap larger than what remains in the night.

    The sandbox-seconds dimension bounds the agent's wall time (at least one
    second, so an admitted replay can start at all); the token dimension bounds
    the agent's token cap.
    """
    wall = max(1, min(time_limit_seconds, left.sandbox_seconds))
    tokens = left.tokens if max_tokens is None else min(max_tokens, left.tokens)
    return ReplayCaps(wall_seconds=wall, max_tokens=tokens)


def window_for(
    night: date, *, start_hour: int, end_hour: int, tz: str
) -> tuple[datetime, datetime]:
    """The [start, end) in UTC of the night that begins on ``night`` (local date).

    A window whose end hour is not after its start hour ends the next day
    (22 → 6). Across a DST change the local wall-clock hours are kept: the
    window is an hour shorter or longer that night. A start in a skipped local
    hour moves forward to the first valid instant.
    """
    zone = ZoneInfo(tz)
    end_day = night if end_hour > start_hour else night + timedelta(days=1)
    return (
        _local(night, start_hour, zone),
        _local(end_day, end_hour, zone),
    )


def _local(day: date, hour: int, zone: ZoneInfo) -> datetime:
    # A wall time skipped by DST maps (fold=0) to the instant right after the
    # gap. The result is in UTC: arithmetic between two aware datetimes of the
    # same zone would otherwise ignore the DST change.
    return datetime.combine(day, time(hour), tzinfo=zone).astimezone(UTC)


def night_containing(
    now: datetime, *, start_hour: int, end_hour: int, tz: str
) -> date | None:
    """The local date of the night whose window contains ``now``, if any."""
    local = now.astimezone(ZoneInfo(tz))
    for day in (local.date(), local.date() - timedelta(days=1)):
        start, end = window_for(day, start_hour=start_hour, end_hour=end_hour, tz=tz)
        if start <= now < end:
            return day
    return None
