"""The trends charts and tables drawn as markup, in plain Python.

A two-year page has some ten thousand SVG attributes and table cells. A
template engine prints each through its autoescaping, about a microsecond
apiece even in Jinja2 — a third of an uncached page's CPU. Here each element is
one f-string: coordinates are numbers formatted with one decimal (never
localized: a decimal comma would break them), and every text, class and colour
goes through :func:`html.escape`, quotes included, since reason codes and
model names come from records.
"""

from __future__ import annotations

from functools import lru_cache
from html import escape as _escape

from django.utils.safestring import SafeString, mark_safe

from reviews.trends.charts import Chart
from reviews.trends.tables import Table

# Classes, colours and most numbers repeat thousands of times a page: each is
# escaped once.
escape = lru_cache(maxsize=4096)(_escape)


def draw_chart(chart: Chart, *, chart_id: str, title: str) -> SafeString:
    """The chart as one ``<svg>`` element, titled for screen readers."""
    cid = escape(chart_id)
    parts = [
        f'<svg class="chart" viewBox="0 0 {int(chart.width)} {int(chart.height)}" '
        f'role="img" aria-labelledby="{cid}-title" id="{cid}">'
        f'<title id="{cid}-title">{escape(title)}</title>\n'
    ]
    parts += [
        f'<line x1="{g.x1:.1f}" y1="{g.y1:.1f}" x2="{g.x2:.1f}" y2="{g.y2:.1f}" '
        f'class="{escape(g.cls)}"/>'
        for g in chart.grid
    ]
    parts.append("\n")
    for column in chart.columns:
        parts.append(f'<g class="col"><title>{escape(column.title)}</title>')
        parts += [
            f'<rect x="{r.x:.1f}" y="{r.y:.1f}" width="{r.w:.1f}" height="{r.h:.1f}" '
            f'fill="{escape(r.fill)}"/>'
            for r in column.rects
        ]
        parts.append("</g>")
    parts.append("\n")
    parts += [
        f'<polyline points="{escape(p.points)}" class="{escape(p.cls)}"/>'
        for p in chart.polylines
    ]
    parts.append("\n")
    parts += [
        f'<circle cx="{d.cx:.1f}" cy="{d.cy:.1f}" r="{d.r:.1f}" '
        f'class="{escape(d.cls)}"><title>{escape(d.title)}</title></circle>'
        for d in chart.dots
    ]
    parts.append("\n")
    parts += [
        f'<text x="{t.x:.1f}" y="{t.y:.1f}" text-anchor="{escape(t.anchor)}" '
        f'class="{escape(t.cls)}">{escape(t.text)}</text>'
        for t in chart.texts
    ]
    parts.append("\n</svg>")
    # Every text above went through escape(); the rest are formatted numbers.
    return mark_safe("".join(parts))  # noqa: S308


def draw_table(table: Table) -> SafeString:
    """The table, each row headed by its night."""
    parts = [f'<table class="grid compact trends-table" id="{escape(table.id)}">']
    parts.append("<thead><tr>")
    for head in table.head:
        numeric = ' class="num"' if head.numeric else ""
        title = f' title="{escape(head.title)}"' if head.title else ""
        swatch = (
            '<svg class="swatch" viewBox="0 0 10 10" aria-hidden="true">'
            f'<rect width="10" height="10" rx="2" fill="{escape(head.color)}"/></svg> '
            if head.color
            else ""
        )
        parts.append(
            f'<th scope="col"{numeric}{title}>{swatch}{escape(head.text)}</th>'
        )
    parts.append("</tr></thead>\n<tbody>\n")
    for night, cells, row_class in table.rows:
        row = f' class="{escape(row_class)}"' if row_class else ""
        parts.append(f'<tr{row}><th scope="row">{escape(night)}</th>')
        parts += [
            f'<td class="{escape(cell.cls)}">{escape(cell.text)}</td>' for cell in cells
        ]
        parts.append("</tr>\n")
    parts.append("</tbody></table>")
    # Every text above went through escape().
    return mark_safe("".join(parts))  # noqa: S308
