"""The trends page: filters, charts with their tables, the banner, escaping, queries."""

from __future__ import annotations

import re
from datetime import date, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from reviews.trends.charts import (
    Frame,
    control_chart,
    coverage_chart,
    deferred_chart,
    mix_chart,
    rate_scale,
    reason_chart,
)
from reviews.trends.rollups import rollup_range
from reviews.trends.series import NightTotals, reason_label, top_reasons
from reviews.trends.statistics import p_chart
from tests.factories import make_project
from tests.reviews.trends import data

TRENDS = reverse("reviews:trends")
BAD_NIGHT = date(2026, 2, 20)
RANGE = {"since": "2026-01-24", "until": "2026-02-20"}  # 28 nights


@pytest.fixture
def as_lead(client, lead):
    client.force_login(lead)
    return client


@pytest.fixture
def bad_night(db):
    shop = make_project("shop")
    data.steady_then_bad(shop, BAD_NIGHT)
    return shop


def table(html: str, table_id: str) -> list[list[str]]:
    """The body rows of one of the page's tables, as cell texts."""
    body = re.search(
        rf'<table[^>]*id="{table_id}".*?<tbody>(.*?)</tbody>', html, re.S
    ).group(1)
    return [
        [
            re.sub(r"<[^>]+>", "", cell).strip()
            for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)
        ]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)
    ]


def results(response) -> str:
    html = response.content.decode()
    return html[html.index('<section id="trends-results"') :]


def test_a_known_out_of_control_night_is_marked_and_the_banner_names_its_reason(
    as_lead, bad_night
):
    html = as_lead.get(TRENDS, RANGE).content.decode()

    banner = re.search(r'<div class="notice trend-alarm bad".*?</div>', html, re.S)
    assert banner, "no out-of-control banner"
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", banner.group(0)))
    assert "Fri 20 Feb 2026" in text
    assert "35.0% inconclusive (35 of 100 replays)" in text
    assert "upper limit of 19.0%" in text
    assert "center 10.0%" in text
    assert "Original fails in sandbox baseline_failed: 25.0% of replays (25)" in text
    assert "timeout" not in text and "flaky_tests" not in text

    control = table(html, "table-control")
    assert control[0][0] == "2026-02-20"
    assert control[0][-1] == "out of control"
    assert control[0][3:6] == ["10.0%", "1.0%", "19.0%"]
    assert all(row[-1] == "in control" for row in control[1:])
    # The chart marks the same night with a ring and its value.
    assert html.count('class="ooc"><title>2026-02-20: 35.0%, out of control') == 1


def test_the_limits_come_from_the_trailing_nights_before_the_range(as_lead, bad_night):
    # Only the bad night is shown; its limits still use the 28 nights before it.
    response = as_lead.get(TRENDS, {"since": "2026-02-20", "until": "2026-02-20"})
    control = table(response.content.decode(), "table-control")
    assert control == [
        ["2026-02-20", "100", "35.0%", "10.0%", "1.0%", "19.0%", "out of control"]
    ]


def test_steady_nights_raise_no_banner(as_lead, bad_night):
    response = as_lead.get(TRENDS, {"since": "2026-01-24", "until": "2026-02-19"})
    assert response.context["alarm"] is None
    assert b"trend-alarm" not in response.content


def test_an_unusually_good_night_is_reported_as_low_not_as_a_problem(as_lead, db):
    shop = make_project("shop")
    for i in range(30, 0, -1):
        data.rollup(
            shop,
            BAD_NIGHT - timedelta(days=i),
            attempted=100,
            by_reason={"timeout": 10},
        )
    data.rollup(shop, BAD_NIGHT, attempted=400, by_reason={})
    html = as_lead.get(TRENDS, RANGE).content.decode()
    assert 'class="notice trend-alarm good"' in html
    assert "Unusually low" in html


def test_every_chart_is_an_inline_svg_with_its_numbers_in_a_table(as_lead, bad_night):
    response = as_lead.get(TRENDS, RANGE)
    html = response.content.decode()

    assert html.count('<svg class="chart" viewBox=') == 6
    for chart in ["reasons", "control", "mix", "coverage", "deferred", "overturns"]:
        assert f'id="c-{chart}"' in html
    for table_id in [
        "table-reasons",
        "table-control",
        "table-mix",
        "table-coverage",
        "table-overturns",
    ]:
        assert len(table(html, table_id)) >= 4
    # No script and no third-party host: the charts are drawn by the server.
    # (An attribute's value, not the page's text: a CSRF token may spell "cdn".)
    loaded = re.findall(r'<(?:script|link|img)\b[^>]*\b(?:src|href)="([^"]*)"', html)
    assert loaded and all(url.startswith("/") for url in loaded), loaded

    reasons = table(html, "table-reasons")
    assert reasons[0][:4] == ["2026-02-20", "100", "35", "35.0%"]
    # Its reason columns by name, as the legend names them; the code on hover.
    head = html[html.index('id="table-reasons"') :]
    head = head[: head.index("</thead>")]
    columns = re.findall(r'title="([a-z_]+)"><svg.*?</svg> ([^<]+)</th>', head)
    assert len(columns) >= 2
    assert all(name == reason_label(code) != code for code, name in columns), columns
    coverage = table(html, "table-coverage")
    assert coverage[0] == ["2026-02-20", "100", "65", "65.0%", "7"]
    mix = table(html, "table-mix")
    assert mix[0] == ["2026-02-20", "100", "32", "16", "17", "35"]
    assert len(mix) == 28


def test_charts_print_their_axes_legends_and_latest_values(as_lead, bad_night):
    html = as_lead.get(TRENDS, RANGE).content.decode()
    # Date labels along the x axis, percents along the y axis.
    assert ">Feb 20</text>" in html
    assert re.search(r'class="tick">\d+%</text>', html)
    # Legends name every reason with its value on the latest night.
    assert "Original fails in sandbox <code>baseline_failed</code>" in html
    assert "25.0% (25) last night" in html
    assert "Identical" in html and "32% (32) last night" in html
    # The control chart names its latest limits.
    assert ">UCL 19%</text>" in html and ">CL 10%</text>" in html


def test_the_overturn_rate_is_overturned_over_decided_per_verdict(as_lead, db):
    shop = make_project("shop")
    data.rollup(
        shop,
        BAD_NIGHT,
        attempted=10,
        by_reason={"timeout": 2},
        confirmed={"equivalent": 3, "divergent": 1},
        overturned={"equivalent": 1},
    )
    data.rollup(
        shop,
        BAD_NIGHT,
        attempted=5,
        by_reason={},
        model="claude-opus-4",
        overturned={"divergent": 1, "inconclusive": 2},
    )
    rows = table(as_lead.get(TRENDS, RANGE).content.decode(), "table-overturns")
    assert rows == [
        ["Identical", "6", "0", "0", "—"],
        ["Equivalent", "3", "3", "1", "25.0%"],
        ["Divergent", "4", "1", "1", "50.0%"],
        ["Inconclusive", "2", "0", "2", "100.0%"],
    ]


def test_filters_narrow_the_rollups_by_project_model_and_dates(as_lead, db):
    shop, billing = make_project("shop"), make_project("billing")
    data.rollup(shop, BAD_NIGHT, attempted=10, by_reason={"timeout": 1})
    data.rollup(
        shop, BAD_NIGHT, attempted=20, by_reason={"timeout": 2}, model="claude-opus-4"
    )
    data.rollup(billing, BAD_NIGHT, attempted=40, by_reason={}, deferred=3, model="")
    data.rollup(shop, BAD_NIGHT - timedelta(days=40), attempted=99, by_reason={})

    def attempted(**query):
        response = as_lead.get(TRENDS, {**RANGE, **query})
        return [(n.night, n.attempted) for n in response.context["nights"]]

    assert attempted() == [(BAD_NIGHT, 70)]
    assert attempted(project="shop") == [(BAD_NIGHT, 30)]
    assert attempted(project="shop", model="claude-opus-4") == [(BAD_NIGHT, 20)]
    assert attempted(since="2026-01-01", until="2026-01-20") == [
        (BAD_NIGHT - timedelta(days=40), 99)
    ]


def test_the_default_range_is_the_last_56_nights(as_lead, db):
    today = timezone.localdate()
    shop = make_project("shop")
    data.rollup(shop, today - timedelta(days=55), attempted=3, by_reason={})
    data.rollup(shop, today - timedelta(days=56), attempted=4, by_reason={})

    response = as_lead.get(TRENDS)

    filters = response.context["filters"]
    assert (filters.since, filters.until, filters.nights) == (
        today - timedelta(days=55),
        today,
        56,
    )
    assert [n.attempted for n in response.context["nights"]] == [3]


def test_invalid_filters_say_so_and_fall_back_to_the_default(as_lead, db):
    response = as_lead.get(
        TRENDS, {"since": "2026-03-01", "until": "2026-02-01", "project": "nope"}
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "Last night: It is before the first night." in html
    assert "Project: Select a valid choice" in html
    assert response.context["filters"].project == ""


def _said(response) -> str:
    html = response.content.decode()
    start = html.index('id="trends-refused">')
    return html[start : html.index("</p>", start)]


def test_refused_dates_are_named_and_both_really_shown_at_their_defaults(as_lead, db):
    today = timezone.localdate()
    default = (today - timedelta(days=55), today, 56)

    backwards = as_lead.get(TRENDS, {"since": "2026-12-31", "until": "2026-01-01"})

    filters = backwards.context["filters"]
    assert (filters.since, filters.until, filters.nights) == default
    said = _said(backwards)
    assert "Last night: It is before the first night." in said
    assert "Shown at their defaults instead: First night, Last night." in said
    assert "<b>56 nights</b>" in backwards.content.decode()

    garbled = as_lead.get(
        TRENDS, {"since": "garbage", "until": "1900-01-01", "project": "nope"}
    )

    filters = garbled.context["filters"]
    assert (filters.since, filters.until, filters.nights) == default
    assert filters.project == ""
    said = _said(garbled)
    assert "First night: Enter a valid date." in said
    assert "Last night: Pick a night from 2000-01-01 on." in said
    assert "Project: Select a valid choice." in said
    assert "Shown at their defaults instead: Project, First night, Last night." in said
    assert "1899" not in garbled.content.decode()


def test_a_newcomer_is_told_how_to_get_rollups(as_lead, db):
    response = as_lead.get(TRENDS, {**RANGE, "project": make_project("shop").slug})
    html = response.content.decode()
    assert "No rollups for these nights yet" in html
    assert "python manage.py rollup --since 2026-01-24 --project shop" in html
    assert "when a project's night closes" in html


def test_the_empty_state_links_to_the_latest_nights_that_have_rollups(as_lead, db):
    shop = make_project("shop")
    data.rollup(shop, date(2025, 6, 30), attempted=5, by_reason={})
    html = as_lead.get(TRENDS, RANGE).content.decode()
    assert "the night of Mon 30 Jun 2025" in html
    assert 'href="?until=2025-06-30"' in html


def test_reason_codes_and_model_names_are_escaped(as_lead, db):
    shop = make_project("shop")
    model = '<img src=x onerror="alert(1)">'
    reason = "<script>alert(2)</script>"
    for i in range(29, 0, -1):
        data.rollup(
            shop,
            BAD_NIGHT - timedelta(days=i),
            attempted=100,
            by_reason={"x": 5},
            model=model,
        )
    data.rollup(shop, BAD_NIGHT, attempted=100, by_reason={reason: 50}, model=model)

    html = as_lead.get(TRENDS, {**RANGE, "model": model}).content.decode()

    assert reason not in html and model not in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html
    assert "trend-alarm bad" in html  # the banner names the escaped reason


def test_the_page_reads_only_rollups_in_a_few_queries(as_lead, bad_night):
    data.rollup(make_project("billing"), BAD_NIGHT, attempted=3, by_reason={})
    with CaptureQueriesContext(connection) as cold:
        response = as_lead.get(TRENDS, RANGE)
    assert response.status_code == 200
    with CaptureQueriesContext(connection) as warm:
        again = as_lead.get(TRENDS, RANGE)
    assert results(again) == results(response)

    for queries, rollup_queries in ((cold, 3), (warm, 1)):
        sql = [q["sql"] for q in queries]
        assert not [s for s in sql if "replayhub_replay" in s or "replayhub_run" in s]
        assert len([s for s in sql if "replayhub_rollup" in s]) == rollup_queries
        assert len(sql) <= 10


def test_a_recomputed_night_shows_at_once_despite_the_cache(as_lead, reviewer):
    shop = make_project("shop", tz="UTC", start_hour=22)
    night = data.night(shop, BAD_NIGHT)
    finished = night.window_start + timedelta(hours=1)
    data.replay(shop, night=night, verdict="identical", finished_at=finished)
    rollup_range(since=BAD_NIGHT, until=BAD_NIGHT)
    assert table(as_lead.get(TRENDS, RANGE).content.decode(), "table-mix")[0][1] == "1"

    data.replay(shop, night=night, verdict="divergent", finished_at=finished)
    rollup_range(since=BAD_NIGHT, until=BAD_NIGHT)

    mix = table(as_lead.get(TRENDS, RANGE).content.decode(), "table-mix")
    assert mix[0] == ["2026-02-20", "2", "1", "0", "1", "0"]


def test_htmx_requests_get_only_the_results(as_lead, bad_night):
    response = as_lead.get(TRENDS, RANGE, headers={"HX-Request": "true"})
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="trends-results"')
    assert "<form" not in html
    assert "HX-Request" in response["Vary"]


def test_geometry_keeps_every_bar_inside_the_plot():
    nights = [
        NightTotals(
            night=date(2026, 1, 1) + timedelta(days=i),
            attempted=50,
            identical=10,
            equivalent=10,
            divergent=10,
            inconclusive=20,
            by_reason={"timeout": 15, "weird": 5},
        )
        for i in range(56)
    ]
    frame = Frame(date(2026, 1, 1), date(2026, 2, 25))
    for chart in (
        reason_chart(nights, ["timeout", "other"], frame),
        mix_chart(nights, frame),
    ):
        for column in chart.columns:
            for rect in column.rects:
                assert frame.left <= rect.x and rect.x + rect.w <= frame.width
                assert frame.top - 0.1 <= rect.y
                assert rect.y + rect.h <= frame.bottom_y + 0.1
    stack = reason_chart(nights, ["timeout", "other"], frame).columns[0]
    heights = [r.h for r in stack.rects]
    assert heights[0] == pytest.approx(3 * heights[1], abs=0.3)


@pytest.mark.parametrize(
    ("peak", "top"), [(0.0, 0.01), (0.04, 0.05), (0.1, 0.2), (0.35, 0.4), (0.99, 1.0)]
)
def test_the_rate_axis_tops_out_at_a_tidy_value_above_the_peak(peak, top):
    assert rate_scale(peak) == top


@pytest.mark.parametrize(
    ("peak", "ticks"),
    [(1, ["0", "1"]), (2, ["0", "1", "2"]), (4, ["0", "5"]), (9, ["0", "5", "10"])],
)
def test_the_deferred_runs_axis_counts_in_whole_runs(peak, ticks):
    nights = [NightTotals(night=date(2026, 1, 1), attempted=5, deferred=peak)]
    frame = Frame(date(2026, 1, 1), date(2026, 1, 28))
    chart = deferred_chart(nights, frame)
    assert [t.text for t in chart.texts if t.anchor == "end"] == ticks


def test_reasons_past_the_top_six_are_stacked_together_as_other():
    night = NightTotals(
        date(2026, 1, 1),
        attempted=100,
        inconclusive=28,
        by_reason={f"r{i}": i for i in range(1, 8)},
    )
    assert top_reasons([night]) == ["r7", "r6", "r5", "r4", "r3", "r2", "other"]


def test_a_missing_reason_code_is_named_as_such():
    assert reason_label("") == "No reason code"
    assert reason_label("timeout") == "Time limit reached"
    assert reason_label("gpu_melted") == "gpu_melted"


def test_weeks_in_a_row_are_joined_by_one_line_as_nights_are():
    since = date(2024, 2, 22)
    weeks = [
        NightTotals(since + timedelta(days=7 * i), attempted=70, inconclusive=7 + i % 3)
        for i in range(-4, 40)
    ]
    frame = Frame(since, since + timedelta(days=7 * 40 - 1), step=7)
    shown = [w for w in weeks if w.night >= since]

    coverage = coverage_chart(shown, frame)
    points = [p for p in p_chart([w.as_rate() for w in weeks]) if p.night >= since]
    control = control_chart(points, frame)

    assert [p.cls for p in coverage.polylines] == ["coverage"]
    assert len(coverage.polylines[0].points.split()) == 40
    assert sorted(p.cls for p in control.polylines) == [
        "center",
        "limit",
        "limit",
        "rate",
    ]
    # A week with no replays breaks the line, as a night does.
    gap = [w for w in shown if w.night != since + timedelta(days=7 * 20)]
    assert len(coverage_chart(gap, frame).polylines) == 2


def test_two_years_are_shown_as_weeks_and_the_page_says_so(as_lead, db):
    shop = make_project("shop")
    last = date(2026, 2, 20)
    since = last - timedelta(days=730)
    for i in range(0, 731, 3):
        data.rollup(
            shop,
            since + timedelta(days=i),
            attempted=10,
            by_reason={"timeout": 1},
            deferred=1,
        )
    window = {"since": since.isoformat(), "until": last.isoformat()}

    html = results(as_lead.get(TRENDS, window))

    assert "Shown as weeks" in html
    rows = table(html, "table-mix")
    # 731 nights from the first: 104 whole weeks and one of three nights.
    assert len(rows) == 105
    assert rows[0][0] == (since + timedelta(days=728)).isoformat()
    assert rows[-1][0] == since.isoformat()
    # Every night's replays are in some week: a rollup every third night.
    assert sum(int(row[1]) for row in rows) == 10 * len(range(0, 731, 3))
    # The first week holds the nights since+0, +3 and +6.
    assert rows[-1][1] == "30"

    short = results(as_lead.get(TRENDS, RANGE))
    assert "Shown as weeks" not in short
    # 28 nights: a row for each night that has a rollup, as before.
    nights = {since + timedelta(days=i) for i in range(0, 731, 3)}
    first = date.fromisoformat(RANGE["since"])
    shown = {first + timedelta(days=i) for i in range(28)} & nights
    assert [row[0] for row in table(short, "table-mix")] == [
        night.isoformat() for night in sorted(shown, reverse=True)
    ]
