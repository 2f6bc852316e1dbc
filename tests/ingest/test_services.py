"""One import for every entry: the API, the upload page, its job and the command
answer the same file with the same summary and leave the same runs behind."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from replayhub.ingest.services import import_job_run
from replayhub.ingest.tokens import token_issue
from replayhub.models import ImportJob, Preflight, Run
from tests.conftest import wait_for
from tests.factories import make_git_project
from tests.gitrepos import project_repo
from tests.ingest.test_preflight import agent_commit
from tests.records import jsonl, line, record, write


def push(client, project, data: bytes):
    token = token_issue(project=project)[1]
    return client.post(
        reverse("api_runs_create", args=[project.slug]),
        data=data,
        content_type="application/x-ndjson",
        headers={"Authorization": f"Bearer {token}"},
    )


def upload(client, project, data: bytes):
    return client.post(
        reverse("runs_upload"),
        {"project": project.slug, "file": SimpleUploadedFile("runs.jsonl", data)},
    )


def through_api(project, data: bytes) -> dict:
    summary = push(Client(), project, data).json()
    summary.pop("error", None)  # what the status code says, in words
    return summary


def through_upload_page(client, project, data: bytes) -> dict:
    """The summary on the page the import redirects to."""
    response = upload(client, project, data)
    assert response.status_code == 302
    return client.get(response["Location"]).context["summary"]


def through_upload_job(client, project, data: bytes, settings) -> dict:
    settings.REPLAYHUB_UPLOAD_INLINE_MAX_BYTES = len(data) - 1
    assert upload(client, project, data).status_code == 302
    job = ImportJob.objects.get()
    import_job_run(job_id=job.pk)  # what the worker does
    job.refresh_from_db()
    assert job.status == "done"
    return job.summary


def through_command(project, data: bytes, tmp_path) -> dict:
    path = write(tmp_path / "runs.jsonl", data)
    out = io.StringIO()
    # Exit status 1 when a line was invalid or conflicted.
    with contextlib.suppress(SystemExit):
        call_command(
            "import_runs",
            str(path),
            "--project",
            project.slug,
            "--json",
            stdout=out,
            stderr=io.StringIO(),
        )
    return json.loads(out.getvalue())


def test_every_entry_gives_the_same_summary_and_runs_for_the_same_file(
    client, admin_user, git_project, git_repo, tmp_path, settings
):
    base, original = agent_commit(git_repo)
    data = (
        line(record(1, base_sha=base, original_commit=original))
        + line(record(2))
        + b"{oops\n"
        + line(record(1, base_sha=base, original_commit=original))
        + line(record(2, title="changed"))
        + line(record(3, drop=["original_commit"]))
    )
    client.force_login(admin_user)
    entries = {
        "api": lambda: through_api(git_project, data),
        "upload page": lambda: through_upload_page(client, git_project, data),
        "upload job": lambda: through_upload_job(client, git_project, data, settings),
        "command": lambda: through_command(git_project, data, tmp_path),
    }

    summaries, runs = {}, {}
    for name, entry in entries.items():
        Run.objects.all().delete()
        summaries[name] = entry()
        runs[name] = sorted(Run.objects.values_list("external_id", "preflight"))

    first = summaries["api"]
    assert first == {
        "imported": 3,
        "duplicates": 1,
        "conflicts": [{"line": 5, "project": "shop", "external_id": "run-0002"}],
        "invalid": [{"line": 3, "error": first["invalid"][0]["error"]}],
        "conflicts_total": 1,
        "invalid_total": 1,
        "preflight": {"ready": 1, "unreproducible": 2, "failed": 0, "pending": 0},
        "unread_types": {},
    }
    assert first["invalid"][0]["error"].startswith("not valid JSON")
    for name in entries:
        assert summaries[name] == summaries["api"], name
        assert runs[name] == [
            ("run-0001", Preflight.READY),
            ("run-0002", Preflight.UNREPRODUCIBLE),
            ("run-0003", Preflight.UNREPRODUCIBLE),
        ], name


@pytest.mark.parametrize("entry", ["api", "upload page"])
def test_a_request_preflights_up_to_its_limit_and_a_worker_does_the_rest(
    celery_worker, admin_user, transactional_db, tmp_path, settings, entry
):
    settings.REPLAYHUB_SYNC_PREFLIGHT_MAX = 2
    project = make_git_project(project_repo(tmp_path))
    data = jsonl(*(record(n) for n in range(1, 6)))
    client = Client()
    client.force_login(admin_user)

    if entry == "api":
        summary = push(client, project, data).json()
    else:
        summary = through_upload_page(client, project, data)

    assert summary["imported"] == 5
    assert summary["preflight"] == {
        "ready": 0,
        "unreproducible": 2,
        "failed": 0,
        "pending": 3,
    }
    pending = Run.objects.filter(preflight=Preflight.PENDING)
    wait_for(lambda: not pending.exists(), timeout=60)
    assert Run.objects.filter(preflight=Preflight.UNREPRODUCIBLE).count() == 5


def test_the_command_preflights_every_run_itself(git_project, tmp_path, settings):
    settings.REPLAYHUB_SYNC_PREFLIGHT_MAX = 2
    data = jsonl(*(record(n) for n in range(1, 6)))

    summary = through_command(git_project, data, tmp_path)

    assert summary["preflight"] == {
        "ready": 0,
        "unreproducible": 5,
        "failed": 0,
        "pending": 0,
    }
