"""Trends split by tier: tape replays (environment drift) and live agentic
replays (model drift) counted apart."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime

import pytest
from django.urls import reverse

from replayhub.models import Rollup, RollupTotal
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
def tiered_night(db):
    """Two projects' night: four live replays (one divergent, one
    inconclusive) and four tape replays (two divergent)."""
    at = datetime(2026, 2, 20, 23, tzinfo=UTC)
    for slug in ("shop", "billing"):
        item = make_project(slug)
        night = data.night(item, NIGHT, deferred=3)
        live = ("identical", "divergent") if slug == "shop" else ("inconclusive",)
        for verdict in live:
            data.replay(item, finished_at=at, verdict=verdict, night=night)
        taped = ("divergent", "identical") if slug == "shop" else ("divergent",)
        for verdict in taped:
            data.replay(item, finished_at=at, verdict=verdict, night=night, tier="tape")
    data.replay(make_project("other"), finished_at=at, verdict="identical", tier="tape")
    rollup_range(since=NIGHT, until=NIGHT)


def test_a_night_rolls_up_each_tier_on_its_own_row(tiered_night):
    rows = {
        row.tier: row
        for row in Rollup.objects.filter(
            date=NIGHT, model="gpt-5", project__slug="shop"
        )
    }
    assert (rows["agentic"].attempted, rows["agentic"].divergent) == (2, 1)
    assert (rows["tape"].attempted, rows["tape"].divergent) == (2, 1)
    # The budget's deferrals stay on the agentic row with no model.
    empty = Rollup.objects.get(date=NIGHT, model="", project__slug="shop")
    assert (empty.tier, empty.deferred) == ("agentic", 3)
    totals = {
        row.tier: row for row in RollupTotal.objects.filter(date=NIGHT, model="gpt-5")
    }
    assert (totals["agentic"].attempted, totals["agentic"].inconclusive) == (3, 1)
    assert (totals["tape"].attempted, totals["tape"].divergent) == (4, 2)


def test_recounting_a_night_writes_the_same_rows(tiered_night):
    before = sorted(
        Rollup.objects.values_list("project_id", "model", "tier", "attempted")
    )
    rollup_range(since=NIGHT, until=NIGHT)
    after = sorted(
        Rollup.objects.values_list("project_id", "model", "tier", "attempted")
    )
    assert before == after


def test_the_dashboard_shows_the_rates_of_each_tier(as_lead, tiered_night):
    page = as_lead.get(TRENDS, RANGE).content.decode()

    table = page[page.index('id="table-tiers"') :]
    table = table[: table.index("</table>")]
    agentic = table[table.index("agentic (model drift)") :]
    tape = table[table.index("tape (environment drift)") :]
    # agentic: 3 attempted, 1 divergent (33.3%), 1 inconclusive (33.3%)
    assert '<td class="num">3</td><td class="num">1</td>' in agentic
    assert "33.3%" in agentic.split("</tr>")[0]
    # tape: 4 attempted (one of them by no night), 2 divergent, none inconclusive
    assert (
        '<td class="num">4</td><td class="num">2</td><td class="num">50.0%</td>'
        '<td class="num">0</td><td class="num">0.0%</td>'
    ) in tape


@pytest.mark.parametrize(("tier", "attempted"), [("", 7), ("agentic", 3), ("tape", 4)])
def test_the_tier_filter_narrows_every_chart(as_lead, tiered_night, tier, attempted):
    response = as_lead.get(TRENDS, {**RANGE, "tier": tier})
    assert [n.attempted for n in response.context["nights"]] == [attempted]
    if tier:
        page = response.content.decode()
        assert f'<option value="{tier}" selected>' in page
        # Deferrals are a project's count: not known below it.
        assert response.context["filters"].narrowed


def test_the_text_tier_option_still_shows_every_tier(as_lead, tiered_night):
    response = as_lead.get(TRENDS, {**RANGE, "tier": "text"})
    assert [n.attempted for n in response.context["nights"]] == [7]
    assert response.context["text_tier"]
    page = response.content.decode()
    assert '<option value="text" selected>' in page
    assert '<option value="" selected>All tiers' not in page


def test_the_export_names_the_tier_of_each_row(as_lead, tiered_night):
    query = {**RANGE, "tier": "tape", "project": "shop"}
    rows = list(csv.DictReader(io.StringIO(as_lead.get(CSV, query).content.decode())))
    assert [(r["tier"], r["attempted"], r["divergent"]) for r in rows] == [
        ("tape", "2", "1")
    ]


def test_a_tier_filter_that_leaves_out_every_rollup_says_so(as_lead, db):
    """Nights rolled up with agentic replays only: asked for tape, the page
    names the filter, not a missing rollup."""
    at = datetime(2026, 2, 20, 23, tzinfo=UTC)
    shop = make_project("shop")
    data.replay(
        shop, finished_at=at, verdict="identical", night=data.night(shop, NIGHT)
    )
    rollup_range(since=NIGHT, until=NIGHT)

    for query in ({"tier": "tape"}, {"tier": "tape", "project": "shop"}):
        html = as_lead.get(TRENDS, {**RANGE, **query}).content.decode()
        assert "No tape-tier replays in these nights" in html
        assert "match the tier filter" in html
        assert "No rollups for these nights yet" not in html
        assert "manage.py rollup" not in html

    # Nights not rolled up at all still say how to roll them up.
    html = as_lead.get(
        TRENDS, {"since": "2026-01-01", "until": "2026-01-10", "tier": "tape"}
    ).content.decode()
    assert "No rollups for these nights yet" in html
