"""The chart and table templates: every text escaped, coordinates never localized."""

from __future__ import annotations

import re

from django.test import override_settings

from replayhub.verdicts import Verdict
from reviews.render.drawing import draw_chart, draw_table
from reviews.trends.charts import Chart, Column, Dot, Line, Rect, Text
from reviews.trends.series import VERDICT_LABELS, VERDICTS
from reviews.trends.tables import Cell, Head, Table

SCRIPT = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
# A double quote, escaped: either entity is right.
QUOTE = "(?:&quot;|&#34;)"


def draw(chart: Chart, title: str = "A chart") -> str:
    return draw_chart(chart, chart_id="c-test", title=title)


def test_every_text_a_chart_places_is_escaped():
    chart = Chart(
        100,
        50,
        columns=[Column(f"{SCRIPT} column", [Rect(1, 2, 3, 4, "#e07b00")])],
        dots=[Dot(5, 6, "rate", f"{SCRIPT} dot")],
        texts=[Text(7, 8, f"{SCRIPT} text", "start", "value")],
    )

    svg = draw(chart, title=f'"{SCRIPT}" title')

    assert SCRIPT not in svg
    for place in ["column", "dot", "text"]:
        assert f"{ESCAPED} {place}" in svg
    assert re.search(
        f'<title id="c-test-title">{QUOTE}{re.escape(ESCAPED)}{QUOTE} title</title>',
        svg,
    )


@override_settings(DECIMAL_SEPARATOR=",", USE_THOUSAND_SEPARATOR=True)
def test_coordinates_have_one_decimal_whatever_the_number_format():
    chart = Chart(
        1000,
        500,
        grid=[Line(1234.56, 0, 1234.56, 480)],
        columns=[Column("", [Rect(46.25, 2, 11.7857, 3000.04, "#e07b00")])],
    )

    svg = draw(chart)

    assert 'viewBox="0 0 1000 500"' in svg
    assert '<line x1="1234.6" y1="0.0" x2="1234.6" y2="480.0" class="grid"/>' in svg
    assert '<rect x="46.2" y="2.0" width="11.8" height="3000.0" fill="#e07b00"/>' in svg


def test_every_text_a_table_places_is_escaped():
    table = Table(
        "table-test",
        [Head("Night", numeric=False), Head(SCRIPT, title=f'"{SCRIPT}"')],
        [("2026-02-20", [Cell(SCRIPT)], "ooc")],
    )

    html = draw_table(table)

    assert SCRIPT not in html
    assert re.search(
        f'<th scope="col" class="num" title="{QUOTE}{re.escape(ESCAPED)}{QUOTE}">', html
    )
    assert f'<td class="num">{ESCAPED}</td>' in html
    assert '<tr class="ooc"><th scope="row">2026-02-20</th>' in html


def test_the_charts_name_verdicts_as_the_models_do():
    assert {v: Verdict(v).label for v in VERDICTS} == VERDICT_LABELS
