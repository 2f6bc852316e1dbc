"""The dashboard's reads: rollup rows only, never the replays.

One project's dashboard reads its ``Rollup`` rows; the all-projects dashboard
reads ``RollupTotal``, the same nights already summed over every project (a
few rows a night instead of one per project and model: summing the JSON
counts of fifty projects' rows was most of that page's time).
``rollups_version`` is the one query a cached dashboard costs; a fresh build
adds ``dashboard_sums`` (counts, reasons and decisions per night, and per
tier, in one query)
and ``model_choices``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from datetime import date, timedelta
from typing import Any, TypeAlias

from django.db import connection
from django.db.models import Count, Max, QuerySet

from replayhub.models import Rollup, RollupTotal
from replayhub.verdicts import INCONCLUSIVE_REASONS
from reviews.queue_reads import MODEL_NAMES_SHOWN, model_matching
from reviews.trends.forms import TrendFilters
from reviews.trends.series import VERDICTS, NightTotals, TierTotals
from reviews.trends.statistics import TRAILING_NIGHTS

# The NightCounts tables; the abstract model itself has no manager to read with.
Counted: TypeAlias = type[Rollup] | type[RollupTotal]


def counted(filters: TrendFilters) -> Counted:
    """The rows the dashboard of ``filters`` sums: one project's rollups, or
    the all-projects totals."""
    if filters.project_id is not None or filters.hidden_project_ids:
        # The totals are summed over every project: none can be left out.
        return Rollup
    return RollupTotal


def models_matching(
    filters: TrendFilters, *, every_night: bool = False
) -> QuerySet[Any]:
    """The model names the Model filter matches (the rule every page's Model
    filter keeps, ``model_matching``), at most ``MODEL_NAMES_SHOWN``. The
    rollups are keyed by the exact name: the names are chosen first, from the
    all-projects totals (a few rows a night) of the nights read unless
    ``every_night``, on the index that leads with the date, and the rollups
    are read by them."""
    names: QuerySet[Any] = RollupTotal.objects.filter(
        model_matching(filters.model, "model")
    )
    if not every_night:
        names = names.filter(date__gte=history_start(filters), date__lte=filters.until)
    return names.order_by("model").values("model").distinct()[:MODEL_NAMES_SHOWN]


def rollups(
    filters: TrendFilters,
    since: date | None = None,
    *,
    cls: Counted = Rollup,
) -> QuerySet[Any]:
    """The rows of ``cls`` the filters select, from ``since`` if given."""
    # Of either table; only Rollup's are filtered by project (see counted).
    rows: QuerySet[Any] = cls.objects.filter(
        date__gte=since or filters.since, date__lte=filters.until
    )
    if filters.project_id is not None:
        rows = rows.filter(project_id=filters.project_id)
    if filters.hidden_project_ids:
        rows = rows.exclude(project_id__in=filters.hidden_project_ids)
    if filters.model:
        rows = rows.filter(model__in=models_matching(filters))
    if filters.source:
        rows = rows.filter(source=filters.source)
    if filters.tier:
        rows = rows.filter(tier=filters.tier)
    return rows


def narrowed_out(filters: TrendFilters) -> bool:
    """Whether these nights have rollups that only the model, source or tier
    filter leaves out (so the nights are rolled up, the filter is the cause)."""
    if not filters.narrowed:
        return False
    wide = replace(filters, model="", source="", tier="")
    return rollups(wide, cls=counted(wide)).exists()


def history_start(filters: TrendFilters) -> date:
    """The first night fetched: the p-chart's trailing window before ``since``."""
    return filters.since - timedelta(days=TRAILING_NIGHTS)


# Reason codes the verdict table can produce, summed as columns of one query;
# any other code is found by the sums falling short of the inconclusive count.
KNOWN_REASONS = sorted(str(reason) for reason in INCONCLUSIVE_REASONS)
COUNT_COLUMNS = [
    "attempted",
    "identical",
    "equivalent",
    "divergent",
    "inconclusive",
    "deferred",
]
# One JSON key as an integer, per database. The keys written into the SQL are
# the constants above (checked below), never data.
_EXTRACT = {
    "postgresql": "CAST(r.{column} ->> '{key}' AS INTEGER)",
    "sqlite": "CAST(json_extract(r.{column}, '$.\"{key}\"') AS INTEGER)",
}
# Expanding a JSON object into (key, value) rows, for keys not known in advance.
_EACH = {"postgresql": "jsonb_each_text", "sqlite": "json_each"}
assert all(re.fullmatch(r"[a-z_]+", key) for key in [*KNOWN_REASONS, *VERDICTS])


def _where(filters: TrendFilters, since: date, until: date) -> tuple[str, list[Any]]:
    adapt = connection.ops.adapt_datefield_value
    where = ["r.date >= %s", "r.date <= %s"]
    params: list[Any] = [adapt(since), adapt(until)]
    if filters.project_id is not None:
        where.append("r.project_id = %s")
        params.append(filters.project_id)
    if filters.hidden_project_ids:
        hidden = sorted(filters.hidden_project_ids)
        where.append(f"r.project_id NOT IN ({', '.join(['%s'] * len(hidden))})")
        params.extend(hidden)
    if filters.model:
        names, names_params = models_matching(filters).query.sql_with_params()
        where.append(f"r.model IN ({names})")
        params.extend(names_params)
    if filters.source:
        where.append("r.source = %s")
        params.append(filters.source)
    if filters.tier:
        where.append("r.tier = %s")
        params.append(filters.tier)
    return " AND ".join(where), params


# Days from a date parameter to a row's night, per database.
_DAYS = {
    "postgresql": "(r.date - CAST(%s AS DATE))",
    "sqlite": "CAST(julianday(r.date) - julianday(%s) AS INTEGER)",
}


def _slot(filters: TrendFilters, step: int) -> tuple[str, list[Any], int]:
    """The SQL of a row's slot, its parameters, and the days the slots lead by.

    A slot is a night, or ``step`` nights counted from ``since`` (weeks, named
    by their first night as ``series.weekly_totals`` names them). Slots are
    numbered from whole slots before the trailing window, so the number is
    never negative and integer division floors it on every database.
    """
    if step == 1:
        return "r.date", [], 0
    lead = -(-TRAILING_NIGHTS // step) * step
    days = _DAYS[connection.vendor]
    adapt = connection.ops.adapt_datefield_value
    return f"({days} + {lead}) / {step}", [adapt(filters.since)], lead


def nightly_sums(
    filters: TrendFilters, step: int = 1
) -> tuple[list[NightTotals], dict[str, dict[str, int]]]:
    """Totals per night, or per ``step`` nights (oldest first), and human
    decisions per verdict (``dashboard_sums`` without the tiers)."""
    totals, decided, _ = dashboard_sums(filters, step)
    return totals, decided


def dashboard_sums(
    filters: TrendFilters, step: int = 1
) -> tuple[list[NightTotals], dict[str, dict[str, int]], list[TierTotals]]:
    """Totals per night, or per ``step`` nights (oldest first), human
    decisions per verdict, and the shown nights' totals per tier.

    The nights start a trailing window before ``since``, for the p-chart's
    limits; decisions and tiers count only from ``since``. One query, written
    out rather than built by the ORM (compiling thirty aggregates cost more
    than running them): the JSON counts are summed key by key in SQL, which
    costs far less than expanding every JSON object into rows. Weeks are
    summed in SQL too: two years of nights would be 760 rows to read back.
    The query groups by tier as well (a row per tier and slot, at most two),
    and the tiers of a slot are added up here.
    """
    found, lead = _sums_rows(filters, step)

    def night_of(slot) -> date:
        if step == 1:
            night = _as_date(slot)
            # The slot is then r.date, a column that is never NULL.
            assert night is not None
            return night
        return filters.since + timedelta(days=slot * step - lead)

    slots, tiers = _tiers_added_up(found, night_of, filters.since)
    totals, decided, short = _night_totals(slots)
    if short:
        totals = _with_every_reason(filters, totals, short, step)
    by_tier = [
        TierTotals(tier=tier, attempted=a, divergent=d, inconclusive=i)
        for tier, (a, d, i) in sorted(tiers.items())
        if a
    ]
    return totals, decided, by_tier


def _sums_rows(filters: TrendFilters, step: int) -> tuple[list[tuple], int]:
    """The one query of :func:`dashboard_sums`: a row per slot and tier (the
    slot, the tier, the count columns, the known reasons, the decisions per
    verdict), and the days the slots lead by."""
    extract = _EXTRACT[connection.vendor]
    adapt = connection.ops.adapt_datefield_value
    where, params = _where(filters, history_start(filters), filters.until)
    slot_sql, slot_params, lead = _slot(filters, step)
    reasons_sql = [
        f"SUM({extract.format(column='by_reason', key=reason)})"
        for reason in KNOWN_REASONS
    ]
    decided_sql = [
        f"SUM(CASE WHEN r.date >= %s THEN {extract.format(column=column, key=v)} END)"
        for column in ("confirmed", "overturned")
        for v in VERDICTS
    ]
    table = connection.ops.quote_name(counted(filters)._meta.db_table)
    sql = (
        f"SELECT {slot_sql} AS slot, r.tier, "  # noqa: S608 -- names, keys: constants above
        + ", ".join([f"SUM(r.{c})" for c in COUNT_COLUMNS] + reasons_sql + decided_sql)
        + f" FROM {table} r WHERE {where} GROUP BY slot, r.tier ORDER BY slot, r.tier"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            sql, slot_params + [adapt(filters.since)] * len(decided_sql) + params
        )
        return cursor.fetchall(), lead


def _tiers_added_up(
    found: list[tuple], night_of: Callable[[Any], date], since: date
) -> tuple[dict[date, list[int]], dict[str, list[int]]]:
    """The tiers of each slot added up (in slot order, as the query sorts
    them), and the shown slots of each tier: attempted, divergent,
    inconclusive."""
    slots: dict[date, list[int]] = {}
    tiers: dict[str, list[int]] = {}
    for slot, tier, *values in found:
        night = night_of(slot)
        sums = slots.setdefault(night, [0] * len(values))
        for i, value in enumerate(values):
            sums[i] += value or 0
        if night >= since:
            shown = tiers.setdefault(tier, [0, 0, 0])
            shown[0] += values[0] or 0
            shown[1] += values[3] or 0
            shown[2] += values[4] or 0
    return slots, tiers


def _night_totals(
    slots: dict[date, list[int]],
) -> tuple[list[NightTotals], dict[str, dict[str, int]], list[date]]:
    """Each slot's totals, the decisions per verdict over them all, and the
    nights whose known reasons fall short of their inconclusive count."""
    counts = len(COUNT_COLUMNS)
    known = len(KNOWN_REASONS)
    decided: dict[str, dict[str, int]] = {"confirmed": {}, "overturned": {}}
    totals = []
    short = []
    for night, row in slots.items():
        attempted, identical, equivalent, divergent, inconclusive, deferred = row[
            :counts
        ]
        reasons = {
            reason: n
            for reason, n in zip(
                KNOWN_REASONS, row[counts : counts + known], strict=True
            )
            if n
        }
        if sum(reasons.values()) < inconclusive:
            short.append(night)
        for i, n in enumerate(row[counts + known :]):
            if n:
                column = "confirmed" if i < len(VERDICTS) else "overturned"
                verdict = str(VERDICTS[i % len(VERDICTS)])
                decided[column][verdict] = decided[column].get(verdict, 0) + n
        totals.append(
            NightTotals(
                night=night,
                attempted=attempted,
                identical=identical,
                equivalent=equivalent,
                divergent=divergent,
                inconclusive=inconclusive,
                deferred=deferred,
                by_reason=reasons,
            )
        )
    return totals, decided, short


def _with_every_reason(
    filters: TrendFilters, totals: list[NightTotals], short: list[date], step: int
) -> list[NightTotals]:
    """``totals`` with the ``short`` nights' reasons counted key by key:
    codes outside the verdict table (data from elsewhere), whatever the keys
    are."""
    found = _reason_sums(
        filters, since=min(short), until=max(short) + timedelta(days=step - 1)
    )
    if step > 1:
        found = _in_slots(found, filters.since, step)
    return [
        replace(n, by_reason=found.get(n.night, {})) if n.night in short else n
        for n in totals
    ]


def _reason_sums(
    filters: TrendFilters, *, since: date, until: date
) -> dict[date, dict[str, int]]:
    """Every reason key of the nights ``since``..``until``, summed per night."""
    where, params = _where(filters, since, until)
    table = connection.ops.quote_name(counted(filters)._meta.db_table)
    each = _EACH[connection.vendor]
    sql = (
        "SELECT r.date, j.key, SUM(CAST(j.value AS INTEGER)) "  # noqa: S608
        f"FROM {table} r, {each}(r.by_reason) j WHERE {where} GROUP BY r.date, j.key"
    )
    found: dict[date, dict[str, int]] = defaultdict(dict)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for night, key, n in cursor.fetchall():
            if n:
                day = _as_date(night)
                # r.date is a column that is never NULL.
                assert day is not None
                found[day][key] = int(n)
    return found


def _in_slots(
    nights: dict[date, dict[str, int]], since: date, step: int
) -> dict[date, dict[str, int]]:
    """Counts per night summed per ``step`` nights counted from ``since``."""
    slots: dict[date, dict[str, int]] = defaultdict(dict)
    for night, counts in nights.items():
        start = since + timedelta(days=(night - since).days // step * step)
        for key, n in counts.items():
            slots[start][key] = slots[start].get(key, 0) + n
    return slots


def _as_date(value) -> date | None:
    if value is None or isinstance(value, date):
        return value
    return date.fromisoformat(str(value))


def model_choices(filters: TrendFilters) -> list[str]:
    """Models with rollups in the range (and project), for the filter's
    suggestions: at most ``MODEL_NAMES_SHOWN``."""
    # Of either table; only Rollup's are filtered by project (see counted).
    rows: QuerySet[Any] = counted(filters).objects.filter(
        date__gte=filters.since, date__lte=filters.until
    )
    if filters.project_id is not None:
        rows = rows.filter(project_id=filters.project_id)
    if filters.hidden_project_ids:
        rows = rows.exclude(project_id__in=filters.hidden_project_ids)
    names = (
        rows.exclude(model="")
        .order_by("model")
        .values_list("model", flat=True)
        .distinct()
    )
    return list(names[:MODEL_NAMES_SHOWN])


def latest_rollup(filters: TrendFilters) -> date | None:
    # Of either table; only Rollup's are filtered by project (see counted).
    rows: QuerySet[Any] = counted(filters).objects.all()
    if filters.project_id is not None:
        rows = rows.filter(project_id=filters.project_id)
    if filters.hidden_project_ids:
        rows = rows.exclude(project_id__in=filters.hidden_project_ids)
    if filters.model:
        rows = rows.filter(model__in=models_matching(filters, every_night=True))
    if filters.source:
        rows = rows.filter(source=filters.source)
    if filters.tier:
        rows = rows.filter(tier=filters.tier)
    return rows.aggregate(latest=Max("date"))["latest"]


def rollups_version(filters: TrendFilters) -> tuple[int, int, str]:
    """What changes whenever a rollup row the dashboard reads is rewritten.

    Rollups are only ever deleted and inserted again (``rollup_range``), and an
    inserted row always gets a higher id and a fresh ``computed_at``; a night
    that lost its rows changes the count.
    """
    rows = rollups(filters, since=history_start(filters), cls=counted(filters))
    found = rows.aggregate(n=Count("id"), top=Max("id"), at=Max("computed_at"))
    at = found["at"].isoformat() if found["at"] else ""
    return found["n"], found["top"] or 0, at
