"""Statistics for the trends dashboard, as pure functions over nightly counts.

The inconclusive rate is a proportion (inconclusive verdicts / verdicts reached
plus inconclusive, i.e. replays attempted), so it is watched on a p-chart: each
night is compared with 3-sigma limits computed from the nights before it, with
the sigma of that night's own sample size. ``find_alarm`` picks the newest
night out of control and the reasons that moved that night.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from itertools import accumulate

TRAILING_NIGHTS = 28
SIGMAS = 3.0


@dataclass(frozen=True)
class NightRate:
    night: date
    attempted: int
    inconclusive: int
    by_reason: Mapping[str, int]

    @property
    def rate(self) -> float | None:
        return self.inconclusive / self.attempted if self.attempted else None


@dataclass(frozen=True)
class ChartPoint:
    night: date
    rate: float | None
    center: float | None
    upper: float | None
    lower: float | None
    out_of_control: bool


def limits(
    history: Sequence[NightRate], sample_size: int
) -> tuple[float, float, float] | None:
    """(center, lower, upper) for a night of ``sample_size`` replays, or None.

    The center is the pooled rate of the history; there are no limits without
    history or for an empty night.
    """
    return _limits(
        sum(n.attempted for n in history),
        sum(n.inconclusive for n in history),
        sample_size,
    )


def _limits(
    attempted: int, inconclusive: int, sample_size: int
) -> tuple[float, float, float] | None:
    if not attempted or not sample_size:
        return None
    center = inconclusive / attempted
    sigma = math.sqrt(center * (1 - center) / sample_size)
    return center, max(0.0, center - SIGMAS * sigma), min(1.0, center + SIGMAS * sigma)


def p_chart(
    nights: Sequence[NightRate], trailing: int = TRAILING_NIGHTS
) -> list[ChartPoint]:
    """One point per night (oldest first), each judged against the nights before."""
    ordered = sorted(nights, key=lambda n: n.night)
    # Running totals: night i's history, the nights [i - trailing, i), is a
    # difference of two of them rather than a sum over the window each night.
    attempted = list(accumulate((n.attempted for n in ordered), initial=0))
    inconclusive = list(accumulate((n.inconclusive for n in ordered), initial=0))
    points = []
    for i, night in enumerate(ordered):
        start = max(0, i - trailing)
        bounds = _limits(
            attempted[i] - attempted[start],
            inconclusive[i] - inconclusive[start],
            night.attempted,
        )
        if bounds is None or night.rate is None:
            points.append(ChartPoint(night.night, night.rate, None, None, None, False))
            continue
        center, lower, upper = bounds
        out = night.rate > upper or night.rate < lower
        points.append(ChartPoint(night.night, night.rate, center, upper, lower, out))
    return points


@dataclass(frozen=True)
class ReasonShift:
    reason: str
    rate: float
    before: float
    upper: float

    @property
    def change(self) -> float:
        return self.rate - self.before


def reasons_that_moved(
    night: NightRate, history: Sequence[NightRate]
) -> list[ReasonShift]:
    """The reasons whose own rate that night is above their 3-sigma limit.

    Each reason is charted like the total (its count over replays attempted),
    so the banner can say which reasons drove an out-of-control night. Largest
    increase first.
    """
    if not night.attempted:
        return []
    attempted = sum(n.attempted for n in history)
    shifts = []
    reasons = set(night.by_reason)
    for reason in reasons:
        count = night.by_reason.get(reason, 0)
        rate = count / night.attempted
        before = (
            sum(n.by_reason.get(reason, 0) for n in history) / attempted
            if attempted
            else 0.0
        )
        sigma = math.sqrt(before * (1 - before) / night.attempted)
        upper = before + SIGMAS * sigma
        if rate > upper:
            shifts.append(ReasonShift(reason, rate, before, upper))
    return sorted(shifts, key=lambda s: (-s.change, s.reason))


@dataclass(frozen=True)
class Shift:
    """A reason that moved on an alarm night: its count, rates and own limit."""

    reason: str
    count: int
    rate: float
    before: float
    limit: float


@dataclass(frozen=True)
class Alarm:
    """The latest night out of control, and the reasons that moved that night."""

    night: date
    rate: float | None
    center: float | None
    upper: float | None
    lower: float | None
    inconclusive: int
    attempted: int
    high: bool
    shifts: list[Shift]
    latest: date
    latest_in_control: bool


def find_alarm(
    nights: Sequence[NightRate], points: Sequence[ChartPoint], since: date
) -> Alarm | None:
    """The newest out-of-control night from ``since`` on, with its moved reasons.

    ``points`` is ``p_chart(nights)``; ``nights`` may start before ``since``
    (the trailing window the limits and the reasons' history come from).
    """
    shown = [p for p in points if p.night >= since]
    breached = [p for p in shown if p.out_of_control]
    if not breached:
        return None
    point = breached[-1]
    ordered = sorted(nights, key=lambda n: n.night)
    index = next(i for i, n in enumerate(ordered) if n.night == point.night)
    night = ordered[index]
    history = ordered[max(0, index - TRAILING_NIGHTS) : index]
    shifts = [
        Shift(
            reason=s.reason,
            count=night.by_reason.get(s.reason, 0),
            rate=s.rate,
            before=s.before,
            limit=s.upper,
        )
        for s in reasons_that_moved(night, history)
    ]
    latest = max((p for p in shown if p.rate is not None), key=lambda p: p.night)
    return Alarm(
        night=point.night,
        rate=point.rate,
        center=point.center,
        upper=point.upper,
        lower=point.lower,
        inconclusive=night.inconclusive,
        attempted=night.attempted,
        high=(point.rate or 0) > (point.upper or 0),
        shifts=shifts,
        latest=latest.night,
        latest_in_control=not latest.out_of_control,
    )
