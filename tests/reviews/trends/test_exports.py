"""CSV and JSON exports, and GET /api/v1/trends: the same rollups as the page."""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from datetime import date, timedelta

import pytest
from django.urls import reverse

from reviews.trends.forms import TrendFilters
from reviews.trends.queries import nightly_sums
from reviews.trends.series import weekly_totals
from tests.factories import make_project
from tests.reviews.trends import data
from tests.reviews.trends.test_dashboard import RANGE, table

TRENDS = reverse("reviews:trends")
CSV = reverse("reviews:trends_export_csv")
JSON = reverse("reviews:trends_export_json")
API = reverse("reviews:api_trends")
NIGHT = date(2026, 2, 20)


@pytest.fixture
def as_lead(client, lead):
    client.force_login(lead)
    return client


@pytest.fixture
def two_projects(db):
    shop, billing = make_project("shop"), make_project("billing")
    for i in range(10):
        day = NIGHT - timedelta(days=i)
        data.rollup(
            shop,
            day,
            attempted=40 + i,
            by_reason={"timeout": i, "flaky_tests": 2},
            confirmed={"equivalent": 1},
        )
        data.rollup(
            shop, day, attempted=20, by_reason={"timeout": 1}, model="claude-opus-4"
        )
        data.rollup(shop, day, attempted=0, by_reason={}, model="", deferred=i)
        data.rollup(
            billing,
            day,
            attempted=30,
            by_reason={"baseline_failed": 3},
            overturned={"divergent": 2},
        )
    return shop


def per_night(rows, key=lambda row: row["date"]):
    nights = defaultdict(lambda: defaultdict(int))
    for row in rows:
        for column in ("attempted", "identical", "equivalent", "divergent"):
            nights[key(row)][column] += int(row[column])
        nights[key(row)]["inconclusive"] += int(row["inconclusive"])
        nights[key(row)]["deferred"] += int(row["deferred"])
    return nights


@pytest.mark.parametrize("query", [{}, {"project": "shop"}, {"model": "gpt-5"}])
def test_the_csv_export_sums_to_the_pages_tables(as_lead, two_projects, query):
    query = {**RANGE, **query}
    html = as_lead.get(TRENDS, query).content.decode()
    response = as_lead.get(CSV, query)

    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert "attachment;" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    nights = per_night(rows)
    mix = table(html, "table-mix")
    assert len(mix) == len(nights) == 10
    for night, attempted, identical, equivalent, divergent, inconclusive in mix:
        counted = nights[night]
        assert [
            attempted,
            identical,
            equivalent,
            divergent,
            inconclusive,
        ] == [
            str(counted[c])
            for c in (
                "attempted",
                "identical",
                "equivalent",
                "divergent",
                "inconclusive",
            )
        ]
    for night, _, _, _, deferred in table(html, "table-coverage"):
        expected = "—" if "model" in query else str(nights[night]["deferred"])
        assert deferred == expected
    reasons = {row[0]: row for row in table(html, "table-reasons")}
    for row in rows:
        assert int(row["inconclusive"]) == sum(
            int(v) for k, v in row.items() if k.startswith("reason:")
        )
    assert int(reasons["2026-02-20"][2]) == nights["2026-02-20"]["inconclusive"]


def test_the_json_export_and_the_api_answer_the_same_rollups(as_lead, two_projects):
    query = {**RANGE, "project": "shop"}
    exported = json.loads(as_lead.get(JSON, query).content)
    api = as_lead.get(API, query)

    assert api.status_code == 200
    assert api.json() == exported
    assert exported["filters"] == {
        "project": "shop",
        "model": None,
        "source": None,
        "tier": None,
        "since": "2026-01-24",
        "until": "2026-02-20",
    }
    first = exported["rollups"][0]
    assert first == {
        "date": "2026-02-11",
        "project": "shop",
        "model": "",
        "source": "code",
        "tier": "agentic",
        "attempted": 0,
        "identical": 0,
        "equivalent": 0,
        "divergent": 0,
        "inconclusive": 0,
        "deferred": 9,
        "reached": 0,
        "by_reason": {},
        "confirmed": {},
        "overturned": {},
    }
    assert len(exported["rollups"]) == 30


def test_the_json_export_matches_the_csv_row_for_row(as_lead, two_projects):
    exported = as_lead.get(JSON, RANGE).json()["rollups"]
    rows = list(csv.DictReader(io.StringIO(as_lead.get(CSV, RANGE).content.decode())))
    assert len(rows) == len(exported) == 40
    for row, item in zip(rows, exported, strict=True):
        assert (row["date"], row["project"], row["model"]) == (
            item["date"],
            item["project"],
            item["model"],
        )
        assert int(row["attempted"]) == item["attempted"]
        assert int(row["confirmed:equivalent"]) == item["confirmed"].get(
            "equivalent", 0
        )
        assert int(row["overturned:divergent"]) == item["overturned"].get(
            "divergent", 0
        )


def test_csv_cells_that_would_run_as_spreadsheet_formulas_are_quoted(as_lead, db):
    data.rollup(
        make_project("shop"), NIGHT, attempted=3, by_reason={}, model="=HYPERLINK(1)"
    )
    text = as_lead.get(CSV, RANGE).content.decode()
    assert "'=HYPERLINK(1)" in text


def test_the_exports_refuse_invalid_filters(as_lead, db):
    bad = {"since": "2026-03-01", "until": "2026-02-01"}
    assert as_lead.get(CSV, bad).status_code == 400
    assert as_lead.get(JSON, bad).status_code == 400
    response = as_lead.get(API, bad)
    assert response.status_code == 400
    assert "until" in response.json()["fields"]


def test_the_page_links_its_exports_with_the_current_filters(as_lead, two_projects):
    html = as_lead.get(TRENDS, {**RANGE, "project": "shop"}).content.decode()
    query = "since=2026-01-24&amp;until=2026-02-20&amp;project=shop"
    assert f'href="{CSV}?{query}"' in html
    assert f'href="{JSON}?{query}"' in html


def test_reason_codes_outside_the_verdict_table_are_still_counted(db):
    shop = make_project("shop")
    data.rollup(shop, NIGHT, attempted=10, by_reason={"timeout": 2, "gpu_melted": 3})
    data.rollup(
        shop, NIGHT, attempted=5, by_reason={"gpu_melted": 1}, model="claude-opus-4"
    )
    data.rollup(shop, NIGHT - timedelta(days=1), attempted=10, by_reason={"timeout": 1})
    filters = TrendFilters(since=NIGHT - timedelta(days=3), until=NIGHT)

    totals, _ = nightly_sums(filters)

    assert [(n.night, dict(n.by_reason)) for n in totals] == [
        (NIGHT - timedelta(days=1), {"timeout": 1}),
        (NIGHT, {"gpu_melted": 4, "timeout": 2}),
    ]


def test_weeks_summed_by_the_database_are_the_nights_summed_into_weeks(db):
    shop, billing = make_project("shop"), make_project("billing")
    since = NIGHT - timedelta(days=40)
    for i in range(-30, 41, 2):
        day = since + timedelta(days=i)
        reasons = {"timeout": 1 + i % 3}
        if i % 10 == 0:
            reasons["gpu_melted"] = 2  # a code outside the verdict table
        data.rollup(shop, day, attempted=20, by_reason=reasons, deferred=i % 4)
        data.rollup(
            billing,
            day,
            attempted=10,
            by_reason={"flaky_tests": 1},
            confirmed={"identical": 1},
            overturned={"divergent": i % 2},
        )
    filters = TrendFilters(since=since, until=NIGHT)

    weeks, decided = nightly_sums(filters, 7)
    nights, nightly_decided = nightly_sums(filters)

    assert weeks == weekly_totals(nights, since, 7)
    assert weeks[0].night == since - timedelta(days=28)
    assert decided == nightly_decided


def test_decisions_count_only_the_nights_shown(db):
    shop = make_project("shop")
    data.rollup(shop, NIGHT, attempted=10, by_reason={}, confirmed={"identical": 2})
    data.rollup(
        shop,
        NIGHT - timedelta(days=10),
        attempted=10,
        by_reason={},
        confirmed={"identical": 5},
        overturned={"divergent": 1},
    )
    filters = TrendFilters(since=NIGHT - timedelta(days=3), until=NIGHT)

    totals, decided = nightly_sums(filters)

    assert len(totals) == 2  # the earlier night is history for the p-chart
    assert decided == {"confirmed": {"identical": 2}, "overturned": {}}
