"""Rollout records through the API and the upload page, and a rollout's seeds
listed by the run endpoint."""

from __future__ import annotations

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from replayhub.ingest.services import import_job_run
from replayhub.ingest.tokens import token_issue
from replayhub.models import ImportJob, Project, Run, Seed
from tests.traces import RECORDS, compacted, line, multi_tool


def push(client, body: bytes, token: str, query: str = "?format=verifiers"):
    return client.post(
        reverse("api_runs_create", args=["rl"]) + query,
        data=body,
        content_type="application/x-ndjson",
        headers={"Authorization": f"Bearer {token}"},
    )


def test_the_api_imports_rollout_records_with_their_seeds(client, rl_project):
    token = token_issue(project=rl_project)[1]
    response = push(client, RECORDS.read_bytes(), token)
    assert response.status_code == 201
    body = response.json()
    assert (body["imported"], body["skipped"]["replayed"], body["seeds"]) == (2, 1, 2)
    again = push(client, RECORDS.read_bytes(), token).json()
    assert (again["imported"], again["duplicates"]) == (0, 2)


def test_the_api_refuses_an_unknown_format(client, rl_project):
    token = token_issue(project=rl_project)[1]
    response = push(client, RECORDS.read_bytes(), token, query="?format=csv")
    assert response.status_code == 400
    assert "format: 'csv' is not one of native, verifiers" in response.json()["error"]
    assert not Run.objects.exists()


def test_a_shape_that_cannot_be_read_is_a_400_naming_its_line(client, rl_project):
    token = token_issue(project=rl_project)[1]
    body = line(multi_tool().record()) + line({"id": "x", "version": 9})
    response = push(client, body, token)
    assert response.status_code == 400
    assert response.json()["invalid"] == [
        {"line": 2, "error": response.json()["invalid"][0]["error"]}
    ]
    assert "version: 9" in response.json()["invalid"][0]["error"]


def test_the_run_endpoint_lists_a_rollouts_seeds_in_order(client, rl_project, reviewer):
    token = token_issue(project=rl_project)[1]
    rl_project.max_anchors = None
    rl_project.save()
    push(client, line(multi_tool().record()), token)
    run = Run.objects.get()
    client.force_login(reviewer)
    data = client.get(reverse("api_run_detail", args=[run.pk])).json()
    assert data["source"] == "rollout" and data["reward"] == 1.0
    assert [s["number"] for s in data["seeds"]] == [1, 2, 3]
    assert [s["key"] for s in data["seeds"]] == list(
        Seed.objects.filter(run=run).order_by("number").values_list("key", flat=True)
    )
    assert data["seeds"][0]["messages"][-1]["role"] == "tool"


def upload(client, data: bytes, name="train_rollouts_env.jsonl"):
    return client.post(
        reverse("runs_upload"),
        {
            "project": "rl",
            "format": "verifiers",
            "file": SimpleUploadedFile(name, data),
        },
    )


def test_the_upload_page_imports_rollouts_and_shows_skips_and_seeds(
    client, admin_user, rl_project
):
    client.force_login(admin_user)
    shown = upload(client, RECORDS.read_bytes())["Location"]
    html = client.get(shown).content.decode()
    assert '<th scope="row">Imported</th><td>2</td>' in html
    assert '<span class="skip-reason">replayed: 1</span>' in html
    assert '<th scope="row">Seeds</th><td>2</td>' in html
    assert "Preflight" not in html


def test_a_large_rollout_upload_is_imported_by_a_job(
    client, admin_user, rl_project, settings
):
    settings.REPLAYHUB_UPLOAD_INLINE_MAX_BYTES = 100
    client.force_login(admin_user)
    data = line(compacted().record()) + line(multi_tool().record())
    response = upload(client, data)
    job = ImportJob.objects.get()
    assert (response.status_code, job.format) == (302, "verifiers")
    import_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.imported, job.summary["seeds"]) == ("done", 2, 2)
    html = client.get(response["Location"]).content.decode()
    assert '<th scope="row">Seeds</th><td>2</td>' in html


def test_the_run_page_lists_a_rollouts_seeds_with_their_conversations_escaped(
    client, rl_project, reviewer
):
    token = token_issue(project=rl_project)[1]
    rl_project.max_anchors = None
    rl_project.save()
    hostile = multi_tool(prompt="<script>alert(1)</script>")
    hostile.nodes[1]["message"]["content"] = "<script>alert(1)</script>"
    push(client, line(hostile.record()), token)
    run = Run.objects.get()
    client.force_login(reviewer)
    html = client.get(reverse("reviews:run_detail", args=[run.pk])).content.decode()
    assert html.count('<details class="seed" id="seed-') == 3
    for seed in Seed.objects.filter(run=run):
        assert seed.key in html
    assert "After tool results" in html and "rollout" in html
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


NO_SETTINGS = (
    "Project rl has no rollout settings: give it a harness command (Rollouts on "
    "its edit page, or project_edit rl --harness-command CMD) before importing "
    "rollouts."
)


def test_rollouts_into_a_project_without_rollout_settings_are_refused_in_one_line(
    client, admin_user, rl_project, settings, tmp_path
):
    rl_project.harness_command = []
    rl_project.save()
    client.force_login(admin_user)

    response = upload(client, RECORDS.read_bytes())

    assert response.status_code == 400
    assert response.context["form"].errors["project"] == [NO_SETTINGS]
    token = token_issue(project=rl_project)[1]
    pushed = push(client, RECORDS.read_bytes(), token)
    assert (pushed.status_code, pushed.json()["error"]) == (400, NO_SETTINGS)
    with pytest.raises(CommandError, match=re.escape(NO_SETTINGS)):
        call_command(
            "import_runs", "--format", "verifiers", "--project", "rl", str(RECORDS)
        )
    with pytest.raises(CommandError, match=re.escape(NO_SETTINGS)):
        call_command(
            "import_runs",
            "--format",
            "verifiers",
            "--project",
            "rl",
            "--follow",
            str(tmp_path),
            "--once",
        )
    # A job queued before the harness was taken away fails saying so.
    settings.REPLAYHUB_UPLOAD_INLINE_MAX_BYTES = 100
    rl_project.harness_command = ["python", "harness.py"]
    rl_project.save()
    upload(client, RECORDS.read_bytes())
    Project.objects.filter(pk=rl_project.pk).update(harness_command=[])
    job = ImportJob.objects.get()
    import_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.error) == ("failed", NO_SETTINGS)
    assert not Run.objects.exists()
