"""The upload page: admins import a JSONL file and see the summary, escaped."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from replayhub.ingest.services import import_job_requeue_stale, import_job_run
from replayhub.models import ImportJob, Run
from tests.conftest import wait_for
from tests.factories import make_git_project
from tests.gitrepos import make_repo, project_repo
from tests.records import EXAMPLE, jsonl, line, record
from tests.transcript_files import CART, transcript_files

URL = "runs_upload"


def upload(client, data: bytes, project="shop", name="runs.jsonl", follow=True):
    """Post ``data`` as a file; the page shown after it (the summary a file
    imported in the request redirects to), or the POST's own answer."""
    return client.post(
        reverse(URL),
        {"project": project, "file": SimpleUploadedFile(name, data)},
        follow=follow,
    )


def test_anonymous_visitors_are_sent_to_the_login_page(client, db):
    response = client.get(reverse(URL))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize(
    ("role", "expected"),
    [("reviewer", 403), ("lead", 403), ("nobody", 403), ("admin_user", 200)],
)
def test_only_admins_may_upload(client, request, git_project, role, expected):
    client.force_login(request.getfixturevalue(role))
    assert client.get(reverse(URL)).status_code == expected
    posted = upload(client, jsonl(record()))
    assert posted.status_code == (403 if expected == 403 else 200)
    assert Run.objects.exists() is (expected == 200)


def test_the_example_file_uploads_and_the_summary_is_shown(
    client, admin_user, git_project
):
    client.force_login(admin_user)

    response = upload(client, EXAMPLE.read_bytes(), name="runs.jsonl")

    html = response.content.decode()
    assert response.status_code == 200
    assert "runs.jsonl into shop" in html
    assert '<th scope="row">Imported</th><td>4</td>' in html
    assert Run.objects.count() == 4
    again = upload(client, EXAMPLE.read_bytes()).content.decode()
    assert '<th scope="row">Duplicates</th><td>4</td>' in again


def test_record_content_in_the_summary_is_escaped(client, admin_user, git_project):
    client.force_login(admin_user)
    script = "<script>alert(1)</script>"
    upload(client, jsonl(record(1, external_id=script)))
    bad = line(record(1, external_id=script, title="changed"))
    bad += line(record(2, started_at=script))

    html = upload(client, bad).content.decode()

    assert script not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert Run.objects.get().external_id == script  # stored verbatim


def test_invalid_lines_are_listed_and_the_valid_lines_imported(
    client, admin_user, git_project
):
    client.force_login(admin_user)
    data = line(record(1)) + b"{oops\n" + line(record(3))

    html = upload(client, data).content.decode()

    assert "Invalid lines" in html
    assert "<td>2</td><td><code>not valid JSON" in html
    assert Run.objects.count() == 2


def test_the_upload_needs_the_csrf_token(admin_user, git_project):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    assert upload(client, jsonl(record())).status_code == 403
    assert not Run.objects.exists()


@pytest.mark.parametrize("records", [2, 2000], ids=["by-file-size", "by-body-size"])
def test_a_file_above_the_limit_is_refused_with_413(
    client, admin_user, git_project, settings, records
):
    settings.REPLAYHUB_UPLOAD_MAX_BYTES = 100
    client.force_login(admin_user)
    response = upload(client, jsonl(*(record(n) for n in range(records))))
    assert response.status_code == 413
    assert "larger than the limit" in response.content.decode()
    assert not Run.objects.exists()


@pytest.mark.parametrize("records", [2, 2000], ids=["by-file-size", "by-body-size"])
def test_a_file_above_the_limit_keeps_what_was_chosen_and_says_so_beside_file(
    client, admin_user, git_project, settings, records
):
    settings.REPLAYHUB_UPLOAD_MAX_BYTES = 100
    client.force_login(admin_user)
    data = jsonl(*(record(n) for n in range(records)))
    response = client.post(
        reverse(URL),
        {
            "project": "shop",
            "format": "claude-code",
            "file": SimpleUploadedFile("big.jsonl", data),
        },
    )
    page = response.content.decode()
    assert response.status_code == 413
    assert re.search(r'<option value="shop" selected>', page)
    assert re.search(r'<option value="claude-code" selected>', page)
    error = re.search(r'<p class="error" id="id_file_error" role="alert">([^<]*)', page)
    assert error and "larger than the limit of 100" in error.group(1)
    assert 'aria-describedby="id_file_helptext id_file_error"' in page


def _described_by_ids_all_exist(page: str) -> None:
    ids = set(re.findall(r'\bid="([^"]+)"', page))
    named = re.findall(r'aria-describedby="([^"]*)"', page)
    assert named
    for idrefs in named:
        for idref in idrefs.split():
            assert idref in ids, idref


def test_every_aria_describedby_on_the_upload_page_names_an_element(
    client, admin_user, git_project
):
    client.force_login(admin_user)
    _described_by_ids_all_exist(client.get(reverse(URL)).content.decode())
    refused = client.post(reverse(URL), {"project": "nope", "original": "xyz"})
    page = refused.content.decode()
    assert refused.status_code == 400
    for field in ("project", "original", "file"):
        assert f'id="id_{field}_error" role="alert"' in page
    _described_by_ids_all_exist(page)


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
def test_a_refused_upload_focuses_its_problems_at_the_top_of_what_is_shown(
    client, admin_user, git_project, htmx
):
    client.force_login(admin_user)
    response = client.post(
        reverse(URL),
        {
            "project": "shop",
            "format": "verifiers",
            "file": SimpleUploadedFile("rollouts.jsonl", b"{}"),
        },
        headers={"HX-Request": "true"} if htmx else {},
    )
    page = response.content.decode()
    assert response.status_code == 400
    # Inside what htmx swaps in (#upload), above the form, and focused.
    start = page.index('<div id="upload">')
    shown = page[start : page.index('class="stack upload-form"', start)]
    summary = re.search(r'<div class="notice bad form-problems"[^>]*>', shown)
    assert summary and "autofocus" in summary.group(0)
    assert '<a href="#id_project">Project</a>: Project shop has no rollout' in shown
    assert 'id="id_project_error" role="alert">Project shop has no rollout' in page
    assert not Run.objects.exists()


def test_an_unknown_project_is_a_form_error(client, admin_user, git_project):
    client.force_login(admin_user)
    response = upload(client, jsonl(record()), project="nope")
    assert response.status_code == 400
    assert not Run.objects.exists()


# --- files imported by a worker ---------------------------------------------------


def test_a_large_file_is_imported_by_a_job_whose_page_shows_progress_then_summary(
    client, admin_user, git_project, settings
):
    settings.REPLAYHUB_UPLOAD_INLINE_MAX_BYTES = 1000
    client.force_login(admin_user)
    data = jsonl(*(record(n) for n in range(1, 6))) + b'{"external_id": 7}\n'

    response = upload(client, data, name="<i>big.jsonl", follow=False)

    job = ImportJob.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("runs_upload_job", args=[job.pk])
    assert not Run.objects.exists()  # nothing imported in the request
    assert Path(job.path).read_bytes() == data
    waiting = client.get(response["Location"]).content.decode()
    assert "waiting for a worker" in waiting and 'hx-trigger="every 1s"' in waiting
    assert "&lt;i&gt;big.jsonl" in waiting and "<i>big" not in waiting

    import_job_run(job_id=job.pk)  # what the worker does

    job.refresh_from_db()
    assert (job.status, job.imported, job.invalid) == ("done", 5, 1)
    assert job.summary["invalid"][0]["line"] == 6
    assert not Path(job.path).exists()
    poll = client.get(response["Location"], headers={"HX-Request": "true"})
    assert poll.status_code == 286  # htmx stops polling
    html = poll.content.decode()
    assert '<th scope="row">Imported</th><td>5</td>' in html
    assert "every 1s" not in html
    assert Run.objects.count() == 5


def test_a_job_whose_file_is_gone_fails_with_a_reason(client, admin_user, git_project):
    client.force_login(admin_user)
    job = ImportJob.objects.create(
        project=git_project, filename="runs.jsonl", size_bytes=10, path="/nonexistent/x"
    )

    import_job_run(job_id=job.pk)

    job.refresh_from_db()
    assert job.status == "failed"
    assert (
        job.error == "the uploaded file could not be read (No such file or directory)."
    )
    html = client.get(reverse("runs_upload_job", args=[job.pk])).content.decode()
    assert "The import failed: the uploaded file could not be read" in html


def test_a_job_is_imported_by_a_real_worker(
    celery_worker, admin_user, transactional_db, settings, tmp_path
):
    settings.REPLAYHUB_UPLOAD_INLINE_MAX_BYTES = 100
    make_git_project(project_repo(tmp_path))
    client = Client()
    client.force_login(admin_user)

    response = upload(client, jsonl(*(record(n) for n in range(1, 4))), follow=False)

    job = ImportJob.objects.get()
    done = wait_for(
        lambda: ImportJob.objects.filter(pk=job.pk, status="done").first(), timeout=60
    )
    assert done.summary["imported"] == 3
    assert response.status_code == 302
    assert Run.objects.count() == 3


def test_only_admins_may_see_an_import_job(client, reviewer, git_project):
    job = ImportJob.objects.create(
        project=git_project, filename="runs.jsonl", size_bytes=10, path="/x"
    )
    client.force_login(reviewer)
    assert client.get(reverse("runs_upload_job", args=[job.pk])).status_code == 403


def saved_job(project, tmp_path, status, silent_for, data=None):
    path = tmp_path / "saved.jsonl"
    path.write_bytes(data if data is not None else jsonl(record(1), record(2)))
    return ImportJob.objects.create(
        project=project,
        filename="runs.jsonl",
        size_bytes=path.stat().st_size,
        path=str(path),
        status=status,
        updated_at=timezone.now() - silent_for,
    )


def test_a_job_a_live_worker_is_importing_is_left_alone_by_a_second_delivery(
    git_project, tmp_path
):
    job = saved_job(git_project, tmp_path, "importing", timedelta(seconds=5))

    import_job_run(job_id=job.pk)

    job.refresh_from_db()
    assert job.status == "importing" and Path(job.path).exists()
    assert not Run.objects.exists()


def test_a_queued_job_is_queued_again_once_a_period_while_no_worker_takes_it(
    git_project, tmp_path, settings
):
    settings.REPLAYHUB_IMPORT_STALE_SECONDS = 600
    job = saved_job(git_project, tmp_path, "queued", timedelta(hours=1))
    fresh = saved_job(git_project, tmp_path, "queued", timedelta(seconds=5))

    assert import_job_requeue_stale() == 1
    assert import_job_requeue_stale() == 0  # moved on: not again before a period
    job.refresh_from_db()
    assert timezone.now() - job.updated_at < timedelta(minutes=1)
    assert ImportJob.objects.get(pk=fresh.pk).status == "queued"


def test_a_job_whose_worker_went_silent_is_finished_by_another_worker(
    celery_worker, transactional_db, tmp_path
):
    project = make_git_project(project_repo(tmp_path))
    job = saved_job(project, tmp_path, "importing", timedelta(hours=1))

    assert import_job_requeue_stale() == 1

    done = wait_for(
        lambda: ImportJob.objects.filter(pk=job.pk, status="done").first(), timeout=60
    )
    assert done.summary["imported"] == 2
    assert not Path(job.path).exists()


def test_a_json_error_reads_as_one_sentence(client, admin_user, git_project):
    client.force_login(admin_user)
    html = upload(client, b'{"external_id": "x\n').content.decode()
    assert "Unterminated string starting at column 17" in html
    assert "at at" not in html


def test_an_empty_file_says_it_was_empty(client, admin_user, git_project):
    client.force_login(admin_user)
    html = upload(client, b"").content.decode()
    assert "The file held no records: nothing was imported." in html


def test_when_nothing_was_imported_the_invalid_lines_do_not_claim_otherwise(
    client, admin_user, git_project
):
    client.force_login(admin_user)
    html = upload(client, b"{oops\nnot json either\n").content.decode()
    assert "(not imported; nothing in this file was)" in html
    assert "the other lines were" not in html
    mixed = upload(client, line(record(1)) + b"{oops\n").content.decode()
    assert "(not imported; the other lines were)" in mixed


def test_the_summary_links_to_the_runs_it_imported(client, admin_user, git_project):
    client.force_login(admin_user)
    upload(client, jsonl(record(1)))
    response = upload(client, line(record(2)) + line(record(3)))
    link = re.search(
        r'<p id="imported-runs"><a href="([^"]+)"', response.content.decode()
    )
    assert link and "See the 2 imported runs" in response.content.decode()
    listed = client.get(html.unescape(link.group(1)))
    assert {run.external_id for run in listed.context["runs"]} == {
        "run-0002",
        "run-0003",
    }


# --- transcript formats -----------------------------------------------------

TRANSCRIPT_FORMATS = [
    "claude-code",
    "codex",
    "aider",
    "swe-agent",
    "openhands",
    "swebench",
]


@pytest.mark.parametrize("format", TRANSCRIPT_FORMATS)
def test_each_transcript_format_uploads_as_one_run(
    client, admin_user, tmp_path, format
):
    repo = make_repo(tmp_path, {"cart.py": CART})
    make_git_project(repo)
    [file] = [f for f in transcript_files(repo) if f.format == format]
    client.force_login(admin_user)

    response = client.post(
        reverse(URL),
        {
            "project": "shop",
            "format": format,
            "file": SimpleUploadedFile(file.name, file.data),
        },
        follow=True,
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert '<th scope="row">Imported</th><td>1</td>' in page
    run = Run.objects.get()
    assert run.record["transcript"]["format"] == format
    assert run.record["transcript"]["file"] == file.name
    if file.external_id:
        assert run.external_id == file.external_id
    again = client.post(
        reverse(URL),
        {
            "project": "shop",
            "format": format,
            "file": SimpleUploadedFile(file.name, file.data),
        },
        follow=True,
    ).content.decode()
    assert '<th scope="row">Duplicates</th><td>1</td>' in again


def test_an_original_named_on_the_form_is_the_runs_original(
    client, admin_user, tmp_path
):
    """A Claude Code session whose branch the repository lacks finds no
    original; naming the commit on the form gives it one, its parent the base."""
    repo = make_repo(tmp_path, {"cart.py": CART})
    change = repo.commit({"cart.py": CART + "# rounded\n"}, "Round totals")
    make_git_project(repo)
    [file] = [f for f in transcript_files(repo) if f.format == "claude-code"]
    client.force_login(admin_user)

    def send(original: str, format: str = "claude-code"):
        return client.post(
            reverse(URL),
            {
                "project": "shop",
                "format": format,
                "original": original,
                "file": SimpleUploadedFile(file.name, file.data),
            },
            follow=True,
        )

    refused = send("not-a-sha")
    assert refused.status_code == 400
    assert "A commit is 4 to 64 hexadecimal characters" in refused.content.decode()
    native = send(change, format="native")
    assert native.status_code == 400
    assert "Only an agent&#x27;s own file takes an original commit." in (
        native.content.decode()
    )
    assert not Run.objects.exists()

    assert send(change[:12].upper()).status_code == 200

    run = Run.objects.get()
    assert run.original_commit == change
    assert run.record["inferred"]["original_commit"] == "named on import (--original)"


def test_unreproducible_runs_are_one_link_away_from_why(
    client, admin_user, git_project
):
    client.force_login(admin_user)
    upload(client, jsonl(record(1)))

    response = upload(client, line(record(2)))

    page = response.content.decode()
    link = re.search(
        r'<a id="unreproducible-runs" href="([^"]+)">1 unreproducible', page
    )
    assert link, page
    listed = client.get(html.unescape(link.group(1)))
    [run] = listed.context["runs"]
    assert (run.external_id, run.preflight) == ("run-0002", "unreproducible")
    assert run.preflight_reason[:40] in listed.content.decode()


def test_a_file_of_another_known_format_whose_every_line_failed_names_that_format(
    client, admin_user, tmp_path
):
    repo = make_repo(tmp_path, {"cart.py": CART})
    make_git_project(repo)
    [session] = [f for f in transcript_files(repo) if f.format == "claude-code"]
    client.force_login(admin_user)

    response = client.post(
        reverse(URL),
        {
            "project": "shop",
            "format": "native",
            "file": SimpleUploadedFile(session.name, session.data),
        },
        follow=True,
    )

    page = response.content.decode()
    assert '<th scope="row">Imported</th><td>0</td>' in page
    assert "external_id: required field is missing" in page
    hint = re.search(r'<p class="notice warn" id="format-hint">([^<]*)</p>', page)
    assert hint is not None
    assert html.unescape(hint.group(1)) == (
        "This looks like a Claude Code session: choose its format, "
        "“Claude Code session files” (claude-code)."
    )
    # A native file with a bad line among good ones gets no such hint.
    mixed = jsonl(record()) + b"{}\n"
    assert 'id="format-hint"' not in upload(client, mixed).content.decode()


def test_a_session_read_as_an_aider_history_says_what_it_looks_like(
    client, admin_user, tmp_path
):
    """A Markdown reader finds no section rather than failing lines: the page
    says the file holds no Aider history, not that lines should be JSON, and
    names the format the file looks like."""
    repo = make_repo(tmp_path, {"cart.py": CART})
    make_git_project(repo)
    [session] = [f for f in transcript_files(repo) if f.format == "claude-code"]
    client.force_login(admin_user)

    page = client.post(
        reverse(URL),
        {
            "project": "shop",
            "format": "aider",
            "file": SimpleUploadedFile(session.name, session.data),
        },
        follow=True,
    ).content.decode()

    empty = re.search(r'<p class="notice warn" id="empty-file">(.*?)</p>', page)
    assert empty is not None
    assert "Read as Aider chat history, it holds none" in empty.group(1)
    assert "JSON object" not in empty.group(1)
    assert "This looks like a Claude Code session" in page


def test_the_command_prints_the_same_hint(db, tmp_path):
    repo = make_repo(tmp_path, {"cart.py": CART})
    make_git_project(repo)
    [session] = [f for f in transcript_files(repo) if f.format == "codex"]
    path = tmp_path / session.name
    path.write_bytes(session.data)
    out = StringIO()

    with pytest.raises(SystemExit):
        call_command("import_runs", "--project", "shop", str(path), stdout=out)

    assert out.getvalue().splitlines()[-1] == (
        "This looks like a Codex CLI rollout: choose its format, "
        "“Codex CLI rollout files” (codex)."
    )


def test_an_import_redirects_to_its_summary_which_shows_again_without_importing(
    client, admin_user, git_project
):
    """Post/Redirect/Get: the form stays the page Back returns to, and a
    reload of the summary (or Forward to it) imports nothing again."""
    client.force_login(admin_user)

    response = upload(client, EXAMPLE.read_bytes(), follow=False)

    assert response.status_code == 302
    shown = response["Location"]
    assert shown.startswith(reverse(URL) + "?import=")
    for _ in range(2):
        page = client.get(shown).content.decode()
        assert "runs.jsonl into shop" in page
        assert '<th scope="row">Imported</th><td>4</td>' in page
        assert '<th scope="row">Duplicates</th><td>0</td>' in page
    assert Run.objects.count() == 4
    assert 'id="summary"' not in client.get(reverse(URL)).content.decode()
    # htmx follows the redirect as a page load, so the form is in the history.
    again = client.post(
        reverse(URL),
        {"project": "shop", "file": SimpleUploadedFile("runs.jsonl", b"")},
        headers={"HX-Request": "true"},
    )
    assert again["HX-Redirect"].startswith(reverse(URL) + "?import=")
    assert again["HX-Redirect"] != shown
    # Only the last import's summary is kept; another login never sees it.
    stale = client.get(shown).content.decode()
    assert 'id="import-forgotten"' in stale and 'id="summary"' not in stale
    other = Client()
    other.force_login(admin_user)
    assert 'id="summary"' not in other.get(again["HX-Redirect"]).content.decode()


def post_original(client, original: str):
    return client.post(
        reverse(URL),
        {
            "project": "shop",
            "format": "claude-code",
            "original": original,
            "file": SimpleUploadedFile("session.jsonl", b""),
        },
    )


def said_beside_original(page: str) -> str:
    found = re.search(r'<p class="error" id="id_original_error"[^>]*>(.*?)</p>', page)
    return html.unescape(found.group(1)) if found else ""


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("a1b2c3d" * 10, "At most 64 characters (this one has 70)."),
        (
            "refs/heads/fix-teens",
            "A commit is 4 to 64 hexadecimal characters (0-9, a-f), not a branch "
            "or ref name: give its sha (git rev-parse NAME prints it).",
        ),
        (
            "origin/fix-teens",
            "A commit is 4 to 64 hexadecimal characters (0-9, a-f), not a branch "
            "or ref name: give its sha (git rev-parse NAME prints it).",
        ),
        ("abc", "A commit is 4 to 64 hexadecimal characters (this one has 3)."),
    ],
)
def test_an_original_the_importer_cannot_take_is_refused_in_one_line_and_kept(
    client, admin_user, git_project, typed, said
):
    client.force_login(admin_user)

    response = post_original(client, typed)

    page = response.content.decode()
    assert response.status_code == 400
    assert said_beside_original(page) == said
    # What was typed is shown again whole, in an input that cuts no paste short.
    [field] = re.findall(r'<input type="text" name="original"[^>]*>', page)
    assert f'value="{html.escape(typed)}"' in field
    assert "maxlength" not in field
    assert not Run.objects.exists()


@pytest.mark.parametrize("length", [4, 7, 40, 64])
def test_a_commit_sha_of_any_length_git_takes_passes_the_form(
    client, admin_user, git_project, length
):
    client.force_login(admin_user)

    response = post_original(client, ("aBcDeF0123456789" * 4)[:length])

    # The form takes it (mixed case too) and the file is imported: an empty
    # one, holding no run to name it for.
    assert response.status_code == 302
    assert (
        "The file held no records" in client.get(response["Location"]).content.decode()
    )


@pytest.mark.parametrize(
    ("status", "running"),
    [("queued", True), ("importing", True), ("done", False), ("failed", False)],
)
def test_only_a_running_job_says_it_runs_on_a_worker(
    client, admin_user, git_project, status, running
):
    """The page and each poll say it while the job runs; once it has
    finished (the poll's answer replacing what the page showed), neither does."""
    job = ImportJob.objects.create(
        project=git_project, filename="r.jsonl", size_bytes=1, path="/x", status=status
    )
    client.force_login(admin_user)
    url = reverse("runs_upload_job", args=[job.pk])
    page = client.get(url).content.decode()
    poll = client.get(url, headers={"HX-Request": "true"})

    said = "The import runs on a worker: you may leave this page and come back."
    assert (said in page, said in poll.content.decode()) == (running, running)
    assert poll.status_code == (200 if running else 286)
