"""The charts and tables drawn as markup, by Jinja2.

A 56-night page has some six thousand SVG attributes and table cells; the
Django template engine spent about 35 ms of CPU on them (65 ms for two years
shown as weeks), most of an uncached page. Jinja2 compiles the same two
templates to Python and draws them about five times faster. It is configured
as the second template engine (``replayhub/settings.py``) with autoescaping on,
as Django's is, so every text a chart or table places is escaped.
"""

from __future__ import annotations

from typing import Any

from django.template import engines
from django.utils.safestring import SafeString, mark_safe
from jinja2 import Environment, StrictUndefined

from .charts import Chart
from .tables import Table

CHART_TEMPLATE = "reviews/trends/_chart.svg.html"
TABLE_TEMPLATE = "reviews/trends/_table.html"


def coord(value: float) -> str:
    """A coordinate with one decimal, never localized (a comma would break SVG)."""
    return f"{value:.1f}"


def environment(**options: Any) -> Environment:
    """The Jinja2 engine's environment (``TEMPLATES`` names it)."""
    # Always escaped, whatever the settings say; a name a template misspells
    # is an error rather than an empty attribute.
    options = {**options, "undefined": StrictUndefined}
    options.pop("autoescape", None)
    env = Environment(autoescape=True, **options)
    env.filters["coord"] = coord
    return env


def _template(name: str):
    return engines["jinja2"].get_template(name)


def draw_chart(chart: Chart, *, chart_id: str, title: str) -> SafeString:
    html = _template(CHART_TEMPLATE).render(
        {"chart": chart, "chart_id": chart_id, "title": title}
    )
    # Escaped by the template.
    return mark_safe(html)  # noqa: S308


def draw_table(table: Table) -> SafeString:
    # Escaped by the template.
    return mark_safe(_template(TABLE_TEMPLATE).render({"table": table}))  # noqa: S308
