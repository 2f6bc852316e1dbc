"""Records, transcripts and rollout lines nested past the bound are refused in
one line naming the file and line, never with a traceback; a line at the bound
and the lines around a refused one are imported."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from replayhub.ingest import importer
from replayhub.ingest.fastpath import read_record
from replayhub.ingest.native import RecordError, parse_line
from replayhub.ingest.transcripts.detect import detect
from replayhub.lib.boundedjson import MAX_DEPTH
from replayhub.models import Run
from replayhub.rollouts.trace import ShapeError, parse_record
from tests.conftest import ROOT, child_env
from tests.factories import make_git_project
from tests.records import jsonl, line, record, write

TOO_DEEP = f"the JSON nests deeper than {MAX_DEPTH} levels"


def nested(levels: int, inner: str = "1") -> str:
    return "[" * levels + inner + "]" * levels


def padded(number: int, levels: int, inner: str = "1") -> bytes:
    """Record ``number`` with a ``pad`` member ``levels`` arrays deep: the
    record is one level deeper."""
    return line(record(number))[:-2] + f', "pad": {nested(levels, inner)}}}\n'.encode()


def manage(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


# --- one line ------------------------------------------------------------------------


@pytest.mark.parametrize("levels", [MAX_DEPTH, 950, 1_024, 1_025, 50_000])
def test_a_record_nested_past_the_bound_is_refused_in_one_line(levels):
    data = padded(1, levels)[:-1]
    for read in (
        lambda: parse_line(data),
        lambda: read_record(data, max_prompt_bytes=10**6, project="shop"),
    ):
        with pytest.raises(RecordError) as refused:
            read()
        assert str(refused.value) == TOO_DEEP


def test_a_record_at_the_bound_is_read():
    data = padded(1, MAX_DEPTH - 1)[:-1]
    assert read_record(data, max_prompt_bytes=10**6, project="shop").external_id


@pytest.mark.parametrize("levels", [150, 950, 5_000])
def test_a_deep_record_only_the_strict_parser_reads_is_refused_as_deep(levels):
    # A byte order mark sends the line to the stdlib parser, which reads it.
    with pytest.raises(RecordError) as refused:
        parse_line(b"\xef\xbb\xbf" + padded(1, levels)[:-1])
    assert str(refused.value) == TOO_DEEP


@pytest.mark.parametrize("levels", [150, 950, 5_000])
def test_a_deep_record_the_strict_parser_refuses_anyway_is_refused_in_one_line(
    levels,
):
    for data in (
        padded(1, levels, inner="NaN")[:-1],
        padded(1, levels)[:-2] + b', "title": "again"}',
    ):
        with pytest.raises(RecordError) as refused:
            parse_line(data)
        assert "\n" not in str(refused.value)


def test_a_deep_rollout_line_is_refused_in_one_line():
    with pytest.raises(ShapeError, match=TOO_DEEP):
        parse_record(nested(950).encode())
    with pytest.raises(ShapeError, match=TOO_DEEP):
        parse_record(b"\xef\xbb\xbf" + nested(950).encode())
    for levels in (950, 50_000):
        with pytest.raises(ShapeError) as refused:
            parse_record(nested(levels, inner="NaN").encode())
        assert "\n" not in str(refused.value)


def test_auto_detection_does_not_guess_from_a_line_it_cannot_read():
    assert detect("session.jsonl", nested(50_000).encode()) is None
    head = ('{"sessionId": "s", "x": ' + nested(950) + "}").encode()
    assert detect("session.jsonl", head) is None


# --- whole imports -----------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_import_runs_refuses_a_950_deep_record_by_file_and_line_and_goes_on(
    git_repo, tmp_path
):
    make_git_project(git_repo)
    path = write(
        tmp_path / "runs.jsonl",
        jsonl(record(1)) + padded(2, 950) + padded(3, MAX_DEPTH - 1),
    )

    done = manage("import_runs", str(path), "--project", "shop", "--no-preflight")

    assert done.returncode == 1
    assert "Traceback" not in done.stderr + done.stdout
    assert done.stdout.splitlines()[:4] == [
        "imported    2",
        "duplicates  0",
        "conflicts   0",
        "invalid     1",
    ]
    assert f"line 2: invalid: {TOO_DEEP}" in done.stdout.splitlines()
    assert sorted(Run.objects.values_list("external_id", flat=True)) == [
        "run-0001",
        "run-0003",
    ]


@pytest.mark.django_db(transaction=True)
def test_import_runs_auto_names_a_file_whose_first_line_nests_too_deep(
    git_repo, tmp_path
):
    make_git_project(git_repo)
    folder = tmp_path / "transcripts"
    folder.mkdir()
    # An object, as a session's first line is: auto reads it to judge it.
    first = '{"sessionId": "s", "pad": ' + nested(20_000) + "}"
    write(folder / "session.jsonl", first.encode() + b"\n")

    done = manage("import_runs", str(folder), "--format", "auto", "--project", "shop")

    assert "Traceback" not in done.stderr + done.stdout
    assert done.returncode == 1
    [problem] = [text for text in done.stdout.splitlines() if "session.jsonl" in text]
    assert len(problem) < 300
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_an_array_body_refuses_a_deep_element_alone(git_project):
    body = (
        b"["
        + b",".join([line(record(1))[:-1], padded(2, 600)[:-1], line(record(3))[:-1]])
        + b"]"
    )

    summary = importer.import_body(chunks=[body], project=git_project)

    assert summary.imported == 2
    assert summary.invalid == [{"line": 2, "error": TOO_DEEP}]


@pytest.mark.django_db
def test_an_array_element_too_deep_to_find_its_end_stops_the_array_in_one_line(
    git_project,
):
    body = b"[" + line(record(1))[:-1] + b"," + padded(2, 50_000)[:-1] + b"]"

    summary = importer.import_body(chunks=[body], project=git_project)

    assert summary.imported == 1
    [problem] = summary.invalid
    assert problem["line"] == 2
    assert problem["error"] == f"{TOO_DEEP}; the rest of the array was not read"


def test_a_swe_agent_configuration_nested_past_the_bound_refuses_the_file():
    from replayhub.ingest.transcripts.documents import parse_swe_agent
    from replayhub.ingest.transcripts.shapes import LineError
    from tests.ingest.test_transcript_parsers import FIXTURES

    document = json.loads((FIXTURES / "swe-agent" / "shop__shop-7.traj").read_text())
    document["replay_config"] = nested(50_000)
    lines = [(1, json.dumps(document).encode(), True)]

    [parsed] = parse_swe_agent(lines, name="x.traj", limit=10**8)

    assert parsed == LineError(1, f"replay_config: {TOO_DEEP}")
