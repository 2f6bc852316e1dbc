"""GET /api/v1/commits/<sha>/verdict: a pipeline asks whether a commit reproduced."""

from __future__ import annotations

import pytest
from django.urls import reverse

from replayhub.attest import gate
from replayhub.ingest.tokens import token_issue
from replayhub.models import Project, Replay, Run
from reviews.models import ReviewPolicy
from reviews.services import review_decide
from tests.factories import make_project, make_replay

pytestmark = pytest.mark.django_db

REPRODUCED = "1" * 40
DIVERGED = "2" * 40


def run_at(commit: str, project: Project | None = None, external_id: str = "") -> Run:
    project = project or make_project()
    return Run.objects.create(
        project=project,
        external_id=external_id or f"run-{commit[:8]}",
        title="Fix it",
        prompt="Fix the failing test.",
        original_commit=commit,
    )


def replayed(commit: str, verdict: str, project: Project | None = None) -> Replay:
    run = run_at(commit, project)
    return make_replay(verdict=verdict, run=run, project=run.project)


def ask(client, sha: str, token: str | None = None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.get(reverse("api_commit_verdict", args=[sha]), headers=headers)


def test_a_reproduced_commit(client, signing_key):
    replay = replayed(REPRODUCED, "identical")
    token = token_issue(project=replay.project)[1]
    answer = ask(client, REPRODUCED, token).json()
    assert answer["gate"] == "reproduced"
    assert answer["commit"] == REPRODUCED
    [run] = answer["runs"]
    assert run["project"] == "shop"
    assert run["run"] == replay.run_id
    assert run["replay"] == replay.pk
    assert run["verdict"] == "identical"
    assert run["reason_code"] == replay.reason_code
    assert run["reviewed_verdict"] is None
    assert run["replay_url"].endswith(
        reverse("reviews:replay_detail", args=[replay.pk])
    )
    assert run["attestation_url"].endswith(
        reverse("api_replay_attestation", args=[replay.pk])
    )


def test_a_divergent_commit(client, reviewer):
    replayed(DIVERGED, "divergent")
    client.force_login(reviewer)
    answer = ask(client, DIVERGED).json()
    assert answer["gate"] == "divergent"
    # No key configured: no attestation to link.
    assert answer["runs"][0]["attestation_url"] is None


def test_an_unknown_commit_is_404_with_a_null_verdict(client, reviewer):
    client.force_login(reviewer)
    response = ask(client, "3" * 40)
    assert response.status_code == 404
    assert response.json()["verdict"] is None
    assert "no run has the original commit" in response.json()["error"]


def test_the_latest_finished_replay_speaks_for_its_run(client, reviewer):
    first = replayed(REPRODUCED, "divergent")
    latest = make_replay(verdict="equivalent", run=first.run, project=first.project)
    Replay.objects.create(run=first.run, project=first.project, attempt=3)
    client.force_login(reviewer)
    [run] = ask(client, REPRODUCED).json()["runs"]
    assert run["replay"] == latest.pk
    assert run["run_gate"] == "reproduced"


def test_a_run_not_yet_replayed_is_unknown(client, reviewer):
    run_at(REPRODUCED)
    client.force_login(reviewer)
    answer = ask(client, REPRODUCED).json()
    assert answer["gate"] == "unknown"
    assert answer["runs"][0]["verdict"] is None
    assert answer["runs"][0]["replay_url"] is None


def test_a_reviewers_overturn_settles_the_verdict(client, reviewer, lead):
    replay = replayed(DIVERGED, "divergent")
    review_decide(
        replay=replay,
        reviewer=reviewer,
        decision="overturn",
        verdict_after="equivalent",
        note="the tests pass on both",
    )
    client.force_login(lead)
    answer = ask(client, DIVERGED).json()
    assert answer["runs"][0]["verdict"] == "divergent"
    assert answer["runs"][0]["reviewed_verdict"] == "equivalent"
    assert answer["runs"][0]["settled_verdict"] == "equivalent"
    assert answer["gate"] == "reproduced"


def test_one_divergent_run_makes_the_commit_divergent(client, reviewer):
    replayed(DIVERGED, "identical", make_project("shop"))
    replayed(DIVERGED, "divergent", make_project("billing"))
    client.force_login(reviewer)
    answer = ask(client, DIVERGED).json()
    assert answer["gate"] == "divergent"
    assert {run["project"] for run in answer["runs"]} == {"shop", "billing"}


def test_a_token_sees_only_its_own_projects_runs(client):
    replayed(DIVERGED, "divergent", make_project("shop"))
    replayed(REPRODUCED, "identical", make_project("billing"))
    billing = token_issue(project=Project.objects.get(slug="billing"))[1]
    assert ask(client, DIVERGED, billing).status_code == 404
    answer = ask(client, REPRODUCED, billing).json()
    assert [run["project"] for run in answer["runs"]] == ["billing"]


def test_a_unique_prefix_of_seven_digits_is_enough(client, reviewer):
    replayed("abcdef1" + "0" * 33, "identical")
    client.force_login(reviewer)
    assert ask(client, "ABCDEF1").json()["gate"] == "reproduced"


@pytest.mark.parametrize("sha", ["abcdef", "zzzzzzz", "a" * 65])
def test_a_malformed_commit_is_400(client, reviewer, sha):
    client.force_login(reviewer)
    response = ask(client, sha)
    assert response.status_code == 400
    assert "hexadecimal" in response.json()["error"]


def test_an_ambiguous_prefix_is_400(client, reviewer):
    replayed("abcdef1" + "0" * 33, "identical")
    replayed("abcdef1" + "1" * 33, "identical")
    client.force_login(reviewer)
    response = ask(client, "abcdef1")
    assert response.status_code == 400
    assert "more than one commit" in response.json()["error"]


def test_without_credentials_401_and_without_permission_403(client, nobody):
    replayed(REPRODUCED, "identical")
    assert ask(client, REPRODUCED).status_code == 401
    assert ask(client, REPRODUCED, "rhi_nope").status_code == 401
    client.force_login(nobody)
    assert ask(client, REPRODUCED).status_code == 403


def test_blind_review_hides_the_verdict_from_a_reviewer_who_has_not_judged(
    client, reviewer
):
    replay = replayed(DIVERGED, "divergent")
    ReviewPolicy.objects.create(project=replay.project, blind=True)
    client.force_login(reviewer)
    response = ask(client, DIVERGED)
    assert "divergent" not in response.content.decode()
    assert response.json()["runs"][0]["blind"] is True
    # A pipeline's token is no reviewer.
    token = token_issue(project=replay.project)[1]
    assert ask(client, DIVERGED, token).json()["gate"] == "divergent"


@pytest.mark.parametrize(
    ("gates", "expected"),
    [
        ([], "unknown"),
        (["reproduced"], "reproduced"),
        (["reproduced", "unknown"], "unknown"),
        (["unknown", "divergent", "reproduced"], "divergent"),
    ],
)
def test_the_commits_answer_from_its_runs(gates, expected):
    assert gate.overall(gates) == expected


@pytest.mark.parametrize(
    ("settled", "expected"),
    [
        ("identical", "reproduced"),
        ("equivalent", "reproduced"),
        ("divergent", "divergent"),
        ("inconclusive", "unknown"),
        (None, "unknown"),
    ],
)
def test_a_runs_answer_from_its_settled_verdict(settled, expected):
    assert gate.run_gate(settled) == expected
