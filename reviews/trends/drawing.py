"""The trends charts and tables drawn as markup (by Jinja2: see ``reviews.markup``).

A 56-night page has some six thousand SVG attributes and table cells; the
Django template engine spent about 35 ms of CPU on them (65 ms for two years
shown as weeks), most of an uncached page.
"""

from __future__ import annotations

from django.utils.safestring import SafeString

from ..markup import render
from .charts import Chart
from .tables import Table

CHART_TEMPLATE = "reviews/trends/_chart.svg.html"
TABLE_TEMPLATE = "reviews/trends/_table.html"


def draw_chart(chart: Chart, *, chart_id: str, title: str) -> SafeString:
    return render(
        CHART_TEMPLATE, {"chart": chart, "chart_id": chart_id, "title": title}
    )


def draw_table(table: Table) -> SafeString:
    return render(TABLE_TEMPLATE, {"table": table})
