"""No git in a web request: runs pushed to a project on a remote wait pending
for a worker to fetch its mirror, saying so; a local repository is still
preflighted in the request.

The remote is a real git server on 127.0.0.1 that notes every request it
gets, so "nothing was fetched in the request" is what it saw.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from replayhub.git.mirrors import remove_mirrors
from replayhub.ingest.preflight import FETCH_WAIT, preflight_pending
from replayhub.ingest.tokens import token_issue
from replayhub.models import Preflight, Project, Run
from tests.conftest import wait_for
from tests.factories import make_git_project
from tests.gitrepos import Repo, project_repo
from tests.gitservers import HttpGitServer, free_port
from tests.records import jsonl, record


@pytest.fixture
def origin(tmp_path) -> Repo:
    """The remote's repository: main, and the agent's commit on a branch."""
    repo = project_repo(tmp_path / "served")
    repo.commit({"cart.py": "TOTAL = 1\n"}, "the agent", branch="agent/task-1")
    repo.checkout("main")
    return repo


@pytest.fixture
def server(origin):
    with HttpGitServer(origin.path.parent) as served:
        yield served


@pytest.fixture
def remote_project(origin, server) -> Project:
    return make_git_project(origin, repo_path=server.url(origin.path.name))


def pushed(origin: Repo) -> bytes:
    return jsonl(record(1, original_commit=origin.rev("agent/task-1")))


def push(client: Client, project: Project, body: bytes):
    token = token_issue(project=project)[1]
    return client.post(
        reverse("api_runs_create", args=[project.slug]),
        data=body,
        content_type="application/x-ndjson",
        headers={"Authorization": f"Bearer {token}"},
    )


def test_an_api_push_to_a_remote_project_leaves_the_fetch_to_a_worker(
    client, reviewer, origin, server, remote_project, mirror_dir
):
    response = push(client, remote_project, pushed(origin))

    assert response.status_code == 201
    assert response.json()["preflight"] == {
        "ready": 0,
        "unreproducible": 0,
        "failed": 0,
        "pending": 1,
        "deferred": 1,
    }
    assert server.requests == []
    assert not mirror_dir.exists()
    run = Run.objects.get()
    assert (run.preflight, run.preflight_reason) == (Preflight.PENDING, FETCH_WAIT)
    client.force_login(reviewer)
    page = client.get(reverse("reviews:run_detail", args=[run.pk])).content.decode()
    assert "Waiting for a worker to fetch the repository." in page


def test_an_upload_to_a_remote_project_leaves_the_fetch_to_a_worker(
    client, admin_user, origin, server, remote_project, mirror_dir
):
    client.force_login(admin_user)

    response = client.post(
        reverse("runs_upload"),
        {"project": "shop", "file": SimpleUploadedFile("runs.jsonl", pushed(origin))},
    )

    assert response.status_code == 200
    assert server.requests == []
    assert Run.objects.get().preflight_reason == FETCH_WAIT


def test_a_local_repository_is_still_preflighted_in_the_request(
    db, client, origin, mirror_dir
):
    project = make_git_project(origin)

    response = push(client, project, pushed(origin))

    assert response.json()["preflight"] == {
        "ready": 1,
        "unreproducible": 0,
        "failed": 0,
        "pending": 0,
    }
    assert Run.objects.get().preflight == Preflight.READY


def test_a_worker_fetches_the_remote_and_the_run_is_ready(
    celery_worker, transactional_db, origin, server, remote_project
):
    # The worker's own mirror directory: its settings are this process's.
    root = Path(settings.REPLAYHUB_MIRROR_DIR)
    try:
        response = push(Client(), remote_project, pushed(origin))
        assert response.json()["preflight"]["deferred"] == 1

        run = wait_for(
            lambda: Run.objects.filter(preflight=Preflight.READY).first(), timeout=60
        )
    finally:
        remove_mirrors(root, str(remote_project.pk))

    assert server.requests
    assert run.preflight_reason == ""
    assert run.provenance["base"]["sha"] == origin.rev("main")


def test_a_remote_that_cannot_be_fetched_leaves_the_run_pending_saying_why(
    db, origin, mirror_dir
):
    project = make_git_project(origin, repo_path=f"git://127.0.0.1:{free_port()}/app")
    push(Client(), project, pushed(origin))

    result = preflight_pending(project_ids=[project.pk])

    run = Run.objects.get()
    assert (result.failed, run.preflight) == (1, Preflight.PENDING)
    assert run.preflight_reason.startswith("The repository could not be fetched: ")
    assert "Connection refused" in run.preflight_reason
