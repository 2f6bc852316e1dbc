"""The trends dashboard: filters, the queries over Rollup rows, series and SVG geometry.

The dashboard reads ``Rollup`` rows only, never the replays: a version query,
then, unless the same rollups were already built into a cached dashboard, the
nightly sums (reasons and decisions included) and the models for the filter.

Everything after the queries is pure: the nightly totals become series, the
series become chart geometry (plain coordinates and strings), and the p-chart
comes from ``replayhub.trends``. The charts and the nightly tables are turned
into markup by ``render_svg`` and ``render_table``, which escape every text
they place (reason codes and model names are data from records); a template
loop over a thousand SVG elements would cost most of the page's time.

The JSON export and ``GET /api/v1/trends`` share ``export_payload``; the JSON
endpoint's view lives here because ``replayhub/api.py`` is the ingest API's.
"""

from __future__ import annotations

import csv
import hashlib
import html
import io
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from functools import cached_property, partial
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_not_required
from django.core.cache import cache
from django.db import connection
from django.db.models import Count, Max
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET

from replayhub.models import Project, Rollup, Verdict
from replayhub.trends import (
    SIGMAS,
    TRAILING_NIGHTS,
    ChartPoint,
    NightRate,
    p_chart,
    reasons_that_moved,
)
from replayhub.verdicts import INCONCLUSIVE_REASONS, REASON_TEXT

from . import roles

NIGHTS_SHOWN = 56
# About two years: past that the bars get thinner than a pixel.
MAX_NIGHTS = 731
# Reasons stacked one by one; the rest are drawn together as "other".
TOP_REASONS = 6
OTHER = "other"

VERDICTS = [
    Verdict.IDENTICAL,
    Verdict.EQUIVALENT,
    Verdict.DIVERGENT,
    Verdict.INCONCLUSIVE,
]
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
    "worker_lost": "#d6336c",
    "harness_error": "#a61e4d",
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


# ---------------------------------------------------------------------------
# Filters


@dataclass(frozen=True)
class Filters:
    """What the dashboard shows: nights ``since``..``until`` inclusive."""

    since: date
    until: date
    project_id: int | None = None
    project: str = ""
    model: str = ""

    @property
    def nights(self) -> int:
        return (self.until - self.since).days + 1

    def query(self) -> dict[str, str]:
        """The filters as a query string, defaults spelled out."""
        data = {"since": self.since.isoformat(), "until": self.until.isoformat()}
        if self.project:
            data["project"] = self.project
        if self.model:
            data["model"] = self.model
        return data

    def as_json(self) -> dict[str, Any]:
        return {
            "project": self.project or None,
            "model": self.model or None,
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
        }


def default_window(until: date | None = None) -> tuple[date, date]:
    until = until or timezone.localdate()
    return until - timedelta(days=NIGHTS_SHOWN - 1), until


class TrendsFilterForm(forms.Form):
    """The dashboard's query string. Empty dates: the last 56 nights."""

    project = forms.ModelChoiceField(
        queryset=Project.objects.only("id", "slug"),
        to_field_name="slug",
        required=False,
        empty_label="All projects",
    )
    model = forms.CharField(required=False, max_length=200)
    since = forms.DateField(required=False, input_formats=["%Y-%m-%d"])
    until = forms.DateField(required=False, input_formats=["%Y-%m-%d"])

    def clean_model(self) -> str:
        return self.cleaned_data["model"].strip()

    def clean(self):
        data = super().clean()
        since, until = data.get("since"), data.get("until")
        if since and until:
            if since > until:
                self.add_error("until", "The last night is before the first.")
            elif (until - since).days + 1 > MAX_NIGHTS:
                self.add_error("since", f"Show at most {MAX_NIGHTS} nights at once.")
        return data

    def filters(self) -> Filters:
        """The valid filters; a field that failed validation takes its default."""
        data = getattr(self, "cleaned_data", {})
        project = data.get("project")
        until = data.get("until")
        since = data.get("since")
        if since and not until:
            until = min(since + timedelta(days=NIGHTS_SHOWN - 1), timezone.localdate())
            until = max(until, since)
        default_since, until = default_window(until)
        since = since or default_since
        return Filters(
            since=since,
            until=until,
            project_id=project.pk if project else None,
            project=project.slug if project else "",
            model=data.get("model", ""),
        )


# ---------------------------------------------------------------------------
# Queries: Rollup rows only


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


def _rollups(filters: Filters, since: date | None = None):
    rows = Rollup.objects.filter(
        date__gte=since or filters.since, date__lte=filters.until
    )
    if filters.project_id is not None:
        rows = rows.filter(project_id=filters.project_id)
    if filters.model:
        rows = rows.filter(model=filters.model)
    return rows


def history_start(filters: Filters) -> date:
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


def _where(filters: Filters, since: date, until: date) -> tuple[str, list[Any]]:
    adapt = connection.ops.adapt_datefield_value
    where, params = ["r.date >= %s", "r.date <= %s"], [adapt(since), adapt(until)]
    if filters.project_id is not None:
        where.append("r.project_id = %s")
        params.append(filters.project_id)
    if filters.model:
        where.append("r.model = %s")
        params.append(filters.model)
    return " AND ".join(where), params


def nightly_sums(
    filters: Filters,
) -> tuple[list[NightTotals], dict[str, dict[str, int]]]:
    """Totals per night (oldest first) and human decisions per verdict.

    The nights start a trailing window before ``since``, for the p-chart's
    limits; decisions count only from ``since``. One query, written out
    rather than built by the ORM (compiling thirty aggregates cost more than
    running them): the JSON counts are summed key by key in SQL, which costs
    far less than expanding every JSON object into rows.
    """
    extract = _EXTRACT[connection.vendor]
    adapt = connection.ops.adapt_datefield_value
    where, params = _where(filters, history_start(filters), filters.until)
    reasons_sql = [
        f"SUM({extract.format(column='by_reason', key=reason)})"
        for reason in KNOWN_REASONS
    ]
    decided_sql = [
        f"SUM(CASE WHEN r.date >= %s THEN {extract.format(column=column, key=v)} END)"
        for column in ("confirmed", "overturned")
        for v in VERDICTS
    ]
    table = connection.ops.quote_name(Rollup._meta.db_table)
    sql = (
        "SELECT r.date, "  # noqa: S608 -- names and keys are the constants above
        + ", ".join([f"SUM(r.{c})" for c in COUNT_COLUMNS] + reasons_sql + decided_sql)
        + f" FROM {table} r WHERE {where} GROUP BY r.date ORDER BY r.date"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [adapt(filters.since)] * len(decided_sql) + params)
        rows = cursor.fetchall()

    counts = len(COUNT_COLUMNS)
    known = len(KNOWN_REASONS)
    decided: dict[str, dict[str, int]] = {"confirmed": {}, "overturned": {}}
    totals = []
    short = []
    for row in rows:
        night = _as_date(row[0])
        attempted, identical, equivalent, divergent, inconclusive, deferred = row[
            1 : 1 + counts
        ]
        reasons = {
            reason: n
            for reason, n in zip(
                KNOWN_REASONS, row[1 + counts : 1 + counts + known], strict=True
            )
            if n
        }
        if sum(reasons.values()) < inconclusive:
            short.append(night)
        for i, n in enumerate(row[1 + counts + known :]):
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
    if short:
        # Codes outside the verdict table (data from elsewhere): count those
        # nights key by key, whatever the keys are.
        found = _reason_sums(filters, since=min(short), until=max(short))
        totals = [
            replace(n, by_reason=found.get(n.night, {})) if n.night in short else n
            for n in totals
        ]
    return totals, decided


def _reason_sums(
    filters: Filters, *, since: date, until: date
) -> dict[date, dict[str, int]]:
    """Every reason key of the nights ``since``..``until``, summed per night."""
    where, params = _where(filters, since, until)
    table = connection.ops.quote_name(Rollup._meta.db_table)
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
                found[_as_date(night)][key] = int(n)
    return found


def _as_date(value) -> date | None:
    if value is None or isinstance(value, date):
        return value
    return date.fromisoformat(str(value))


def model_choices(filters: Filters) -> list[str]:
    """Models with rollups in the range (and project), for the filter."""
    rows = Rollup.objects.filter(date__gte=filters.since, date__lte=filters.until)
    if filters.project_id is not None:
        rows = rows.filter(project_id=filters.project_id)
    models = set(
        rows.exclude(model="").values_list("model", flat=True).distinct().order_by()
    )
    if filters.model:
        models.add(filters.model)
    return sorted(models)


def latest_rollup(filters: Filters) -> date | None:
    rows = Rollup.objects.all()
    if filters.project_id is not None:
        rows = rows.filter(project_id=filters.project_id)
    if filters.model:
        rows = rows.filter(model=filters.model)
    return rows.aggregate(latest=Max("date"))["latest"]


# ---------------------------------------------------------------------------
# Exports


EXPORT_COUNTS = [
    "attempted",
    "identical",
    "equivalent",
    "divergent",
    "inconclusive",
    "deferred",
]


def export_rows(filters: Filters) -> list[dict[str, Any]]:
    """The filtered rollup rows as plain values, by night, project and model."""
    rows = (
        _rollups(filters)
        .values(
            "date",
            "project__slug",
            "model",
            *EXPORT_COUNTS,
            "by_reason",
            "confirmed",
            "overturned",
        )
        .order_by("date", "project__slug", "model")
    )
    return [
        {
            "date": row["date"].isoformat(),
            "project": row["project__slug"],
            "model": row["model"],
            **{name: row[name] for name in EXPORT_COUNTS},
            "reached": row["attempted"] - row["inconclusive"],
            "by_reason": row["by_reason"] or {},
            "confirmed": row["confirmed"] or {},
            "overturned": row["overturned"] or {},
        }
        for row in rows
    ]


def export_payload(filters: Filters) -> dict[str, Any]:
    """The JSON export and ``GET /api/v1/trends``: the filters and their rows."""
    return {
        "filters": filters.as_json(),
        "rules": {
            "attempted": "finished replays; identical + equivalent + divergent "
            "+ inconclusive",
            "reached": "attempted - inconclusive",
            "by_reason": "reason codes of inconclusive replays",
            "confirmed/overturned": "latest human decision per replay, keyed by "
            "the automated verdict",
            "deferred": 'runs deferred by the budget; only on the row with model ""',
        },
        "rollups": export_rows(filters),
    }


# Spreadsheets run a cell that starts with one of these as a formula; model
# names and reason codes are data from records, so such cells are quoted.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def export_csv(rows: Sequence[dict[str, Any]]) -> str:
    """One line per rollup row; reason and decision counts get a column each."""
    reasons = sorted({key for row in rows for key in row["by_reason"]})
    header = [
        "date",
        "project",
        "model",
        *EXPORT_COUNTS,
        "reached",
        *(f"reason:{reason}" for reason in reasons),
        *(f"confirmed:{verdict}" for verdict in VERDICTS),
        *(f"overturned:{verdict}" for verdict in VERDICTS),
    ]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([_cell(name) for name in header])
    for row in rows:
        writer.writerow(
            [
                _cell(value)
                for value in [
                    row["date"],
                    row["project"],
                    row["model"],
                    *(row[name] for name in EXPORT_COUNTS),
                    row["reached"],
                    *(row["by_reason"].get(reason, 0) for reason in reasons),
                    *(row["confirmed"].get(v, 0) for v in VERDICTS),
                    *(row["overturned"].get(v, 0) for v in VERDICTS),
                ]
            ]
        )
    return out.getvalue()


# Session-authenticated like the pages, but an API answers 401 itself rather
# than redirecting to the login page.
@login_not_required
@require_GET
def api_trends(request: HttpRequest) -> JsonResponse:
    if not request.user.is_authenticated:
        return JsonResponse(
            {"error": "log in first: this endpoint uses the browser session"},
            status=401,
        )
    if not request.user.has_perm(roles.VIEW_TRENDS):
        return JsonResponse(
            {"error": "you do not have permission to read trends"}, status=403
        )
    form = TrendsFilterForm(request.GET)
    if not form.is_valid():
        return JsonResponse(
            {"error": "invalid filters", "fields": form.errors.get_json_data()},
            status=400,
        )
    return JsonResponse(export_payload(form.filters()))


# ---------------------------------------------------------------------------
# Formatting


def pct(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "—"
    return f"{value * 100:.{digits}f}%"


def short_pct(value: float) -> str:
    """Axis labels: whole percents unless the scale is finer than that."""
    percent = value * 100
    if abs(percent - round(percent)) < 1e-9:
        return f"{round(percent)}%"
    return f"{percent:.1f}%"


def day_label(night: date) -> str:
    return f"{night:%b} {night.day}"


def reason_label(code: str) -> str:
    if code == OTHER:
        return "Other reasons"
    if not code:
        return "No reason code"
    return REASON_TEXT.get(code, code)


# ---------------------------------------------------------------------------
# Geometry: pure functions from series to coordinates


@dataclass(slots=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str


@dataclass(slots=True)
class Column:
    """The bars of one night, with the text a hover shows (the table has it too)."""

    title: str
    rects: list[Rect]


@dataclass(slots=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float
    cls: str = "grid"


@dataclass(slots=True)
class Text:
    x: float
    y: float
    text: str
    anchor: str = "middle"
    cls: str = "tick"


@dataclass(slots=True)
class Polyline:
    points: str
    cls: str


@dataclass(slots=True)
class Dot:
    cx: float
    cy: float
    cls: str
    title: str
    r: float = 2.6


@dataclass(slots=True)
class Chart:
    """Everything one SVG draws, as coordinates in its viewBox."""

    width: int
    height: int
    grid: list[Line] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)
    columns: list[Column] = field(default_factory=list)
    polylines: list[Polyline] = field(default_factory=list)
    dots: list[Dot] = field(default_factory=list)


@dataclass(frozen=True)
class Frame:
    """A time plot: one slot per calendar night from ``since`` to ``until``."""

    since: date
    until: date
    width: int = 760
    height: int = 230
    left: int = 46
    right: int = 54
    top: int = 16
    bottom: int = 26

    @cached_property
    def slots(self) -> int:
        return (self.until - self.since).days + 1

    @cached_property
    def plot_width(self) -> float:
        return self.width - self.left - self.right

    @cached_property
    def plot_height(self) -> float:
        return self.height - self.top - self.bottom

    @cached_property
    def slot_width(self) -> float:
        return self.plot_width / self.slots

    def slot_x(self, night: date) -> float:
        return self.left + (night - self.since).days * self.slot_width

    def center_x(self, night: date) -> float:
        return self.slot_x(night) + self.slot_width / 2

    def bar(self, night: date) -> tuple[float, float]:
        """(x, width) of a bar: the slot less a gap, never thinner than a pixel."""
        gap = min(self.slot_width * 0.2, 3)
        return self.slot_x(night) + gap / 2, max(self.slot_width - gap, 0.6)

    def y(self, value: float, top_value: float) -> float:
        fraction = value / top_value if top_value else 0.0
        return self.top + self.plot_height * (1 - min(max(fraction, 0.0), 1.0))

    @cached_property
    def bottom_y(self) -> float:
        return self.top + self.plot_height


# Axis tops for rates, each with a tick step that gives round labels.
NICE_RATES = [
    (0.01, 0.002),
    (0.02, 0.005),
    (0.05, 0.01),
    (0.1, 0.02),
    (0.2, 0.05),
    (0.25, 0.05),
    (0.4, 0.1),
    (0.5, 0.1),
    (0.6, 0.1),
    (0.8, 0.2),
    (1.0, 0.25),
]


def rate_scale(peak: float) -> float:
    """The smallest tidy axis top that leaves the peak a little headroom."""
    for top, _ in NICE_RATES:
        if peak * 1.08 <= top:
            return top
    return 1.0


def rate_ticks(top: float) -> int:
    """How many steps the y axis of a rate chart topping at ``top`` has."""
    step = dict(NICE_RATES).get(top, top / 4)
    return round(top / step)


def count_scale(peak: int) -> int:
    """A tidy top for a count axis: 1, 2 or 5 times a power of ten."""
    if peak <= 0:
        return 1
    magnitude = 1
    while True:
        for step in (1, 2, 5):
            if step * magnitude >= peak:
                return step * magnitude
        magnitude *= 10


def x_step(nights: int, most: int = 9) -> int:
    """Nights between two date labels on the x axis."""
    for step in (1, 2, 7, 14, 28, 56, 91, 182, 364):
        if nights / step <= most:
            return step
    return 364


def _time_axes(frame: Frame, top_value: float, label, ticks: int = 4) -> Chart:
    """Gridlines with y labels, and date labels along the bottom."""
    grid, texts = [], []
    for i in range(ticks + 1):
        value = top_value * i / ticks
        y = frame.y(value, top_value)
        grid.append(
            Line(
                frame.left,
                y,
                frame.width - frame.right,
                y,
                "grid base" if i == 0 else "grid",
            )
        )
        texts.append(Text(frame.left - 6, y + 3.5, label(value), "end"))
    step = x_step(frame.slots)
    # Labels count back from the last night, so the newest one is always named.
    offsets = range(frame.slots - 1, -1, -step)
    for offset in offsets:
        night = frame.since + timedelta(days=offset)
        x = frame.center_x(night)
        texts.append(Text(x, frame.height - 8, day_label(night)))
        grid.append(Line(x, frame.bottom_y, x, frame.bottom_y + 4, "tick"))
    return Chart(frame.width, frame.height, grid=grid, texts=texts)


def _value_nights(values: Mapping[date, float]) -> set[date]:
    """Nights whose value is printed on the chart: the latest and the peak."""
    if not values:
        return set()
    latest = max(values)
    peak = max(values, key=lambda night: (values[night], night))
    return {latest, peak}


def reason_chart(
    nights: Sequence[NightTotals], reasons: Sequence[str], frame: Frame
) -> Chart:
    """The inconclusive rate per night, stacked by reason (top reasons, then other)."""
    rates = {n.night: n.rate for n in nights if n.rate is not None}
    top = rate_scale(max(rates.values(), default=0.0))
    chart = _time_axes(frame, top, short_pct, rate_ticks(top))
    for n in nights:
        if not n.attempted:
            continue
        x, w = frame.bar(n.night)
        base = 0.0
        rects = []
        for reason, count in zip(reasons, _reason_counts(n, reasons), strict=True):
            if not count:
                continue
            y_top = frame.y((base + count) / n.attempted, top)
            y_base = frame.y(base / n.attempted, top)
            rects.append(Rect(x, y_top, w, y_base - y_top, reason_color(reason)))
            base += count
        title = (
            f"{n.night}: {pct(n.rate)} inconclusive ({n.inconclusive} of {n.attempted})"
        )
        chart.columns.append(Column(title, rects))
    for night in _value_nights(rates):
        chart.texts.append(
            Text(
                frame.center_x(night),
                frame.y(rates[night], top) - 4,
                pct(rates[night], 0 if rates[night] >= 0.1 else 1),
                cls="value",
            )
        )
    return chart


def mix_chart(nights: Sequence[NightTotals], frame: Frame) -> Chart:
    """Each night's verdicts as shares of the replays attempted (100% bars)."""
    chart = _time_axes(frame, 1.0, short_pct)
    for n in nights:
        if not n.attempted:
            continue
        x, w = frame.bar(n.night)
        base = 0
        rects = []
        for verdict in VERDICTS:
            count = getattr(n, verdict)
            if not count:
                continue
            y_top = frame.y((base + count) / n.attempted, 1.0)
            y_base = frame.y(base / n.attempted, 1.0)
            rects.append(Rect(x, y_top, w, y_base - y_top, VERDICT_COLORS[verdict]))
            base += count
        title = f"{n.night}: " + ", ".join(f"{getattr(n, v)} {v}" for v in VERDICTS)
        chart.columns.append(Column(title, rects))
    return chart


def coverage_chart(nights: Sequence[NightTotals], frame: Frame) -> Chart:
    """Verdicts reached / replays attempted per night, as a line over 0-100%."""
    chart = _time_axes(frame, 1.0, short_pct)
    points = [(n.night, n.coverage) for n in nights if n.coverage is not None]
    chart.polylines.extend(_lines(points, frame, 1.0, "coverage"))
    for night, value in points:
        chart.dots.append(
            Dot(
                frame.center_x(night),
                frame.y(value, 1.0),
                "coverage",
                f"{night}: coverage {pct(value)}",
            )
        )
    values = dict(points)
    latest = max(values, default=None)
    for night in _value_nights({k: -v for k, v in values.items()}):
        # The latest and the lowest coverage are the ones worth printing; the
        # latest one to the right of its dot, where the line has ended.
        x, y = frame.center_x(night), frame.y(values[night], 1.0)
        if night == latest:
            text = Text(x + 6, y + 4, pct(values[night], 0), "start", "value")
        else:
            text = Text(x, y + 14, pct(values[night], 0), cls="value")
        chart.texts.append(text)
    return chart


def deferred_chart(nights: Sequence[NightTotals], frame: Frame) -> Chart:
    """Runs deferred by the budget per night, as bars with their counts."""
    peak = max((n.deferred for n in nights), default=0)
    top = count_scale(peak)
    chart = _time_axes(frame, top, lambda v: f"{v:g}", ticks=2)
    deferred = [n for n in nights if n.deferred]
    label_all = len(deferred) <= 14
    marked = _value_nights({n.night: n.deferred for n in deferred})
    for n in deferred:
        x, w = frame.bar(n.night)
        y = frame.y(n.deferred, top)
        chart.columns.append(
            Column(
                f"{n.night}: {n.deferred} deferred",
                [Rect(x, y, w, frame.bottom_y - y, "#e8590c")],
            )
        )
        if label_all or n.night in marked:
            chart.texts.append(
                Text(frame.center_x(n.night), y - 4, str(n.deferred), cls="value")
            )
    return chart


def _segments(
    points: Sequence[tuple[date, float]],
) -> list[list[tuple[date, float]]]:
    """The points split into runs of consecutive nights (a gap breaks a line)."""
    segments: list[list[tuple[date, float]]] = []
    previous = None
    for night, value in points:
        if previous is None or (night - previous).days > 1:
            segments.append([])
        segments[-1].append((night, value))
        previous = night
    return segments


def _lines(
    points: Sequence[tuple[date, float]], frame: Frame, top: float, cls: str
) -> list[Polyline]:
    """A line through the points, broken where a night has no value."""
    return [
        Polyline(
            " ".join(
                f"{frame.center_x(night):.1f},{frame.y(value, top):.1f}"
                for night, value in segment
            ),
            cls,
        )
        for segment in _segments(points)
        if len(segment) > 1
    ]


def _steps(
    points: Sequence[tuple[date, float]], frame: Frame, top: float, cls: str
) -> list[Polyline]:
    """A limit drawn flat across each night's slot (limits move with sample size)."""
    lines = []
    for segment in _segments(points):
        coords = []
        for night, value in segment:
            x, y = frame.slot_x(night), frame.y(value, top)
            coords += [f"{x:.1f},{y:.1f}", f"{x + frame.slot_width:.1f},{y:.1f}"]
        lines.append(Polyline(" ".join(coords), cls))
    return lines


def control_chart(points: Sequence[ChartPoint], frame: Frame) -> Chart:
    """The p-chart: nightly rate, center line and 3-sigma limits, breaches marked."""
    peak = max(
        [p.rate for p in points if p.rate is not None]
        + [p.upper for p in points if p.upper is not None],
        default=0.0,
    )
    top = rate_scale(peak)
    chart = _time_axes(frame, top, short_pct, rate_ticks(top))
    limited = [p for p in points if p.center is not None]
    chart.polylines.extend(
        _steps([(p.night, p.upper) for p in limited], frame, top, "limit")
    )
    chart.polylines.extend(
        _steps([(p.night, p.lower) for p in limited], frame, top, "limit")
    )
    chart.polylines.extend(
        _steps([(p.night, p.center) for p in limited], frame, top, "center")
    )
    rated = [(p.night, p.rate) for p in points if p.rate is not None]
    chart.polylines.extend(_lines(rated, frame, top, "rate"))
    for p in points:
        if p.rate is None:
            continue
        x, y = frame.center_x(p.night), frame.y(p.rate, top)
        status = "out of control" if p.out_of_control else "within limits"
        if p.center is None:
            status = "no history yet"
        chart.dots.append(
            Dot(
                x,
                y,
                "ooc" if p.out_of_control else "rate",
                f"{p.night}: {pct(p.rate)}, {status}",
                r=4.5 if p.out_of_control else 2.6,
            )
        )
        if p.out_of_control:
            chart.texts.append(Text(x, y - 9, pct(p.rate, 0), cls="value ooc"))
    if limited:
        last = limited[-1]
        x = frame.width - frame.right + 4
        for value, name in (
            (last.upper, "UCL"),
            (last.center, "CL"),
            (last.lower, "LCL"),
        ):
            chart.texts.append(
                Text(
                    x,
                    frame.y(value, top) + 3.5,
                    f"{name} {pct(value, 0)}",
                    "start",
                    "limit-label",
                )
            )
    return chart


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
            label=verdict.label,
            color=VERDICT_COLORS[verdict],
            automated=sum(getattr(n, verdict) for n in nights),
            confirmed=decided.get("confirmed", {}).get(verdict, 0),
            overturned=decided.get("overturned", {}).get(verdict, 0),
        )
        for verdict in VERDICTS
    ]


def overturn_chart(rows: Sequence[OverturnRow], width: int = 760) -> Chart:
    """Horizontal bars: the share of decided replays whose verdict was overturned."""
    left, right, top, row_h = 110, 150, 10, 34
    height = top + row_h * len(rows) + 22
    plot = width - left - right
    chart = Chart(width, height)
    for i in range(5):
        x = left + plot * i / 4
        chart.grid.append(Line(x, top, x, top + row_h * len(rows), "grid"))
        chart.texts.append(Text(x, height - 6, short_pct(i / 4)))
    for i, row in enumerate(rows):
        y = top + i * row_h
        chart.texts.append(
            Text(left - 8, y + row_h / 2 + 4, row.label, "end", "row-label")
        )
        if row.decided:
            w = max(plot * (row.rate or 0.0), 1.5)
            chart.columns.append(
                Column(
                    f"{row.label}: {row.overturned} of {row.decided} overturned",
                    [Rect(left, y + 8, w, row_h - 16, row.color)],
                )
            )
            note = f"{row.rate_text} · {row.overturned} of {row.decided} decided"
            chart.texts.append(
                Text(left + w + 6, y + row_h / 2 + 4, note, "start", "value")
            )
        else:
            chart.texts.append(
                Text(left + 6, y + row_h / 2 + 4, "no decisions yet", "start", "muted")
            )
    return chart


def render_svg(chart: Chart, *, chart_id: str, title: str) -> SafeString:
    """The chart as inline SVG markup.

    Built as one string rather than through template loops: a 56-night page
    draws about a thousand elements, and the template engine would spend most
    of the page's time on them. Every text and title is escaped here; class
    names, colors and anchors are constants of this module, and coordinates
    are numbers formatted with ``.1f`` (never localized, so a comma can never
    end up inside a coordinate).
    """
    e = partial(html.escape, quote=True)
    out = [
        f'<svg class="chart" viewBox="0 0 {chart.width} {chart.height}" '
        f'role="img" aria-labelledby="{e(chart_id)}-title" id="{e(chart_id)}">'
        f'<title id="{e(chart_id)}-title">{e(title)}</title>'
    ]
    out.extend(
        f'<line x1="{g.x1:.1f}" y1="{g.y1:.1f}" x2="{g.x2:.1f}" y2="{g.y2:.1f}" '
        f'class="{g.cls}"/>'
        for g in chart.grid
    )
    for column in chart.columns:
        out.append(f'<g class="col"><title>{e(column.title)}</title>')
        out.extend(
            f'<rect x="{r.x:.1f}" y="{r.y:.1f}" width="{r.w:.1f}" '
            f'height="{r.h:.1f}" fill="{r.fill}"/>'
            for r in column.rects
        )
        out.append("</g>")
    out.extend(
        f'<polyline points="{p.points}" class="{p.cls}"/>' for p in chart.polylines
    )
    out.extend(
        f'<circle cx="{d.cx:.1f}" cy="{d.cy:.1f}" r="{d.r:.1f}" class="{d.cls}">'
        f"<title>{e(d.title)}</title></circle>"
        for d in chart.dots
    )
    out.extend(
        f'<text x="{t.x:.1f}" y="{t.y:.1f}" text-anchor="{t.anchor}" '
        f'class="{t.cls}">{e(t.text)}</text>'
        for t in chart.texts
    )
    out.append("</svg>")
    # Safe: texts and titles went through html.escape; the rest is numbers
    # and this module's constants.
    return mark_safe("".join(out))  # noqa: S308


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


def render_table(table: Table) -> SafeString:
    """The table as HTML; every text in it is escaped here (see render_svg)."""
    e = partial(html.escape, quote=True)
    out = [f'<table class="grid compact trends-table" id="{e(table.id)}"><thead><tr>']
    for head in table.head:
        cls = ' class="num"' if head.numeric else ""
        title = f' title="{e(head.title)}"' if head.title else ""
        swatch = (
            '<svg class="swatch" viewBox="0 0 10 10" aria-hidden="true">'
            f'<rect width="10" height="10" rx="2" fill="{head.color}"/></svg> '
            if head.color
            else ""
        )
        out.append(f'<th scope="col"{cls}{title}>{swatch}{e(head.text)}</th>')
    out.append("</tr></thead><tbody>")
    for night, cells, row_cls in table.rows:
        out.append(f'<tr class="{row_cls}">' if row_cls else "<tr>")
        out.append(f'<th scope="row">{e(night)}</th>')
        out.extend(f'<td class="{c.cls}">{e(c.text)}</td>' for c in cells)
        out.append("</tr>")
    out.append("</tbody></table>")
    # Safe: texts went through html.escape; classes and colors are constants.
    return mark_safe("".join(out))  # noqa: S308


def _numbers(*values) -> list[Cell]:
    return [Cell(str(value)) for value in values]


def reason_table(nights: Sequence[NightTotals], reasons: Sequence[str]) -> Table:
    head = [
        Head("Night", numeric=False),
        Head("Attempted"),
        Head("Inconcl.", title="Inconclusive"),
        Head("Rate"),
        *(Head(r, title=reason_label(r), color=reason_color(r)) for r in reasons),
    ]
    rows = [
        (
            n.night.isoformat(),
            _numbers(n.attempted, n.inconclusive, n.rate_text)
            + _numbers(*_reason_counts(n, reasons)),
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
        *(Head(v.label) for v in VERDICTS),
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


CHART_TITLES = {
    "reasons": "Inconclusive rate per night, stacked by reason",
    "control": "p-chart of the inconclusive rate with its control limits",
    "mix": "Verdict mix per night",
    "coverage": "Coverage per night",
    "deferred": "Runs deferred by the budget per night",
    "overturns": "Overturn rate per automated verdict",
}


# ---------------------------------------------------------------------------
# The dashboard


def reason_color(reason: str) -> str:
    if reason == OTHER:
        return OTHER_COLOR
    if reason in REASON_COLORS:
        return REASON_COLORS[reason]
    # Unknown codes still get a stable color of their own.
    return UNKNOWN_REASON_COLORS[sum(map(ord, reason)) % len(UNKNOWN_REASON_COLORS)]


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


@dataclass(frozen=True)
class Shift:
    reason: str
    label: str
    color: str
    count: int
    rate: str
    before: str
    limit: str


@dataclass(frozen=True)
class Alarm:
    """The latest night out of control, and the reasons that moved that night."""

    night: date
    rate: str
    center: str
    upper: str
    lower: str
    inconclusive: int
    attempted: int
    high: bool
    shifts: list[Shift]
    latest: date
    latest_in_control: bool


def find_alarm(
    all_nights: Sequence[NightTotals], points: Sequence[ChartPoint], since: date
) -> Alarm | None:
    """The newest out-of-control night from ``since`` on, with its moved reasons."""
    shown = [p for p in points if p.night >= since]
    breached = [p for p in shown if p.out_of_control]
    if not breached:
        return None
    point = breached[-1]
    ordered = sorted(all_nights, key=lambda n: n.night)
    index = next(i for i, n in enumerate(ordered) if n.night == point.night)
    night = ordered[index]
    history = [n.as_rate() for n in ordered[max(0, index - TRAILING_NIGHTS) : index]]
    shifts = [
        Shift(
            reason=s.reason,
            label=reason_label(s.reason),
            color=reason_color(s.reason),
            count=night.by_reason.get(s.reason, 0),
            rate=pct(s.rate),
            before=pct(s.before),
            limit=pct(s.upper),
        )
        for s in reasons_that_moved(night.as_rate(), history)
    ]
    latest = max((p for p in shown if p.rate is not None), key=lambda p: p.night)
    return Alarm(
        night=point.night,
        rate=pct(point.rate),
        center=pct(point.center),
        upper=pct(point.upper),
        lower=pct(point.lower),
        inconclusive=night.inconclusive,
        attempted=night.attempted,
        high=(point.rate or 0) > (point.upper or 0),
        shifts=shifts,
        latest=latest.night,
        latest_in_control=not latest.out_of_control,
    )


@dataclass(frozen=True)
class LegendItem:
    color: str
    label: str
    code: str
    latest: str = ""


def build_dashboard(
    *,
    totals: Sequence[NightTotals],
    decided: Mapping[str, Mapping[str, int]],
    filters: Filters,
) -> dict[str, Any]:
    """Series, charts, tables and the banner from nightly totals; no database."""
    frame = Frame(filters.since, filters.until)
    strip = Frame(filters.since, filters.until, height=110, top=10)
    points = p_chart([n.as_rate() for n in totals])
    shown = [n for n in totals if filters.since <= n.night <= filters.until]
    shown_points = [p for p in points if filters.since <= p.night <= filters.until]
    alarm = find_alarm(totals, points, filters.since)
    reasons = top_reasons(
        shown, include=[s.reason for s in alarm.shifts] if alarm else []
    )
    latest = max((n for n in shown if n.attempted), key=lambda n: n.night, default=None)
    overturns = overturn_rows(shown, decided)

    def on_latest(count: int, digits: int = 1) -> str:
        return f"{pct(count / latest.attempted, digits)} ({count})" if latest else ""

    latest_reasons = (
        dict(zip(reasons, _reason_counts(latest, reasons), strict=True))
        if latest
        else {}
    )

    newest_first = list(reversed(shown))
    attempted = {n.night: n.attempted for n in shown}
    return {
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
                v.label,
                str(v),
                on_latest(getattr(latest, v) if latest else 0, 0),
            )
            for v in VERDICTS
        ],
        "tables": {
            "reasons": render_table(reason_table(newest_first, reasons)),
            "control": render_table(control_table(shown_points, attempted)),
            "mix": render_table(mix_table(newest_first)),
            "coverage": render_table(
                coverage_table(newest_first, deferred_known=not filters.model)
            ),
        },
        "overturns": overturns,
        "charts": {
            name: render_svg(chart, chart_id=f"c-{name}", title=CHART_TITLES[name])
            for name, chart in {
                "reasons": reason_chart(shown, reasons, frame),
                "mix": mix_chart(shown, frame),
                "coverage": coverage_chart(shown, frame),
                "deferred": deferred_chart(shown, strip),
                "control": control_chart(shown_points, frame),
                "overturns": overturn_chart(overturns),
            }.items()
        },
        "sigmas": f"{SIGMAS:g}",
        "nights_shown": NIGHTS_SHOWN,
        "trailing": TRAILING_NIGHTS,
    }


def _reason_counts(night: NightTotals, reasons: Sequence[str]) -> list[int]:
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


# Built dashboards are cached: a lead's page over all projects sums thousands
# of rollup rows, and the rollups change about once a night.
CACHE_SECONDS = 6 * 3600


def rollups_version(filters: Filters) -> tuple[int, int, str]:
    """What changes whenever a rollup row the dashboard reads is rewritten.

    Rollups are only ever deleted and inserted again (``rollup_range``), and an
    inserted row always gets a higher id and a fresh ``computed_at``; a night
    that lost its rows changes the count.
    """
    rows = _rollups(filters, since=history_start(filters))
    found = rows.aggregate(n=Count("id"), top=Max("id"), at=Max("computed_at"))
    at = found["at"].isoformat() if found["at"] else ""
    return found["n"], found["top"] or 0, at


def _cache_key(filters: Filters, version: tuple) -> str:
    raw = repr((filters.since, filters.until, filters.project_id, filters.model))
    digest = hashlib.sha256(f"{raw}{version}".encode()).hexdigest()
    return f"replayhub:trends:{digest}"


def dashboard_context(filters: Filters) -> dict[str, Any]:
    """Everything the page needs, read from Rollup rows only.

    A cached build is used while the rollups it was built from are unchanged
    (one cheap query); otherwise two more queries and the pure building.
    """
    version = rollups_version(filters)
    key = _cache_key(filters, version)
    built = cache.get(key)
    if built is None:
        totals, decided = nightly_sums(filters) if version[0] else ([], {})
        built = build_dashboard(totals=totals, decided=decided, filters=filters)
        built["models"] = model_choices(filters) if version[0] else []
        cache.set(key, built, CACHE_SECONDS)
    return {
        **built,
        "filters": filters,
        "projects": list(Project.objects.values_list("slug", flat=True)),
        "latest_rollup": None if built["has_data"] else latest_rollup(filters),
    }
