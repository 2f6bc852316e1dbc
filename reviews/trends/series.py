"""Nightly totals and what the dashboard derives from them, with no database.

The totals are sums over rollup rows (``queries.nightly_sums``); everything
here is plain arithmetic over them, plus the names and colors a reason code or
a verdict is shown with on every chart, table and legend.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

from replayhub.verdicts import REASON_TEXT, Verdict
from reviews.trends.statistics import NightRate

# Reasons stacked one by one; the rest are drawn together as "other".
TOP_REASONS = 6
OTHER = "other"

VERDICTS = [
    Verdict.IDENTICAL,
    Verdict.EQUIVALENT,
    Verdict.DIVERGENT,
    Verdict.INCONCLUSIVE,
]
VERDICT_LABELS = {verdict: verdict.label for verdict in VERDICTS}
VERDICT_COLORS = {
    Verdict.IDENTICAL: "#2f8a4f",
    Verdict.EQUIVALENT: "#3454d1",
    Verdict.DIVERGENT: "#c0392b",
    Verdict.INCONCLUSIVE: "#d9a21b",
}
# One fixed color per inconclusive reason, so a reason keeps its color from
# one filter to the next; harness failures warm, refusals cool.
REASON_COLORS = {
    "timeout": "#e07b00",
    "cap_fired": "#a65c00",
    "sandbox_unavailable": "#8e44ad",
    "fixture_failed": "#b57edc",
    "no_change": "#6b7a8f",
    "agent_failed": "#495057",
    "worker_lost": "#d6336c",
    "harness_error": "#a61e4d",
    "provider_error": "#c2255c",
    "tape_diverged": "#e8590c",
    "setup_failed": "#862e9c",
    "image_mismatch": "#5c940d",
    "repo_unreachable": "#d9480f",
    "host_failed": "#9c36b5",
    "base_untrusted": "#1098ad",
    "no_test_command": "#0b7285",
    "tests_skipped": "#20c997",
    "tests_not_run": "#1c7ed6",
    "below_evidence_floor": "#5f3dc4",
    "flaky_tests": "#c9a100",
    "baseline_failed": "#e03131",
}
UNKNOWN_REASON_COLORS = ["#495057", "#868e96", "#364fc7", "#2b8a3e"]
OTHER_COLOR = "#b8bfca"


def pct(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "—"
    return f"{value * 100:.{digits}f}%"


def reason_label(code: str) -> str:
    if code == OTHER:
        return "Other reasons"
    if not code:
        return "No reason code"
    return REASON_TEXT.get(code, code)


def reason_color(reason: str) -> str:
    if reason == OTHER:
        return OTHER_COLOR
    if reason in REASON_COLORS:
        return REASON_COLORS[reason]
    # Unknown codes still get a stable color of their own.
    return UNKNOWN_REASON_COLORS[sum(map(ord, reason)) % len(UNKNOWN_REASON_COLORS)]


# The tiers rollups count, each named for the drift its rates point at: a
# tape replay's model answers are fixed, so its divergence is the
# environment's; a live replay's may be the model's too.
TIER_LABELS = {
    "agentic": "agentic (model drift)",
    "tape": "tape (environment drift)",
}


@dataclass(frozen=True)
class TierTotals:
    """The shown nights summed for one tier."""

    tier: str
    attempted: int = 0
    divergent: int = 0
    inconclusive: int = 0

    @property
    def label(self) -> str:
        return TIER_LABELS.get(self.tier, self.tier)

    @property
    def divergent_rate(self) -> float | None:
        return self.divergent / self.attempted if self.attempted else None

    @property
    def inconclusive_rate(self) -> float | None:
        return self.inconclusive / self.attempted if self.attempted else None


@dataclass(frozen=True)
class NightTotals:
    """One night summed over the filtered rollup rows."""

    night: date
    attempted: int = 0
    identical: int = 0
    equivalent: int = 0
    divergent: int = 0
    inconclusive: int = 0
    deferred: int = 0
    by_reason: Mapping[str, int] = field(default_factory=dict)

    @property
    def reached(self) -> int:
        return self.attempted - self.inconclusive

    @property
    def coverage(self) -> float | None:
        return self.reached / self.attempted if self.attempted else None

    @property
    def rate(self) -> float | None:
        return self.inconclusive / self.attempted if self.attempted else None

    @property
    def rate_text(self) -> str:
        return pct(self.rate)

    @property
    def coverage_text(self) -> str:
        return pct(self.coverage)

    def as_rate(self) -> NightRate:
        return NightRate(self.night, self.attempted, self.inconclusive, self.by_reason)


def weekly_totals(
    nights: Iterable[NightTotals], since: date, days: int = 7
) -> list[NightTotals]:
    """The nights summed into weeks counted from ``since`` (oldest first).

    Each week is named by its first night (``since``, ``since`` + 7, ...;
    nights before ``since`` fall in the weeks before it). A week holds the
    nights of it that have totals; the last one may be short.
    """
    weeks: dict[date, list[NightTotals]] = defaultdict(list)
    for n in nights:
        start = since + timedelta(days=(n.night - since).days // days * days)
        weeks[start].append(n)
    summed = []
    for start in sorted(weeks):
        group = weeks[start]
        reasons: dict[str, int] = defaultdict(int)
        for n in group:
            for reason, count in n.by_reason.items():
                reasons[reason] += count
        summed.append(
            NightTotals(
                night=start,
                attempted=sum(n.attempted for n in group),
                identical=sum(n.identical for n in group),
                equivalent=sum(n.equivalent for n in group),
                divergent=sum(n.divergent for n in group),
                inconclusive=sum(n.inconclusive for n in group),
                deferred=sum(n.deferred for n in group),
                by_reason=dict(reasons),
            )
        )
    return summed


def top_reasons(
    nights: Iterable[NightTotals],
    most: int = TOP_REASONS,
    include: Sequence[str] = (),
) -> list[str]:
    """The reasons stacked one by one, commonest first; ``other`` when any remain.

    Reasons in ``include`` (those the banner names) always get their own
    color, even when a single night made them common.
    """
    totals: dict[str, int] = defaultdict(int)
    unexplained = 0
    for n in nights:
        for reason, count in n.by_reason.items():
            totals[reason] += count
        unexplained += max(n.inconclusive - sum(n.by_reason.values()), 0)
    ordered = sorted((r for r in totals if totals[r]), key=lambda r: (-totals[r], r))
    named = [r for r in ordered if r in include]
    rest = [r for r in ordered if r not in include][: max(most - len(named), 0)]
    shown = [r for r in ordered if r in named or r in rest]
    if len(ordered) > len(shown) or unexplained:
        shown.append(OTHER)
    return shown


def reason_counts(night: NightTotals, reasons: Sequence[str]) -> list[int]:
    """The night's count for each of ``reasons``; ``other`` takes the rest.

    Inconclusive replays without a reason in the rollup count as other too, so
    the stack always adds up to the inconclusive rate.
    """
    known = set(reasons)
    counts = []
    for reason in reasons:
        if reason == OTHER:
            other = sum(v for r, v in night.by_reason.items() if r not in known)
            other += max(night.inconclusive - sum(night.by_reason.values()), 0)
            counts.append(other)
        else:
            counts.append(night.by_reason.get(reason, 0))
    return counts


@dataclass(frozen=True)
class OverturnRow:
    verdict: str
    label: str
    color: str
    automated: int
    confirmed: int
    overturned: int

    @property
    def decided(self) -> int:
        return self.confirmed + self.overturned

    @property
    def rate(self) -> float | None:
        return self.overturned / self.decided if self.decided else None

    @property
    def rate_text(self) -> str:
        return pct(self.rate)


def overturn_rows(
    nights: Sequence[NightTotals], decided: Mapping[str, Mapping[str, int]]
) -> list[OverturnRow]:
    return [
        OverturnRow(
            verdict=str(verdict),
            label=VERDICT_LABELS[verdict],
            color=VERDICT_COLORS[verdict],
            automated=sum(getattr(n, verdict) for n in nights),
            confirmed=decided.get("confirmed", {}).get(verdict, 0),
            overturned=decided.get("overturned", {}).get(verdict, 0),
        )
        for verdict in VERDICTS
    ]
