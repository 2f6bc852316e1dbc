"""Chart geometry: pure functions from nightly series to coordinates.

A chart is plain data (rectangles, lines, texts, dots in its viewBox's
coordinates); ``drawing.draw_chart`` draws it. Nothing here makes markup:
every text a chart places (reason codes are data from records) is escaped
where it is drawn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import cached_property

from reviews.trends.series import (
    VERDICT_COLORS,
    VERDICTS,
    NightTotals,
    OverturnRow,
    pct,
    reason_color,
    reason_counts,
)
from reviews.trends.statistics import ChartPoint


def short_pct(value: float) -> str:
    """Axis labels: whole percents unless the scale is finer than that."""
    percent = value * 100
    if abs(percent - round(percent)) < 1e-9:
        return f"{round(percent)}%"
    return f"{percent:.1f}%"


def day_label(night: date) -> str:
    return f"{night:%b} {night.day}"


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
    """A time plot: one slot per ``step`` calendar nights from ``since`` to
    ``until`` (a night each, or a week each when ``step`` is 7)."""

    since: date
    until: date
    width: int = 760
    height: int = 230
    left: int = 46
    right: int = 54
    top: int = 16
    bottom: int = 26
    step: int = 1

    @cached_property
    def slots(self) -> int:
        return -(-((self.until - self.since).days + 1) // self.step)

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
        return self.left + (night - self.since).days // self.step * self.slot_width

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


def count_ticks(top: int) -> int:
    """Steps of a count axis topping at ``top`` (a ``count_scale``), each a
    whole number: 0 to 1 and 0 to 5 in one step, 0 to 2 and 0 to 10 in two."""
    return 2 if top % 2 == 0 else 1


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
        night = frame.since + timedelta(days=offset * frame.step)
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
        for reason, count in zip(reasons, reason_counts(n, reasons), strict=True):
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
    for night in sorted(_value_nights(rates)):
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
    for night in sorted(_value_nights({k: -v for k, v in values.items()})):
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
    chart = _time_axes(frame, top, lambda v: f"{v:g}", count_ticks(top))
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
    points: Sequence[tuple[date, float]], step: int
) -> list[list[tuple[date, float]]]:
    """The points split into runs of consecutive slots (a gap breaks a line).

    Slots are ``step`` nights apart: a night each, or a week each.
    """
    segments: list[list[tuple[date, float]]] = []
    previous = None
    for night, value in points:
        if previous is None or (night - previous).days > step:
            segments.append([])
        segments[-1].append((night, value))
        previous = night
    return segments


def _lines(
    points: Sequence[tuple[date, float]], frame: Frame, top: float, cls: str
) -> list[Polyline]:
    """A line through the points, broken where a slot has no value."""
    return [
        Polyline(
            " ".join(
                f"{frame.center_x(night):.1f},{frame.y(value, top):.1f}"
                for night, value in segment
            ),
            cls,
        )
        for segment in _segments(points, frame.step)
        if len(segment) > 1
    ]


def _steps(
    points: Sequence[tuple[date, float]], frame: Frame, top: float, cls: str
) -> list[Polyline]:
    """A limit drawn flat across each night's slot (limits move with sample size)."""
    lines = []
    for segment in _segments(points, frame.step):
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
    # A point has its three limits or none (statistics.p_chart).
    limited = [
        (p.night, p.center, p.upper, p.lower)
        for p in points
        if p.center is not None and p.upper is not None and p.lower is not None
    ]
    chart.polylines.extend(
        _steps([(n, upper) for n, _, upper, _ in limited], frame, top, "limit")
    )
    chart.polylines.extend(
        _steps([(n, lower) for n, _, _, lower in limited], frame, top, "limit")
    )
    chart.polylines.extend(
        _steps([(n, center) for n, center, _, _ in limited], frame, top, "center")
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
        _, center, upper, lower = limited[-1]
        x = frame.width - frame.right + 4
        for value, name in (
            (upper, "UCL"),
            (center, "CL"),
            (lower, "LCL"),
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


def overturn_chart(rows: Sequence[OverturnRow], width: int = 760) -> Chart:
    """Horizontal bars: the share of decided replays whose verdict was overturned."""
    # Room right of a full bar for its note, "100.0% · 1234 of 1234 decided".
    left, right, top, row_h = 110, 200, 10, 34
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
