"""The nightly tables beside the charts, as plain data.

Every chart has a table with its numbers (for reading exact values, and for
screen readers); ``drawing.draw_table`` draws one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date

from reviews.trends.series import (
    VERDICT_LABELS,
    VERDICTS,
    NightTotals,
    TierTotals,
    pct,
    reason_color,
    reason_counts,
    reason_label,
)
from reviews.trends.statistics import ChartPoint


@dataclass(slots=True)
class Head:
    text: str
    numeric: bool = True
    title: str = ""
    color: str = ""


@dataclass(slots=True)
class Cell:
    text: str
    cls: str = "num"


@dataclass(slots=True)
class Table:
    """A table of numbers; each row starts with its night, as the row's header."""

    id: str
    head: list[Head]
    rows: list[tuple[str, list[Cell], str]]  # (night, cells, row class)


def _numbers(*values) -> list[Cell]:
    return [Cell(str(value)) for value in values]


def reason_table(nights: Sequence[NightTotals], reasons: Sequence[str]) -> Table:
    head = [
        Head("Night", numeric=False),
        Head("Attempted"),
        Head("Inconcl.", title="Inconclusive"),
        Head("Rate"),
        # By name, as the legend above names them; the code on hover.
        *(Head(reason_label(r), title=r, color=reason_color(r)) for r in reasons),
    ]
    rows = [
        (
            n.night.isoformat(),
            _numbers(n.attempted, n.inconclusive, n.rate_text)
            + _numbers(*reason_counts(n, reasons)),
            "",
        )
        for n in nights
    ]
    return Table("table-reasons", head, rows)


def control_table(points: Sequence[ChartPoint], attempted: Mapping[date, int]) -> Table:
    head = [
        Head("Night", numeric=False),
        Head("Attempted"),
        Head("Rate"),
        Head("CL", title="Center line: the pooled rate of the trailing nights"),
        Head("LCL", title="Lower control limit"),
        Head("UCL", title="Upper control limit"),
        Head("Status", numeric=False),
    ]
    rows = []
    for p in reversed(points):
        if p.out_of_control:
            status = Cell("out of control", "status ooc")
        elif p.center is None:
            status = Cell("no history", "status muted")
        else:
            status = Cell("in control", "status muted")
        cells = _numbers(
            attempted.get(p.night, 0),
            pct(p.rate),
            pct(p.center),
            pct(p.lower),
            pct(p.upper),
        )
        rows.append(
            (p.night.isoformat(), [*cells, status], "ooc" if p.out_of_control else "")
        )
    return Table("table-control", head, rows)


def mix_table(nights: Sequence[NightTotals]) -> Table:
    head = [
        Head("Night", numeric=False),
        Head("Attempted"),
        *(Head(VERDICT_LABELS[v]) for v in VERDICTS),
    ]
    rows = [
        (
            n.night.isoformat(),
            _numbers(n.attempted, *(getattr(n, v) for v in VERDICTS)),
            "",
        )
        for n in nights
    ]
    return Table("table-mix", head, rows)


def coverage_table(nights: Sequence[NightTotals], *, deferred_known: bool) -> Table:
    head = [
        Head("Night", numeric=False),
        Head("Attempted"),
        Head("Verdicts reached"),
        Head("Coverage"),
        Head("Deferred"),
    ]
    rows = [
        (
            n.night.isoformat(),
            _numbers(
                n.attempted,
                n.reached,
                n.coverage_text,
                n.deferred if deferred_known else "—",
            ),
            "",
        )
        for n in nights
    ]
    return Table("table-coverage", head, rows)


def tier_table(tiers: Sequence[TierTotals]) -> Table:
    """The shown nights' divergent and inconclusive rates, one row per tier."""
    head = [
        Head("Tier", numeric=False),
        Head("Attempted"),
        Head("Divergent"),
        Head("Div. rate", title="Divergent rate"),
        Head("Inconcl.", title="Inconclusive"),
        Head("Inconcl. rate", title="Inconclusive rate"),
    ]
    rows = [
        (
            t.label,
            [
                *_numbers(t.attempted, t.divergent),
                Cell(pct(t.divergent_rate)),
                *_numbers(t.inconclusive),
                Cell(pct(t.inconclusive_rate)),
            ],
            "",
        )
        for t in tiers
    ]
    return Table("table-tiers", head, rows)
