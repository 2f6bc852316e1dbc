"""One Model filter on every page that has one: the queue, search and the
trends take a part of a model's name in any case, and each box suggests the
model names known."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.urls import reverse

from replayhub.models import Replay
from reviews import queue_reads
from tests.factories import make_project, make_replay
from tests.reviews.trends import data

pytestmark = pytest.mark.django_db

NIGHT = date(2026, 2, 20)
RANGE = {"since": "2026-02-01", "until": "2026-02-20"}
PLANTED = '<img src=x onerror="alert(1)">'


@pytest.fixture
def as_lead(client, lead):
    client.force_login(lead)
    return client


@pytest.fixture
def replays(db) -> dict[str, Replay]:
    return {
        "small": make_replay(verdict="divergent", model="coder-small", title="S"),
        "large": make_replay(verdict="divergent", model="Big-CODER-2", title="L"),
        "other": make_replay(verdict="divergent", model="gpt-5", title="G"),
    }


def queue_ids(client, **params) -> set[int]:
    response = client.get(reverse("reviews:queue"), params)
    return {row["id"] for row in response.context["rows"]}


def test_the_queue_takes_a_part_of_the_models_name_in_any_case(as_lead, replays):
    coder = {replays["small"].pk, replays["large"].pk}
    assert queue_ids(as_lead, model="coder") == coder
    assert queue_ids(as_lead, model="Coder") == coder
    assert queue_ids(as_lead, model="coder-small") == {replays["small"].pk}
    # A verdict's listing filters the same way.
    assert queue_ids(as_lead, model="CODER", verdict="divergent") == coder


def test_search_and_the_queue_match_the_same_replays(as_lead, replays):
    response = as_lead.get(reverse("reviews:search"), {"model": "Coder"})
    found = {replay.pk for replay, _ in response.context["rows"]}
    assert found == {replays["small"].pk, replays["large"].pk}
    assert found == queue_ids(as_lead, model="Coder")


def test_an_empty_queue_says_what_the_model_filter_matched(as_lead, replays):
    html = as_lead.get(reverse("reviews:queue"), {"model": "llama"}).content.decode()
    assert "Nothing awaits review of a model matching “llama”." in html
    html = as_lead.get(
        reverse("reviews:queue"), {"model": "llama", "verdict": "divergent"}
    ).content.decode()
    assert "No finished replay of a model matching “llama”." in html
    html = as_lead.get(reverse("reviews:search"), {"model": "llama"}).content.decode()
    assert "No replay of a model matching “llama” passes these filters." in html


@pytest.mark.parametrize("page", ["reviews:queue", "reviews:search"])
def test_the_model_box_suggests_the_known_names_escaped(as_lead, replays, page):
    make_replay(verdict="divergent", model=PLANTED)
    html = as_lead.get(reverse(page)).content.decode()
    for name in ("Big-CODER-2", "coder-small", "gpt-5"):
        assert f'<option value="{name}">' in html
    assert PLANTED not in html
    assert '<option value="&lt;img src=x onerror=&quot;alert(1)&quot;&gt;">' in html
    assert 'list="queue-models"' in html or 'list="search-models"' in html


def test_the_suggestions_are_bounded(db, monkeypatch):
    for n in range(4):
        make_replay(model=f"model-{n}")
    monkeypatch.setattr(queue_reads, "MODEL_NAMES_SHOWN", 3)
    assert queue_reads.model_names() == ["model-0", "model-1", "model-2"]


def test_an_empty_model_filter_still_shows_every_model(as_lead, replays):
    assert len(queue_ids(as_lead, model="")) == 3


@pytest.mark.parametrize("project", ["", "shop"])
def test_the_trends_take_a_part_of_the_models_name_in_any_case(as_lead, project):
    shop = make_project("shop")
    data.rollup(shop, NIGHT, attempted=10, by_reason={}, model="coder-small")
    data.rollup(shop, NIGHT, attempted=20, by_reason={}, model="Big-CODER-2")
    data.rollup(shop, NIGHT, attempted=40, by_reason={}, model="gpt-5")

    def attempted(model: str) -> list[tuple[date, int]]:
        query = {**RANGE, "model": model, "project": project}
        response = as_lead.get(reverse("reviews:trends"), query)
        return [(n.night, n.attempted) for n in response.context["nights"]]

    assert attempted("coder") == [(NIGHT, 30)]
    assert attempted("CODER-small") == [(NIGHT, 10)]
    assert attempted("") == [(NIGHT, 70)]


def test_the_trends_say_what_the_model_filter_matched(as_lead, db):
    shop = make_project("shop")
    data.rollup(shop, NIGHT, attempted=10, by_reason={}, model="coder-small")
    data.rollup(
        shop, NIGHT - timedelta(days=1), attempted=5, by_reason={}, model=PLANTED
    )

    html = as_lead.get(
        reverse("reviews:trends"), {**RANGE, "model": "llama"}
    ).content.decode()
    assert "of a model matching “llama” in these nights" in html
    html = as_lead.get(
        reverse("reviews:trends"), {**RANGE, "model": "coder"}
    ).content.decode()
    assert "models matching “coder”" in html
    assert '<option value="coder-small">' in html
    assert PLANTED not in html


def test_the_trends_empty_state_finds_the_latest_nights_of_the_models_matched(
    as_lead, db
):
    shop = make_project("shop")
    data.rollup(shop, date(2025, 6, 30), attempted=5, by_reason={}, model="Coder-1")
    data.rollup(shop, date(2025, 8, 30), attempted=5, by_reason={}, model="gpt-5")
    html = as_lead.get(
        reverse("reviews:trends"), {**RANGE, "model": "coder"}
    ).content.decode()
    assert "the night of Mon 30 Jun 2025" in html
