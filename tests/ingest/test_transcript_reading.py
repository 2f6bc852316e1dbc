"""Transcript files read in a process of their own: the same import as in
line, and a reading process that fails or stops ends its file with one
refusal, never the import."""

from __future__ import annotations

import gc
import os
from collections import Counter

import pytest

from replayhub.ingest.services import transcripts_import
from replayhub.ingest.transcripts import loader, reading
from replayhub.ingest.transcripts.loader import AUTO, Source
from replayhub.ingest.transcripts.reading import ReadingProcess
from replayhub.models import Run
from tests.ingest.test_imported_patches import commit_exists
from tests.ingest.test_transcript_import import setup  # noqa: F401 -- a fixture

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_directory_read_in_a_process_of_its_own_imports_as_in_line(
    setup,  # noqa: F811 -- the fixture
    monkeypatch,
):
    project, directory, base, _one, two = setup
    # Every import large enough for a reading process of its own.
    monkeypatch.setattr(loader, "PROCESS_BYTES", 1)
    paths = sorted(directory.iterdir())
    summary = transcripts_import(project=project, paths=paths, format=AUTO)
    runs = {run.external_id: run for run in Run.objects.all()}
    assert set(runs) == {
        "c0de0000-0000-4000-8000-000000000004",
        "aider-20250605T100000",
        "acme-agent-v2:shop__shop-1",
    }
    [problem] = summary.invalid
    assert problem["file"].endswith("predictions.jsonl")
    assert problem["line"] == 2
    assert problem["error"].startswith("shop__shop-2 (acme-agent-v2): git apply")
    assert runs["aider-20250605T100000"].original_commit == two
    assert runs["c0de0000-0000-4000-8000-000000000004"].base_sha == base
    # The patch found in the reading process is stored with its run.
    prediction = runs["acme-agent-v2:shop__shop-1"]
    assert "+    return 1" in prediction.patch.patch
    assert not commit_exists(project.repo_path, prediction.original_commit)

    again = transcripts_import(project=project, paths=paths, format=AUTO)
    assert (again.imported, again.duplicates) == (0, 3)


def read_with(records) -> list[tuple[int, bytes | str]]:
    reader = ReadingProcess(records, lambda: ([], {}, 0), lambda state: None)
    try:
        source = Source("sessions.jsonl", [b"{}\n"] * 3)
        return list(reader.read(source, "claude-code", Counter()))
    finally:
        reader.close()


def test_records_sent_several_to_a_message_come_back_whole_and_in_order():
    # More than one message's count, one record over a message's bytes, a
    # refusal among them, and a last message not full.
    sent: list[tuple[int, bytes | str]] = [
        (n, b'{"external_id": "%d"}' % n) for n in range(1, 150)
    ]
    sent[70] = (71, "line 71: not a record")
    sent[100] = (101, b"x" * (reading.MESSAGE_BYTES + 1))

    def records(source, kind, unread):
        yield from sent

    assert read_with(records) == sent


def test_a_reading_process_keeps_what_was_loaded_out_of_the_collectors_walks():
    # Everything the importing process had loaded is frozen in the child (a
    # full collection there would walk it again and again as a file's
    # sessions grow), and the importing process's own collector is untouched.
    before = gc.get_freeze_count()

    def records(source, kind, unread):
        yield 1, b"%d" % gc.get_freeze_count()

    [(_, frozen)] = read_with(records)
    assert int(frozen) > before + len(gc.get_objects()) // 2
    assert gc.get_freeze_count() == before


def test_a_reading_process_that_fails_refuses_the_rest_of_its_file_in_one_line():
    def records(source, kind, unread):
        yield 1, b'{"external_id": "a"}'
        raise ValueError("a broken reader\nwith a second line")

    assert read_with(records) == [
        (1, b'{"external_id": "a"}'),
        (0, "the file was not read to its end: ValueError: a broken reader"),
    ]


def test_a_reading_process_that_stops_refuses_the_rest_of_its_file_in_one_line():
    def records(source, kind, unread):
        yield 1, b'{"external_id": "a"}'
        os._exit(3)

    assert read_with(records)[-1] == (
        0,
        "the file was not read to its end: the process reading the file "
        "stopped (exit code 3)",
    )


def test_a_file_after_its_reading_process_stopped_is_read_in_line():
    def records(source, kind, unread):
        yield 1, b"".join(source.chunks)

    reader = ReadingProcess(records, lambda: ([], {}, 0), lambda state: None)
    try:
        reader.process.kill()
        reader.process.join()
        source = Source("sessions.jsonl", [b"{}\n"])
        assert list(reader.read(source, "claude-code", Counter())) == [(1, b"{}\n")]
    finally:
        reader.close()
