"""The lead's alarm out of ReplayHub: when a night closes and its point of the
inconclusive-rate p-chart is out of control, the project's webhooks get one
``trends.signal`` for that night.

A receiver of ``replayhub.signals.night_closed``, connected after the rollup
(``rollups.on_night_closed``) so the night is counted first. The chart is
the dashboard's own (``statistics.p_chart`` over the project's nightly sums,
with its trailing window); the delivery's key is the project and night, so a
night closed or counted twice signals once.
"""

from __future__ import annotations

from typing import Any

from replayhub.models import Night, Webhook
from replayhub.outbound.services import event_queue, page_url
from reviews.trends.forms import TrendFilters
from reviews.trends.queries import nightly_sums
from reviews.trends.statistics import ChartPoint, p_chart


def night_point(night: Night) -> ChartPoint | None:
    """The p-chart's point of ``night`` for its project (None: nothing counted)."""
    filters = TrendFilters(
        since=night.date,
        until=night.date,
        project_id=night.project_id,
        project=night.project.slug,
    )
    totals, _ = nightly_sums(filters)
    points = p_chart([n.as_rate() for n in totals])
    return next((p for p in points if p.night == night.date), None)


def on_night_closed(sender: Any, *, night: Night, **kwargs: Any) -> None:
    """Receiver of ``replayhub.signals.night_closed``: queue the signal."""
    hooks = Webhook.objects.filter(project_id=night.project_id)
    if not any(
        "trends.signal" in events for events in hooks.values_list("events", flat=True)
    ):
        return  # nobody listens: the chart is not read
    point = night_point(night)
    if point is None or not point.out_of_control or point.rate is None:
        return
    slug = night.project.slug
    direction = "above" if point.rate > (point.upper or 0) else "below"
    url = page_url("reviews:trends")
    url = f"{url}?project={slug}" if url else ""
    event_queue(
        project=night.project,
        event="trends.signal",
        ident=f"night-{night.date.isoformat()}",
        data={
            "project": slug,
            "night": night.date.isoformat(),
            "inconclusive_rate": round(point.rate, 4),
            "center": round(point.center or 0, 4),
            "upper": round(point.upper or 0, 4),
            "lower": round(point.lower or 0, 4),
            "out_of_control": direction,
            "url": url,
        },
        text=(
            f"ReplayHub {slug}: the inconclusive rate of the night of "
            f"{night.date} is {point.rate:.1%}, {direction} its control limits "
            f"({(point.lower or 0):.1%} to {(point.upper or 0):.1%}) {url}"
        ).strip(),
    )
