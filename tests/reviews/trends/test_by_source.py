"""Trends split by source: code runs and rollouts counted apart."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime

import pytest
from django.urls import reverse

from replayhub.models import Rollup
from reviews.trends.rollups import rollup_range
from tests.factories import make_project
from tests.reviews.trends import data

TRENDS = reverse("reviews:trends")
CSV = reverse("reviews:trends_export_csv")
NIGHT = date(2026, 2, 20)
RANGE = {"since": "2026-02-01", "until": "2026-02-20"}


@pytest.fixture
def as_lead(client, lead):
    client.force_login(lead)
    return client


@pytest.fixture
def mixed_night(db):
    shop = make_project("shop")
    night = data.night(shop, NIGHT, deferred=4)
    at = datetime(2026, 2, 20, 23, tzinfo=UTC)
    for verdict in ("identical", "divergent", "divergent"):
        data.replay(shop, finished_at=at, verdict=verdict, night=night)
    data.replay(
        shop, finished_at=at, verdict="equivalent", night=night, source="rollout"
    )
    data.replay(
        shop,
        finished_at=at,
        verdict="inconclusive",
        reason_code="result_malformed",
        night=night,
        source="rollout",
    )
    rollup_range(since=NIGHT, until=NIGHT)
    return shop


def test_a_night_rolls_up_code_runs_and_rollouts_on_separate_rows(mixed_night):
    rows = {row.source: row for row in Rollup.objects.filter(date=NIGHT, model="gpt-5")}
    assert (rows["code"].attempted, rows["code"].divergent) == (3, 2)
    assert (rows["rollout"].attempted, rows["rollout"].equivalent) == (2, 1)
    assert rows["rollout"].by_reason == {"result_malformed": 1}
    # The budget's deferrals stay a project count, on the code row with no model.
    assert Rollup.objects.get(date=NIGHT, model="").deferred == 4


def test_the_dashboard_shows_one_source_or_both(as_lead, mixed_night):
    def attempted(**query):
        response = as_lead.get(TRENDS, {**RANGE, **query})
        return [(n.night, n.attempted) for n in response.context["nights"]]

    assert attempted() == [(NIGHT, 5)]
    assert attempted(source="code") == [(NIGHT, 3)]
    assert attempted(source="rollout") == [(NIGHT, 2)]
    page = as_lead.get(TRENDS, {**RANGE, "source": "rollout"}).content.decode()
    assert "rollouts only" in page
    assert '<option value="rollout" selected>Rollout</option>' in page


def test_an_unknown_source_falls_back_to_both(as_lead, mixed_night):
    response = as_lead.get(TRENDS, {**RANGE, "source": "<b>x</b>"})
    assert [n.attempted for n in response.context["nights"]] == [5]
    assert "<b>x</b>" not in response.content.decode()


def test_the_export_names_the_source_of_each_row(as_lead, mixed_night):
    rows = list(
        csv.DictReader(
            io.StringIO(
                as_lead.get(CSV, {**RANGE, "source": "rollout"}).content.decode()
            )
        )
    )
    assert [(r["source"], r["attempted"]) for r in rows] == [("rollout", "2")]
