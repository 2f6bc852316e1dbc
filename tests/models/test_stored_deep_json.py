"""Rows stored before reads were bounded -- a record nested ~950 deep, a seed,
a replay's evidence -- are written straight into the database here, as an old
import left them, and every page and API that loads them still answers 200:
the value too deep to read shows as refused, the rest of the row as it is."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.urls import reverse

from replayhub.lib.boundedjson import REFUSED_KEY, STORED_MAX_DEPTH
from replayhub.models import Replay, Run, RunSource, Seed
from tests.factories import make_project, make_replay

pytestmark = pytest.mark.django_db

REFUSED = f"not shown: the JSON nests deeper than {STORED_MAX_DEPTH} levels"


def nested(levels: int) -> str:
    return "[" * levels + '"deep"' + "]" * levels


def store(model, pk: int, **columns: str) -> None:
    """``columns`` (JSON text) written to the row as they are, past the ORM."""
    table = model._meta.db_table
    assignments = ", ".join(f"{name} = %s" for name in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {assignments} WHERE id = %s",  # noqa: S608
            [*columns.values(), pk],
        )


@pytest.fixture
def deep_run(db):
    replay = make_replay(verdict="divergent", project=make_project("shop"))
    run = replay.run
    tape = [{"provider_kind": "anthropic", "path": "/v1/messages", "x": None}]
    deep = nested(950)
    raw = f'{{"tape": {json.dumps(tape)}, "pad": {deep}}}'
    store(Run, run.pk, raw=raw, usage=f'{{"input_tokens": 3, "pad": {deep}}}')
    store(Replay, replay.pk, evidence=f'{{"rollout": {{"completion": {deep}}}}}')
    return run, replay


def test_a_value_stored_too_deep_reads_as_refused_and_the_row_reads(deep_run):
    run, replay = deep_run
    run = Run.objects.get(pk=run.pk)
    assert run.raw == {REFUSED_KEY: REFUSED}
    assert run.usage == {REFUSED_KEY: REFUSED}
    assert run.record[REFUSED_KEY] == REFUSED
    assert run.record["prompt"] == run.prompt
    assert Replay.objects.get(pk=replay.pk).evidence == {REFUSED_KEY: REFUSED}


def test_a_value_stored_within_twice_the_bound_reads_whole(deep_run):
    run, _ = deep_run
    store(Run, run.pk, raw=f'{{"pad": {nested(STORED_MAX_DEPTH - 1)}}}')
    assert Run.objects.get(pk=run.pk).raw["pad"][0][0][0]


@pytest.mark.parametrize(
    "page",
    [
        "project page",
        "search",
        "run page",
        "replay page",
        "queue",
        "run api",
        "replay api",
        "replay api full",
    ],
)
def test_every_page_that_loads_a_deep_row_answers(client, lead, deep_run, page):
    run, replay = deep_run
    url = {
        "project page": reverse("reviews:project_detail", args=["shop"]),
        "search": reverse("reviews:search") + "?q=Task",
        "run page": reverse("reviews:run_detail", args=[run.pk]),
        "replay page": reverse("reviews:replay_detail", args=[replay.pk]),
        "queue": reverse("reviews:queue"),
        "run api": reverse("api_run_detail", args=[run.pk]),
        "replay api": reverse("api_replay_detail", args=[replay.pk]),
        "replay api full": reverse("api_replay_detail", args=[replay.pk]) + "?full=1",
    }[page]
    client.force_login(lead)
    client.raise_request_exception = False

    response = client.get(url)

    assert response.status_code == 200
    if page == "run api":
        assert response.json()["raw"][REFUSED_KEY] == REFUSED
        assert response.json()["usage"] == {REFUSED_KEY: REFUSED}
    if page.startswith("replay api"):
        assert response.json()["evidence"] == {REFUSED_KEY: REFUSED}


def test_a_rollouts_seed_stored_too_deep_shows_refused_on_its_run(client, lead):
    run = Run.objects.create(
        project=make_project("shop"), external_id="trace-1", source=RunSource.ROLLOUT
    )
    seed = Seed.objects.create(
        run=run, number=1, key="trace-1:1", kind="continue", anchor="tool-call",
        anchor_node=1,
    )  # fmt: skip
    store(Seed, seed.pk, messages=nested(950), continuation=nested(950))
    client.force_login(lead)

    page = client.get(reverse("reviews:run_detail", args=[run.pk]))
    api = client.get(reverse("api_run_detail", args=[run.pk]))

    assert page.status_code == api.status_code == 200
    assert api.json()["seeds"][0]["messages"] == [{REFUSED_KEY: REFUSED}]
