"""The dashboard's context: built from nightly totals, cached per rollup version.

``build_dashboard`` is pure: series, chart geometry, tables and the banner
from the nightly totals. ``dashboard_context`` adds the reads around it, has
the charts and tables drawn by their templates, and keeps the result in the
cache while the rollups it was built from are unchanged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache
from django.utils.dateparse import parse_datetime

from replayhub.models import Project, RunSource
from reviews.render.drawing import draw_chart, draw_table
from reviews.trends.charts import (
    Frame,
    control_chart,
    coverage_chart,
    deferred_chart,
    mix_chart,
    overturn_chart,
    reason_chart,
)
from reviews.trends.forms import NIGHTS_SHOWN, TIER_CHOICES, TrendFilters
from reviews.trends.queries import (
    dashboard_sums,
    latest_rollup,
    model_choices,
    narrowed_out,
    rollups_version,
)
from reviews.trends.series import (
    VERDICT_COLORS,
    VERDICT_LABELS,
    VERDICTS,
    NightTotals,
    overturn_rows,
    pct,
    reason_color,
    reason_counts,
    reason_label,
    top_reasons,
    weekly_totals,
)
from reviews.trends.statistics import SIGMAS, TRAILING_NIGHTS, find_alarm, p_chart
from reviews.trends.tables import (
    control_table,
    coverage_table,
    mix_table,
    reason_table,
    tier_table,
)

# Windows longer than this are shown as weeks.
WEEKLY_AFTER = 180


@dataclass(frozen=True)
class LegendItem:
    color: str
    label: str
    code: str
    latest: str = ""


def slot_days(filters: TrendFilters) -> int:
    """Nights per bar, point and table row: 1, or 7 past :data:`WEEKLY_AFTER`."""
    return 7 if filters.nights > WEEKLY_AFTER else 1


def build_dashboard(
    *,
    totals: Sequence[NightTotals],
    decided: Mapping[str, Mapping[str, int]],
    filters: TrendFilters,
) -> dict[str, Any]:
    """Series, charts, tables and the banner from nightly totals; no database.

    Past :data:`WEEKLY_AFTER` nights, every series is summed to weeks first
    (counted from ``since``): two years of nights would be bars thinner than
    a pixel, tables of 731 rows and a page of a megabyte. The totals may
    come as weeks already (``nightly_sums(filters, 7)``); summing leaves
    those as they are.
    """
    step = slot_days(filters)
    if step > 1:
        totals = weekly_totals(totals, filters.since, step)
    frame = Frame(filters.since, filters.until, step=step)
    strip = Frame(filters.since, filters.until, height=110, top=10, step=step)
    rates = [n.as_rate() for n in totals]
    points = p_chart(rates)
    shown = [n for n in totals if filters.since <= n.night <= filters.until]
    shown_points = [p for p in points if filters.since <= p.night <= filters.until]
    alarm = find_alarm(rates, points, filters.since)
    reasons = top_reasons(
        shown, include=[s.reason for s in alarm.shifts] if alarm else []
    )
    latest = max((n for n in shown if n.attempted), key=lambda n: n.night, default=None)
    overturns = overturn_rows(shown, decided)

    def on_latest(count: int, digits: int = 1) -> str:
        return f"{pct(count / latest.attempted, digits)} ({count})" if latest else ""

    latest_reasons = (
        dict(zip(reasons, reason_counts(latest, reasons), strict=True))
        if latest
        else {}
    )

    newest_first = list(reversed(shown))
    attempted = {n.night: n.attempted for n in shown}
    return {
        "weekly": step > 1,
        "weekly_after": WEEKLY_AFTER,
        "has_data": bool(shown),
        "nights": newest_first,
        "latest": latest,
        "alarm": alarm,
        "reasons": [
            LegendItem(
                reason_color(r), reason_label(r), r, on_latest(latest_reasons.get(r, 0))
            )
            for r in reasons
        ],
        "verdicts": [
            LegendItem(
                VERDICT_COLORS[v],
                VERDICT_LABELS[v],
                str(v),
                on_latest(getattr(latest, v) if latest else 0, 0),
            )
            for v in VERDICTS
        ],
        "tables": {
            "reasons": reason_table(newest_first, reasons),
            "control": control_table(shown_points, attempted),
            "mix": mix_table(newest_first),
            "coverage": coverage_table(
                newest_first, deferred_known=not filters.narrowed
            ),
        },
        "overturns": overturns,
        "charts": {
            "reasons": reason_chart(shown, reasons, frame),
            "mix": mix_chart(shown, frame),
            "coverage": coverage_chart(shown, frame),
            "deferred": deferred_chart(shown, strip),
            "control": control_chart(shown_points, frame),
            "overturns": overturn_chart(overturns),
        },
        "sigmas": f"{SIGMAS:g}",
        "nights_shown": NIGHTS_SHOWN,
        "trailing": TRAILING_NIGHTS,
    }


CHART_TITLES = {
    "reasons": "Inconclusive rate per night, stacked by reason",
    "control": "p-chart of the inconclusive rate with its control limits",
    "mix": "Verdict mix per night",
    "coverage": "Coverage per night",
    "deferred": "Runs deferred by the budget per night",
    "overturns": "Overturn rate per automated verdict",
}


def draw(built: dict[str, Any]) -> dict[str, Any]:
    """The built dashboard with its charts and tables drawn as markup.

    Drawn once per build and cached with it: a 56-night page has about a
    thousand SVG elements and table cells (``drawing`` says what they cost).
    """
    return {
        **built,
        "charts": {
            name: draw_chart(chart, chart_id=f"c-{name}", title=CHART_TITLES[name])
            for name, chart in built["charts"].items()
        },
        "tables": {name: draw_table(table) for name, table in built["tables"].items()},
    }


# Built dashboards are cached: a lead's page over all projects sums thousands
# of rollup rows, and the rollups change about once a night.
CACHE_SECONDS = 6 * 3600


def _cache_key(filters: TrendFilters, version: tuple) -> str:
    raw = repr(
        (
            filters.since,
            filters.until,
            filters.project_id,
            filters.model,
            filters.source,
            filters.tier,
            sorted(filters.hidden_project_ids),
        )
    )
    digest = hashlib.sha256(f"{raw}{version}".encode()).hexdigest()
    return f"replayhub:trends:{digest}"


def dashboard_context(filters: TrendFilters) -> dict[str, Any]:
    """Everything the page needs, read from Rollup rows only.

    A cached build is used while the rollups it was built from are unchanged
    (one cheap query); otherwise two more queries, the pure building and the
    drawing.
    """
    version = rollups_version(filters)
    key = _cache_key(filters, version)
    built = cache.get(key)
    if built is None:
        totals, decided, tiers = (
            dashboard_sums(filters, slot_days(filters)) if version[0] else ([], {}, [])
        )
        built = draw(build_dashboard(totals=totals, decided=decided, filters=filters))
        built["models"] = model_choices(filters) if version[0] else []
        built["tier_rates"] = draw_table(tier_table(tiers)) if tiers else ""
        cache.set(key, built, CACHE_SECONDS)
    return {
        **built,
        "filters": filters,
        "projects": list(Project.objects.values_list("slug", flat=True)),
        "sources": RunSource.choices,
        "tiers": TIER_CHOICES,
        "latest_rollup": None if built["has_data"] else latest_rollup(filters),
        "narrowed_out": not built["has_data"] and narrowed_out(filters),
        # When the newest of the figures shown was computed: a decision
        # recomputes its night's rollup at once, a night's close the rest.
        "computed_at": parse_datetime(version[2]) if version[2] else None,
    }
