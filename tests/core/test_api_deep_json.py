"""Crafted JSON pushed to the API is refused with a 4xx JSON answer in one
line, never a 500 page: a recorder's tape nested 600 deep, a SWE-agent
configuration nested 50,000 deep, a base commit that is a branch name."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from replayhub.ingest.tokens import token_issue
from replayhub.lib.boundedjson import MAX_DEPTH
from replayhub.models import Run
from tests.factories import make_git_project
from tests.gitrepos import make_repo
from tests.records import line, record
from tests.transcript_files import CART, transcript_files

pytestmark = pytest.mark.django_db

TOO_DEEP = f"the JSON nests deeper than {MAX_DEPTH} levels"


def nested(levels: int) -> object:
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path, {"cart.py": CART})


@pytest.fixture
def token(repo):
    return token_issue(project=make_git_project(repo))[1]


def push(client, token: str, body: bytes, **query: str):
    url = reverse("api_runs_create", args=["shop"])
    if query:
        url += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    client.raise_request_exception = False
    return client.post(
        url,
        data=body,
        content_type="application/octet-stream",
        headers={"Authorization": f"Bearer {token}"},
    )


def one_line_refusal(response) -> dict:
    assert 400 <= response.status_code < 500, response.content[:200]
    assert response["Content-Type"] == "application/json"
    data = response.json()
    for problem in data["invalid"]:
        assert "\n" not in problem["error"]
    return data


def test_a_record_whose_tape_nests_600_deep_is_refused_and_not_stored(client, token):
    tape = [
        {
            "provider_kind": "anthropic",
            "path": "/v1/messages",
            "request": {"messages": nested(600)},
            "status": 200,
        }
    ]
    body = line(record(1, tape=tape)) + line(record(2))

    response = push(client, token, body)

    data = one_line_refusal(response)
    assert response.status_code == 400
    assert data["invalid"] == [{"line": 1, "error": TOO_DEEP}]
    assert list(Run.objects.values_list("external_id", flat=True)) == ["run-0002"]


def swe_agent(repo) -> dict:
    [file] = [f for f in transcript_files(repo) if f.format == "swe-agent"]
    return json.loads(file.data)


def test_a_swe_agent_configuration_nested_50000_deep_is_a_400(client, repo, token):
    document = swe_agent(repo)
    document["replay_config"] = "[" * 50_000 + "]" * 50_000

    response = push(
        client,
        token,
        json.dumps(document).encode(),
        format="swe-agent",
        name="deep.traj",
    )

    data = one_line_refusal(response)
    assert data["invalid"] == [
        {"file": "deep.traj", "line": 1, "error": f"replay_config: {TOO_DEEP}"}
    ]
    assert Run.objects.count() == 0


def test_a_swe_agent_base_commit_naming_a_branch_is_a_400(client, repo, token):
    document = swe_agent(repo)
    config = json.loads(document["replay_config"])
    config["env"]["repo"]["base_commit"] = "main"
    document["replay_config"] = json.dumps(config)

    response = push(
        client,
        token,
        json.dumps(document).encode(),
        format="swe-agent",
        name="main.traj",
    )

    data = one_line_refusal(response)
    [problem] = data["invalid"]
    assert problem["error"].endswith('the base commit "main" is not a commit sha')
    assert Run.objects.count() == 0
