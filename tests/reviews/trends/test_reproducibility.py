"""Reproducibility on the trends page and in its JSON export: replicated runs
by project, agent, model and tier, their interval and pass^k."""

from __future__ import annotations

import csv
import dataclasses
import io
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from replayhub.models import Replay, Run
from reviews.trends.forms import TrendFilters
from reviews.trends.reproducibility import reproducibility
from tests.factories import make_project, make_replay

TRENDS = reverse("reviews:trends")
PARTIAL = reverse("reviews:trends_reproducibility")
EXPORT = reverse("reviews:trends_export_json")


def replicated(run: Run, *verdicts: str, tier: str = "agentic") -> None:
    made = [
        make_replay(verdict=v, run=run, project=run.project, model=run.model)
        for v in verdicts
    ]
    Replay.objects.filter(pk__in=[r.pk for r in made]).update(tier=tier, replicate=True)


@pytest.fixture
def runs(db):
    """Two replicated runs of one model, one run never replicated."""
    project = make_project("shop")
    first = make_replay(verdict="identical", project=project, model="m-<1>").run
    replicated(first, "identical", "divergent")  # 2 of 3
    second = make_replay(verdict="identical", project=project, model="m-<1>").run
    replicated(second, "identical", "inconclusive")  # 2 of 2
    replicated(second, "identical", "divergent", tier="tape")
    make_replay(verdict="divergent", project=project, model="m-<1>")  # no replicate
    return first, second


def window() -> TrendFilters:
    today = timezone.localdate()
    return TrendFilters(since=today.replace(day=1), until=today)


def test_groups_pool_the_samples_and_estimate_pass_k_per_run(runs):
    live, tape = reproducibility(window())

    assert (live.tier, live.runs, live.successes, live.failures) == ("agentic", 2, 4, 1)
    assert live.inconclusive == 1
    low, high = live.interval
    assert low < 0.8 < high
    # pass^1: the mean of 2/3 and 2/2; pass^2: of 1/3 and 1; pass^3: of 0
    # and nothing (the second run has two samples); no run has four.
    assert live.pass_k == pytest.approx([5 / 6, 2 / 3, 0.0, None, None])
    assert (tape.tier, tape.runs, tape.successes, tape.failures) == ("tape", 1, 1, 1)


def test_the_page_and_the_export_carry_it(client, lead, runs):
    client.force_login(lead)
    today = timezone.localdate()
    query = {"since": today.replace(day=1).isoformat(), "until": today.isoformat()}

    page = client.get(TRENDS, query).content.decode()
    html = client.get(PARTIAL, query).content.decode()
    data = client.get(EXPORT, query).json()

    # The page reads only rollups: the table comes after it, from the replays.
    assert f'hx-get="{PARTIAL}?' in page
    assert 'id="reproducibility"' in html
    assert "m-&lt;1&gt;" in html and "m-<1>" not in html
    assert "live (model)" in html and "tape (environment)" in html
    (live, _tape) = data["reproducibility"]
    assert live["pass_k"]["1"] == pytest.approx(5 / 6, abs=1e-4)
    assert live["pass_k"]["4"] is None
    assert live["confidence"] == 0.9


def test_the_table_downloads_as_csv_from_its_own_link(client, lead, runs):
    client.force_login(lead)
    today = timezone.localdate()
    query = {"since": today.replace(day=1).isoformat(), "until": today.isoformat()}
    html = client.get(PARTIAL, query).content.decode()
    link = re.search(r'href="([^"]*table=reproducibility)"', html)
    assert link, html

    response = client.get(link[1].replace("&amp;", "&"))

    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert "trends-reproducibility-all-projects" in response["Content-Disposition"]
    live, tape = csv.DictReader(io.StringIO(response.content.decode()))
    assert (live["model"], live["tier"], live["runs"]) == ("m-<1>", "agentic", "2")
    assert (live["successes"], live["failures"], live["inconclusive"]) == (
        "4",
        "1",
        "1",
    )
    assert float(live["interval_low"]) < 0.8 < float(live["interval_high"])
    assert float(live["pass^1"]) == pytest.approx(5 / 6, abs=1e-4)
    assert live["pass^4"] == ""
    assert (tape["tier"], tape["successes"], tape["failures"]) == ("tape", "1", "1")


def test_the_model_filter_matches_part_of_the_name_in_any_case(runs):
    project = runs[0].project
    other = make_replay(verdict="identical", project=project, model="other").run
    replicated(other, "identical")
    whole = reproducibility(window())
    part = reproducibility(dataclasses.replace(window(), model="M-<"))
    none = reproducibility(dataclasses.replace(window(), model="zzz"))

    # As the queue's and search's Model filter: "M-<" is part of "m-<1>".
    assert sorted((g.model, g.tier, g.runs) for g in whole) == [
        ("m-<1>", "agentic", 2),
        ("m-<1>", "tape", 1),
        ("other", "agentic", 1),
    ]
    assert sorted((g.model, g.tier) for g in part) == [
        ("m-<1>", "agentic"),
        ("m-<1>", "tape"),
    ]
    assert none == []
