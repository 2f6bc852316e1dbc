"""The recorder's last line is the page of the run it delivered: the server's
answer to a one-record post names the run, and the recorder prints its page
on the server it was given."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from replayhub.ingest.tokens import token_issue
from replayhub.models import Run
from tests.factories import make_project
from tests.recorder.conftest import LocalHost, World, make_world, spooled

pytestmark = pytest.mark.services

TOKEN = "rhi_0123456789ab_" + "T" * 43
STARTED = "2026-12-02T09:30:00Z"


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def test_the_recorders_last_line_is_the_runs_page(world: World, client, admin_user):
    recorded = world.record("edit")

    assert recorded.returncode == 0, recorded.stderr
    run = world.stored(recorded.run_id)
    page = f"{world.server}/runs/{run.pk}/"
    assert last_line(recorded.stderr) == f"replayhub-record: its page: {page}"
    client.force_login(admin_user)
    opened = client.get(page.removeprefix(world.server))
    assert opened.status_code == 200
    assert run.external_id in opened.content.decode()


def test_a_spooled_run_sent_later_ends_with_its_page_too(world: World):
    kept = world.record("edit", server="http://127.0.0.1:9")
    assert kept.returncode == 75, kept.stderr
    (path,) = spooled(world)

    sent = world.send("--send", str(path), "--server", world.server)

    assert sent.returncode == 0, sent.stderr
    run = world.stored(kept.run_id)
    assert last_line(sent.stderr).endswith(f" {world.server}/runs/{run.pk}/")


def test_a_page_with_anything_but_a_paths_characters_is_not_printed(
    tmp_path, fake, recorder
):
    world = make_world(tmp_path, fake, "http://unused", recorder)
    world.token = TOKEN
    answer = {"imported": 1, "run": {"url": "/runs/1/\x1b]0;owned\x07"}}
    with LocalHost(201, reply=lambda headers: answer) as server:
        recorded = world.record("edit", server=server.url)

    assert recorded.returncode == 0, recorded.stderr
    assert "recorded run" in last_line(recorded.stderr)
    assert "\x1b" not in recorded.stderr and "its page" not in recorded.stderr


def test_the_api_names_the_run_of_a_one_record_body_only(client, db):
    project = make_project("shop")
    token = token_issue(project=project)[1]
    url = reverse("api_runs_create", args=["shop"])
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}

    def send(*ids: str) -> dict:
        body = "".join(
            json.dumps({"external_id": i, "prompt": "p", "started_at": STARTED}) + "\n"
            for i in ids
        )
        response = client.post(url, body, "application/x-ndjson", **auth)
        assert response.status_code in (200, 201), response.content
        return response.json()

    one = send("one")
    again = send("one")
    two = send("two", "three")

    stored = Run.objects.get(project=project, external_id="one")
    page = {"id": stored.pk, "external_id": "one", "url": f"/runs/{stored.pk}/"}
    assert one["run"] == again["run"] == page
    assert "run" not in two
