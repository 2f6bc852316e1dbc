"""``manage.py import_runs``: streaming, idempotent, nothing lost."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.urls import reverse

from replayhub.ingest import importer
from replayhub.management.commands.import_runs import _Status
from replayhub.models import Preflight, Run
from tests.conftest import ROOT, child_env
from tests.factories import make_git_project
from tests.records import EXAMPLE, jsonl, line, record, write

SUMMARY_KEYS = {
    "imported",
    "duplicates",
    "conflicts",
    "invalid",
    "conflicts_total",
    "invalid_total",
    "preflight",
    "unread_types",
}


def import_runs(*args: str, stdin: bytes | None = None) -> tuple[int, str]:
    """Run the command in-process; returns (exit status, stdout)."""
    out = io.StringIO()
    try:
        if stdin is not None:
            fake = io.TextIOWrapper(io.BytesIO(stdin))
            original, sys.stdin = sys.stdin, fake
        try:
            call_command("import_runs", *args, stdout=out, stderr=io.StringIO())
        finally:
            if stdin is not None:
                sys.stdin = original
    except SystemExit as exit:
        return exit.code, out.getvalue()
    return 0, out.getvalue()


def summary_of(*args: str, **kw) -> tuple[int, dict]:
    status, out = import_runs(*args, "--json", **kw)
    return status, json.loads(out)


def test_the_example_file_imports_every_run_with_its_fields(git_project):
    status, summary = summary_of(str(EXAMPLE), "--no-preflight")

    assert status == 0
    assert summary == {
        "imported": 4,
        "duplicates": 0,
        "conflicts": [],
        "invalid": [],
        "conflicts_total": 0,
        "invalid_total": 0,
        "preflight": None,
        "unread_types": {},
    }
    run = Run.objects.get(external_id="run-2024-11-03-0001")
    assert run.project == git_project
    assert run.title == "Fix rounding in cart totals"
    assert run.model == "claude-sonnet-4-5"
    assert run.base_sha == "3f9c2e1a7b5d4c6e8f0a1b2c3d4e5f6a7b8c9d0e"
    assert run.original_tests_passed is True
    assert run.sandbox_image.endswith("@sha256:" + "4d" * 32)
    assert run.sandbox_config_sha256 == "9b" * 32
    assert run.started_at.isoformat() == "2024-11-03T02:14:07+00:00"
    assert run.usage["turns"] == 17
    assert run.raw["platform"] == {
        "job_url": "https://ci.example.com/jobs/88412",
        "attempt": 1,
    }
    assert len(run.record_sha256) == 64
    assert run.preflight == Preflight.PENDING


def test_importing_the_same_file_twice_reports_every_record_as_a_duplicate(
    git_project, tmp_path
):
    path = write(tmp_path / "runs.jsonl", jsonl(*(record(n) for n in range(1, 6))))
    assert summary_of(str(path), "--project", "shop")[1]["imported"] == 5
    before = list(Run.objects.values_list("pk", "imported_at", "record_sha256"))

    status, summary = summary_of(str(path), "--project", "shop")

    assert status == 0
    assert (summary["imported"], summary["duplicates"]) == (0, 5)
    assert list(Run.objects.values_list("pk", "imported_at", "record_sha256")) == before


def test_a_changed_record_with_a_known_external_id_is_a_conflict_and_never_overwrites(
    git_project, tmp_path
):
    write(tmp_path / "first.jsonl", jsonl(record(1), record(2)))
    summary_of(str(tmp_path / "first.jsonl"), "--project", "shop")
    changed = record(2, prompt="Something else entirely.")
    write(tmp_path / "second.jsonl", jsonl(record(1), changed, record(3)))

    status, summary = summary_of(str(tmp_path / "second.jsonl"), "--project", "shop")

    assert status == 1
    assert (summary["imported"], summary["duplicates"]) == (1, 1)
    assert summary["conflicts"] == [
        {"line": 2, "project": "shop", "external_id": "run-0002"}
    ]
    assert summary["conflicts_total"] == 1
    assert Run.objects.get(external_id="run-0002").prompt == record(2)["prompt"]


def test_duplicate_lines_in_one_file_are_stored_once(git_project, tmp_path):
    changed = record(1, title="Task 1, again but different")
    path = write(
        tmp_path / "runs.jsonl", jsonl(record(1), record(2), record(1), changed)
    )

    status, summary = summary_of(str(path), "--project", "shop")

    assert status == 1
    assert (summary["imported"], summary["duplicates"]) == (2, 1)
    assert [c["line"] for c in summary["conflicts"]] == [4]
    assert Run.objects.get(external_id="run-0001").title == "Task 1"


def test_duplicates_and_conflicts_are_found_across_batches(
    git_project, tmp_path, monkeypatch
):
    monkeypatch.setattr(importer, "BATCH_SIZE", 3)
    values = [record(n) for n in range(1, 8)]
    values += [record(2), record(7, title="changed"), record(8)]
    path = write(tmp_path / "runs.jsonl", jsonl(*values))

    status, summary = summary_of(str(path), "--project", "shop", "--no-preflight")

    assert status == 1
    assert (summary["imported"], summary["duplicates"]) == (8, 1)
    assert summary["conflicts"] == [
        {"line": 9, "project": "shop", "external_id": "run-0007"}
    ]
    assert Run.objects.count() == 8


def test_a_truncated_last_line_is_invalid_and_the_rest_is_imported(
    git_project, tmp_path
):
    cut = line(record(3))[:40]
    path = write(tmp_path / "runs.jsonl", jsonl(record(1), record(2)) + cut)

    status, summary = summary_of(str(path), "--project", "shop")

    assert status == 1
    assert summary["imported"] == 2
    [invalid] = summary["invalid"]
    assert invalid["line"] == 3
    assert "the file was probably cut off" in invalid["error"]


def test_a_last_line_without_a_newline_is_imported_when_it_is_complete(
    git_project, tmp_path
):
    path = write(tmp_path / "runs.jsonl", jsonl(record(1)) + line(record(2))[:-1])
    assert summary_of(str(path), "--project", "shop")[1]["imported"] == 2


def test_an_invalid_utf8_line_is_reported_and_the_others_are_imported(
    git_project, tmp_path
):
    bad = line(record(2)).replace(b"Fix bug", b"Fix \xff\xfe bug")
    path = write(tmp_path / "runs.jsonl", line(record(1)) + bad + line(record(3)))

    status, summary = summary_of(str(path), "--project", "shop")

    assert status == 1
    assert summary["imported"] == 2
    assert summary["invalid"][0]["line"] == 2
    assert summary["invalid"][0]["error"].startswith("not valid UTF-8")


def test_every_kind_of_bad_line_is_reported_by_line_and_field(git_project, tmp_path):
    lines = [
        line(record(1)),
        b"[1, 2, 3]\n",
        line(record(3, drop=["started_at"])),
        line(record(4, title=4)),
        line(record(5, original_commit="HEAD~1")),
        line(record(6, base_sha="--output=/tmp/x")),
        line(record(7, prompt="p" * 2_000_000)),
        line(record(8, project="nope")),
        b"   \n",
        line(record(10)),
    ]
    path = write(tmp_path / "runs.jsonl", b"".join(lines))

    status, summary = summary_of(str(path), "--project", "shop")

    assert status == 1
    assert summary["imported"] == 2
    errors = {entry["line"]: entry["error"] for entry in summary["invalid"]}
    assert errors == {
        2: "a record must be a JSON object, not an array",
        3: "started_at: required field is missing",
        4: "title: must be a string, not a number 4",
        5: 'original_commit: "HEAD~1" is not a commit sha (7 to 64 lowercase hex '
        "digits)",
        6: 'base_sha: "--output=/tmp/x" is not a commit sha (7 to 64 lowercase hex '
        "digits)",
        7: "prompt: 2,000,000 bytes is above the limit of 1,048,576 bytes",
        8: 'project: the record names "nope" but the import is into "shop"',
    }
    assert summary["invalid_total"] == 7


def test_a_record_naming_an_unknown_project_is_invalid(git_project, tmp_path):
    path = write(
        tmp_path / "runs.jsonl",
        jsonl(record(1, project="shop"), record(2, project="nope")),
    )

    status, summary = summary_of(str(path))

    assert status == 1
    assert summary["imported"] == 1
    assert summary["invalid"] == [
        {"line": 2, "error": 'project: there is no project "nope"'}
    ]


def test_records_can_name_several_projects(git_project, git_repo, tmp_path):
    make_git_project(git_repo, slug="billing")
    path = write(
        tmp_path / "runs.jsonl",
        jsonl(record(1, project="shop"), record(1, project="billing")),
    )
    assert summary_of(str(path))[1]["imported"] == 2
    assert set(Run.objects.values_list("project__slug", flat=True)) == {
        "shop",
        "billing",
    }


def test_a_line_over_the_record_size_limit_is_invalid_and_the_next_line_imports(
    git_project, tmp_path, settings
):
    settings.REPLAYHUB_MAX_RECORD_BYTES = 2000
    huge = line(record(2, output="o" * 5000))
    path = write(tmp_path / "runs.jsonl", line(record(1)) + huge + line(record(3)))

    status, summary = summary_of(str(path), "--project", "shop")

    assert status == 1
    assert summary["imported"] == 2
    assert summary["invalid"] == [
        {"line": 2, "error": "the line is longer than the limit of 2,000 bytes"}
    ]


def test_html_and_sql_looking_content_is_stored_verbatim(git_project, tmp_path):
    nasty = "<script>alert('x')</script>\"; DROP TABLE replayhub_run; --"
    value = record(1, title=nasty, prompt=nasty, output=nasty, external_id=nasty)
    write(tmp_path / "runs.jsonl", jsonl(value))

    assert summary_of(str(tmp_path / "runs.jsonl"), "--project", "shop")[0] == 0

    run = Run.objects.get()
    assert (run.external_id, run.title, run.prompt, run.output) == (nasty,) * 4
    assert run.record == value


def test_unknown_keys_are_kept_in_the_raw_record(git_project, tmp_path):
    value = record(1, platform={"job": 88412}, tags=["nightly", "canary"])
    write(tmp_path / "runs.jsonl", jsonl(value))
    summary_of(str(tmp_path / "runs.jsonl"), "--project", "shop")
    assert Run.objects.get().record == value


@pytest.mark.parametrize(
    "output", ["Done.", "", None, "absent"], ids=["text", "empty", "null", "absent"]
)
def test_the_prompt_and_output_are_stored_once_and_the_record_reads_back_whole(
    git_project, tmp_path, output
):
    value = record(1, prompt="Fix the cart.\n" * 50)
    if output == "absent":
        del value["output"]
    else:
        value["output"] = output
    write(tmp_path / "runs.jsonl", jsonl(value))
    summary_of(str(tmp_path / "runs.jsonl"), "--project", "shop")

    run = Run.objects.get()
    assert run.record == value
    assert "prompt" not in run.raw
    assert ("output" in run.raw) == (output in ("", None))
    # Importing the same file again finds the same record: a duplicate.
    assert (
        summary_of(str(tmp_path / "runs.jsonl"), "--project", "shop")[1]["duplicates"]
        == 1
    )


def test_text_that_copy_formats_treat_specially_comes_back_byte_for_byte(
    git_project, tmp_path
):
    # Tabs, newlines and backslashes delimit and escape COPY's text format; \\N
    # is its null. The run table is written with binary COPY on PostgreSQL.
    tricky = 'a\tb\nc\r\\N \\ \\t é 😀 \u2028 \x7f "q" \' <&>'
    value = record(
        1,
        title=tricky,
        prompt=tricky,
        output=tricky,
        original_branch=tricky,
        extra={"text": tricky, "numbers": [0.1, 1e22, -0.0, 12], "none": None},
    )
    write(tmp_path / "runs.jsonl", jsonl(value))
    assert summary_of(str(tmp_path / "runs.jsonl"), "--project", "shop")[0] == 0

    run = Run.objects.get()
    assert (run.title, run.prompt, run.output, run.original_branch) == (tricky,) * 4
    assert run.record == value
    assert run.usage == value["usage"]


def test_the_admin_shows_the_record_as_received_escaped(
    client, admin_user, git_project, tmp_path
):
    value = record(1, prompt="<script>alert(1)</script>", platform={"job": "<b>7</b>"})
    write(tmp_path / "runs.jsonl", jsonl(value))
    summary_of(str(tmp_path / "runs.jsonl"), "--project", "shop")
    admin_user.is_staff = True
    admin_user.save()
    client.force_login(admin_user)

    run = Run.objects.get()
    page = client.get(reverse("admin:replayhub_run_change", args=[run.pk]))

    html = page.content.decode()
    assert page.status_code == 200
    assert "Record as received" in html
    # The prompt, stored once in its column, is part of the record shown.
    assert "&quot;prompt&quot;: &quot;&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;7&lt;/b&gt;" in html
    assert "<script>alert(1)" not in html and "<b>7</b>" not in html


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_import_shows_its_progress_on_a_terminal_and_only_there(
    git_project, tmp_path, monkeypatch
):
    monkeypatch.setattr(importer, "BATCH_SIZE", 4)
    monkeypatch.setattr(_Status, "INTERVAL", 0)
    path = write(tmp_path / "runs.jsonl", jsonl(*(record(n) for n in range(1, 11))))
    terminal, out = Terminal(), io.StringIO()

    call_command(
        "import_runs", str(path), "--project", "shop", stdout=out, stderr=terminal
    )

    shown = terminal.getvalue()
    assert "\rimport: 4 lines read" in shown and "\rimport: 8 lines read" in shown
    assert "\rpreflight: 10 of 10 new runs" in shown
    # The status line is wiped before the summary is printed.
    assert shown.endswith("\r\x1b[K")
    assert out.getvalue().startswith("imported    10")

    piped = io.StringIO()
    call_command(
        "import_runs", str(path), "--project", "shop", stdout=out, stderr=piped
    )
    assert piped.getvalue() == ""


def test_standard_input_is_read_with_a_dash(git_project):
    status, summary = summary_of("-", "--project", "shop", stdin=jsonl(record(1)))
    assert (status, summary["imported"]) == (0, 1)


def test_the_json_output_is_exactly_the_summary_object(git_project, tmp_path):
    path = write(tmp_path / "runs.jsonl", jsonl(record(1)) + b"{bad\n")
    status, out = import_runs(str(path), "--project", "shop", "--json")
    assert status == 1
    assert set(json.loads(out)) == SUMMARY_KEYS


def test_the_human_output_is_a_short_table_with_the_problems(git_project, tmp_path):
    odd = 'run-0001"\u202e'  # a quote and a right-to-left override
    write(tmp_path / "first.jsonl", jsonl(record(1, external_id=odd)))
    import_runs(str(tmp_path / "first.jsonl"), "--project", "shop")
    changed = record(1, external_id=odd, title="changed")
    path = write(tmp_path / "runs.jsonl", jsonl(record(2), changed) + b"{bad\n")

    status, out = import_runs(str(path), "--project", "shop", "--no-preflight")

    assert status == 1
    assert out.splitlines() == [
        "imported    1",
        "duplicates  0",
        "conflicts   1",
        "invalid     1",
        "line 3: invalid: not valid JSON: Expecting property name enclosed in "
        "double quotes at column 2",
        'line 2: conflict: shop "run-0001\\"\\u202e" was imported before with '
        "other content; the stored run was kept",
    ]


def test_an_unknown_project_is_a_usage_error(git_project, tmp_path):
    path = write(tmp_path / "runs.jsonl", jsonl(record(1)))
    with pytest.raises(CommandError, match="there is no project 'nope'") as caught:
        call_command("import_runs", str(path), "--project", "nope")
    assert caught.value.returncode == 2
    assert not Run.objects.exists()


def test_an_unreadable_file_is_a_usage_error(git_project, tmp_path):
    with pytest.raises(CommandError, match="cannot read") as caught:
        call_command("import_runs", str(tmp_path / "missing.jsonl"))
    assert caught.value.returncode == 2
    with pytest.raises(CommandError, match="Is a directory") as caught:
        call_command("import_runs", str(tmp_path))
    assert caught.value.returncode == 2


@pytest.mark.django_db(transaction=True)
def test_the_exit_status_is_1_for_an_invalid_line_and_2_for_a_usage_error(
    git_repo, tmp_path
):
    make_git_project(git_repo)
    path = write(tmp_path / "runs.jsonl", jsonl(record(1)) + b"[]\n")

    def run(*args):
        return subprocess.run(
            [sys.executable, "manage.py", "import_runs", *args],
            cwd=ROOT,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )

    invalid = run(str(path), "--project", "shop", "--no-preflight")
    assert invalid.returncode == 1
    assert invalid.stdout.splitlines()[0] == "imported    1"
    usage = run(str(path), "--project", "nope")
    assert usage.returncode == 2
    assert usage.stderr.strip() == "CommandError: there is no project 'nope'."
    assert run(str(path), "--project", "shop").returncode == 1  # now a duplicate too


@pytest.mark.django_db(transaction=True)
def test_two_imports_of_the_same_file_at_once_store_each_run_once(
    git_repo, tmp_path, monkeypatch
):
    monkeypatch.setattr(importer, "BATCH_SIZE", 20)
    project = make_git_project(git_repo)
    data = jsonl(*(record(n) for n in range(200)))
    results = []

    def one_import():
        try:
            results.append(importer.import_stream(chunks=[data], project=project))
        finally:
            connection.close()

    interval = sys.getswitchinterval()
    threads = [threading.Thread(target=one_import) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert len(results) == 2
    # Two writers ran at once in this process and left its switch interval alone.
    assert sys.getswitchinterval() == interval
    assert sum(r.imported for r in results) == 200
    assert sum(r.duplicates for r in results) == 200
    assert not any(r.conflicts_total or r.invalid_total for r in results)
    assert Run.objects.count() == 200


def test_a_record_without_a_project_needs_one_on_the_command_line(
    git_project, tmp_path
):
    path = write(tmp_path / "runs.jsonl", jsonl(record(1)))
    status, summary = summary_of(str(path))
    assert status == 1
    assert summary["invalid"][0]["error"].startswith("project: required field")


@pytest.mark.parametrize("batch", [1000, 2], ids=["one-batch", "batches"])
def test_a_file_repeating_stored_records_and_its_own_is_counted_exactly(
    git_project, tmp_path, monkeypatch, batch
):
    # Batches written whole until one repeats a record, then looked up.
    monkeypatch.setattr(importer, "BATCH_SIZE", batch)
    write(tmp_path / "first.jsonl", jsonl(*(record(n) for n in range(1, 5))))
    assert (
        summary_of(str(tmp_path / "first.jsonl"), "--project", "shop")[1]["imported"]
        == 4
    )
    numbers = [5, 2, 6, 6, 7, 8, 9, 10, 3, 4, 11, 11]
    values = [record(n) for n in numbers]
    values[9] = record(4, title="changed")
    write(tmp_path / "second.jsonl", jsonl(*values))

    status, summary = summary_of(str(tmp_path / "second.jsonl"), "--project", "shop")

    assert status == 1
    assert (summary["imported"], summary["duplicates"]) == (7, 4)
    assert summary["conflicts"] == [
        {"line": 10, "project": "shop", "external_id": "run-0004"}
    ]
    stored = list(Run.objects.values_list("external_id", flat=True))
    assert sorted(stored) == [f"run-{n:04d}" for n in range(1, 12)]
    assert Run.objects.get(external_id="run-0004").title == "Task 4"


def another_import(project, *values) -> None:
    """Import ``values`` on a thread of its own, as a concurrent import would."""

    def run():
        try:
            importer.import_stream(chunks=[jsonl(*values)], project=project)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("batch", [1000, 1], ids=["in-line", "writer-thread"])
def test_a_batch_written_whole_after_another_import_stored_a_record_is_classified(
    git_repo, monkeypatch, require_postgres, batch
):
    monkeypatch.setattr(importer, "BATCH_SIZE", batch)
    project = make_git_project(git_repo)
    real_write = importer._write
    raced = []

    def race_then_write(items):
        # Another import stores run-0002 before this batch is written.
        if not raced and any(i.row.external_id == "run-0002" for i in items):
            raced.append(True)
            another_import(project, record(2))
        return real_write(items)

    monkeypatch.setattr(importer, "_write", race_then_write)

    summary = importer.import_stream(
        chunks=[jsonl(record(1), record(2), record(3))], project=project
    )

    assert raced
    assert (summary.imported, summary.duplicates, summary.conflicts_total) == (2, 1, 0)
    assert Run.objects.count() == 3


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("batch", [1000, 2], ids=["in-line", "writer-thread"])
def test_a_batch_that_collides_with_another_import_is_classified_again(
    git_repo, monkeypatch, require_postgres, batch
):
    monkeypatch.setattr(importer, "BATCH_SIZE", batch)
    project = make_git_project(git_repo)
    real_classify = importer._classify
    raced = []

    def classify_then_race(items):
        result = real_classify(items)
        if not raced:
            raced.append(True)
            # Another import stores run-0002 after this batch looked it up.
            another_import(project, record(2))
        return result

    monkeypatch.setattr(importer, "_classify", classify_then_race)

    # The first batch repeats run-0002, so it is looked up.
    summary = importer.import_stream(
        chunks=[jsonl(record(2), record(2), record(1), record(3))], project=project
    )

    assert raced
    assert (summary.imported, summary.duplicates, summary.conflicts_total) == (2, 2, 0)
    assert Run.objects.count() == 3


@pytest.mark.django_db(transaction=True)
def test_on_postgresql_batches_are_stored_by_a_writer_thread_with_the_same_result(
    git_repo, monkeypatch, require_postgres
):
    monkeypatch.setattr(importer, "BATCH_SIZE", 3)
    project = make_git_project(git_repo)
    stored_by = set()
    real_write = importer._write

    def write(items):
        stored_by.add(threading.current_thread().name)
        return real_write(items)

    monkeypatch.setattr(importer, "_write", write)
    changed = record(3, output="Something else.")
    lines = [record(n) for n in range(1, 8)]
    lines += [record(2), changed, {**record(20), "project": "nope"}, {"x": 1}]
    interval = sys.getswitchinterval()

    summary = importer.import_stream(chunks=[jsonl(*lines)], project=project)

    assert "replayhub-import-writer" in stored_by
    assert summary.imported == 7 and summary.duplicates == 1
    assert summary.conflicts == [
        {"line": 9, "project": "shop", "external_id": "run-0003"}
    ]
    assert [entry["line"] for entry in summary.invalid] == [10, 11]
    assert Run.objects.count() == 7
    assert Run.objects.get(external_id="run-0003").output == record(3)["output"]
    assert sys.getswitchinterval() == interval
    assert not any(t.name == "replayhub-import-writer" for t in threading.enumerate())


@pytest.mark.django_db(transaction=True)
def test_an_error_on_the_writer_thread_reaches_the_caller_and_keeps_whole_batches(
    git_repo, monkeypatch, require_postgres
):
    monkeypatch.setattr(importer, "BATCH_SIZE", 2)
    project = make_git_project(git_repo)
    real_write = importer._write
    calls = []

    def write(items):
        calls.append(len(items))
        if len(calls) == 2:
            raise RuntimeError("the disk is full")
        return real_write(items)

    monkeypatch.setattr(importer, "_write", write)
    interval = sys.getswitchinterval()

    with pytest.raises(RuntimeError, match="the disk is full"):
        importer.import_stream(
            chunks=[jsonl(*(record(n) for n in range(1, 11)))], project=project
        )

    # The first batch was committed; the failed one left nothing behind.
    assert sorted(Run.objects.values_list("external_id", flat=True)) == [
        "run-0001",
        "run-0002",
    ]
    assert sys.getswitchinterval() == interval
    assert not any(t.name == "replayhub-import-writer" for t in threading.enumerate())
