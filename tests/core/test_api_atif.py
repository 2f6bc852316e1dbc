"""The ATIF exports over HTTP: a run's conversation and a replay's tape as a
JSON download, with the run and replay endpoints' own authentication and
refusals, nothing blind review hides, and the pages' link to them shown only
when there is something to export."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.urls import reverse

from replayhub.gateway import tape
from replayhub.ingest.lines import split_lines
from replayhub.ingest.transcripts import atif, claude_code
from replayhub.models import Run, Tape
from reviews.models import ReviewPolicy
from tests.factories import make_project, make_replay
from tests.ingest.test_atif_export import (
    SCRIPT,
    SESSION,
    anthropic_tape,
    openai_tape,
    read_file,
)

pytestmark = pytest.mark.django_db


def imported_run() -> Run:
    record = read_file(SESSION, claude_code.parse)
    return Run.objects.create(
        project=make_project(),
        external_id=record["external_id"],
        prompt=record["prompt"],
        output=record["output"],
        model=record["model"],
        usage=record["usage"],
        raw={k: v for k, v in record.items() if k not in ("prompt", "output")},
    )


def taped_replay(**fields):
    replay = make_replay(**fields)
    exchanges = tape.from_record_tape(anthropic_tape() + openai_tape()[1:])
    row = Tape.of(exchanges, truncated=False)
    row.replay = replay
    row.save()
    replay.cost_usd = Decimal("0.25")
    replay.save(update_fields=["cost_usd"])
    return replay


def read_back(data: bytes) -> dict:
    [draft] = list(
        atif.parse(
            split_lines([data], max_line_bytes=len(data) + 1), limit=len(data) + 1
        )
    )
    return draft.record


def test_a_runs_conversation_downloads_as_an_atif_file(client, reviewer):
    run = imported_run()
    client.force_login(reviewer)

    response = client.get(reverse("api_run_atif", args=[run.pk]))

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == (
        f'attachment; filename="shop-run-{run.pk}.atif.json"'
    )
    again = read_back(response.content)
    assert again["prompt"] == run.prompt
    assert again["usage"]["input_tokens"] == run.usage["input_tokens"]
    [call] = [c for t in atif.turns(again["transcript"]) for c in t.calls]
    assert (call.id, call.name) == ("toolu_1", "Read")
    assert json.loads(response.content)["extra"]["replayhub"]["run"] == run.pk


def test_a_replays_tape_downloads_with_its_cost_only_for_those_who_see_money(
    client, reviewer, lead
):
    replay = taped_replay()
    url = reverse("api_replay_atif", args=[replay.pk])

    client.force_login(lead)
    shown = client.get(url)
    client.force_login(reviewer)
    hidden = client.get(url)

    assert shown.status_code == hidden.status_code == 200
    assert shown["Content-Disposition"] == (
        f'attachment; filename="shop-replay-{replay.pk}.atif.json"'
    )
    assert json.loads(shown.content)["final_metrics"]["total_cost_usd"] == 0.25
    assert "total_cost_usd" not in json.loads(hidden.content)["final_metrics"]
    again = read_back(hidden.content)
    # Untrusted text is data in a JSON file, never markup.
    assert again["prompt"] == f"fix the cart {SCRIPT}"
    # Two Anthropic calls, then an OpenAI one: a step and its tokens each.
    assert again["usage"] == {"input_tokens": 440, "output_tokens": 54, "turns": 3}


def test_the_exports_refuse_as_the_run_and_replay_endpoints_do(
    client, reviewer, nobody
):
    run = imported_run()
    replay = taped_replay()
    urls = [
        reverse("api_run_atif", args=[run.pk]),
        reverse("api_replay_atif", args=[replay.pk]),
    ]

    for url in urls:
        client.logout()
        anonymous = client.get(url)
        assert anonymous.status_code == 401 and "log in" in anonymous.json()["error"]
        client.force_login(nobody)
        assert client.get(url).status_code == 403
        assert client.post(url).status_code == 405
    client.force_login(reviewer)
    assert client.get(reverse("api_run_atif", args=[999999])).json() == {
        "error": "there is no run 999999"
    }
    assert client.get(reverse("api_replay_atif", args=[999999])).status_code == 404


def test_a_run_or_replay_with_nothing_to_export_is_a_one_line_404(client, reviewer):
    bare = make_replay()
    client.force_login(reviewer)

    run = client.get(reverse("api_run_atif", args=[bare.run_id]))
    replay = client.get(reverse("api_replay_atif", args=[bare.pk]))

    assert (run.status_code, replay.status_code) == (404, 404)
    assert run.json() == {
        "error": f"run {bare.run_id} has no conversation or tape to export"
    }
    assert replay.json() == {"error": f"replay {bare.pk} has no tape to export"}


def test_blind_review_hides_nothing_more_from_the_export_than_the_api(client, reviewer):
    replay = taped_replay(verdict="divergent")
    ReviewPolicy.objects.create(project=replay.project, blind=True)
    client.force_login(reviewer)

    api = client.get(reverse("api_replay_detail", args=[replay.pk])).json()
    response = client.get(reverse("api_replay_atif", args=[replay.pk]))

    assert api["blind"] is True and api["verdict"] is None
    assert response.status_code == 200
    text = response.content.decode().lower()
    for secret in ("divergent", replay.reason_code, replay.reason.lower()):
        assert secret not in text
    # The tape itself, as the replay page shows it to a blind reviewer.
    assert "fixed: rounding per line." in text


def test_the_pages_link_the_export_only_when_there_is_something_to_export(
    client, reviewer
):
    run = imported_run()
    taped = taped_replay()
    bare = make_replay()
    client.force_login(reviewer)

    def page(name: str, pk: int) -> str:
        return client.get(reverse(f"reviews:{name}", args=[pk])).content.decode()

    link = '<a href="{}" id="atif-export" download'
    assert link.format(reverse("api_run_atif", args=[run.pk])) in page(
        "run_detail", run.pk
    )
    assert link.format(reverse("api_replay_atif", args=[taped.pk])) in page(
        "replay_detail", taped.pk
    )
    assert "Export as ATIF" not in page("run_detail", bare.run_id)
    assert "Export as ATIF" not in page("replay_detail", bare.pk)
