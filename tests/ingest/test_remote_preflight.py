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
from tests.transcript_files import CART, transcript_files


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

    assert response.status_code == 302
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


def prediction(origin: Repo) -> tuple[bytes, str]:
    """A SWE-bench prediction against the remote's main, and its format."""
    (swebench,) = [f for f in transcript_files(origin) if f.format == "swebench"]
    return swebench.data, swebench.format


def push_as(client: Client, project: Project, body: bytes, format: str):
    token = token_issue(project=project)[1]
    auth = {"Authorization": f"Bearer {token}"}
    response = client.post(
        reverse("api_runs_create", args=[project.slug]) + f"?format={format}",
        data=body,
        content_type="application/x-ndjson",
        headers=auth,
    )
    return response, auth


def test_a_transcript_for_a_remote_project_is_left_to_a_worker_in_a_job(
    db, client, origin, server, remote_project, mirror_dir
):
    # A transcript is completed from the project's history.
    response, auth = push_as(client, remote_project, *prediction(origin))

    assert response.status_code == 202
    answer = response.json()
    assert answer["status"] == "queued" and response["Location"] == answer["url"]
    assert server.requests == [] and not Run.objects.exists()
    followed = client.get(answer["url"], headers=auth).json()
    assert followed == {"job": answer["job"], "status": "queued"}
    # Another project's token reads nothing of it.
    other = make_git_project(origin, slug="other")
    token = token_issue(project=other)[1]
    elsewhere = answer["url"].replace("/shop/", "/other/")
    denied = client.get(elsewhere, headers={"Authorization": f"Bearer {token}"})
    assert denied.status_code == 404


def test_a_transcript_upload_for_a_remote_project_becomes_a_job(
    client, admin_user, origin, server, remote_project, mirror_dir
):
    client.force_login(admin_user)

    response = client.post(
        reverse("runs_upload"),
        {
            "project": "shop",
            "format": "swebench",
            "file": SimpleUploadedFile("predictions.jsonl", prediction(origin)[0]),
        },
    )

    assert response.status_code == 302
    assert "/runs/upload/" in response["Location"]
    assert server.requests == [] and not Run.objects.exists()


def test_a_worker_imports_the_queued_transcript_and_the_job_says_so(
    celery_worker, transactional_db, origin, server, remote_project
):
    # The prediction's patch applies to the cart it names, on main.
    origin.commit({"cart.py": CART}, "the cart", branch="main")
    root = Path(settings.REPLAYHUB_MIRROR_DIR)
    client = Client()
    try:
        response, auth = push_as(client, remote_project, *prediction(origin))
        url = response.json()["url"]

        done = wait_for(
            lambda: (
                (a := client.get(url, headers=auth).json())["status"] == "done" and a
            ),
            timeout=60,
        )
    finally:
        remove_mirrors(root, str(remote_project.pk))

    assert done["summary"]["imported"] == 1, done
    assert Run.objects.get().preflight == Preflight.READY
