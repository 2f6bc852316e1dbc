"""An import's batches read in a process of its own store what reading them in
line stores, and a failure there reaches the caller."""

from __future__ import annotations

import gc
import json
import multiprocessing
from datetime import datetime

import pytest
from django.db import connection

from replayhub.ingest import importer, parsing, rows
from replayhub.models import Run
from tests.factories import make_git_project
from tests.records import jsonl, line, record

# Every column a record fills, compared row by row.
COLUMNS = (
    *rows.COLUMNS,
    "preflight",
    "preflight_reason",
    "provenance",
    "source",
    "reward",
    "deferred_at",
)


FIFTH = "tab\there\nnewline \\ back\\slash \u00e9 \U0001f600"
SIXTH = {"original_tests_passed": False, "started_at": "2024-02-29T23:59:59.5+05:30"}
# Keys sent by accident, masked wherever the batch is read.
SEVENTH = "curl -H 'Authorization: Bearer " + "t" * 30 + "' -d key=sk-ant-" + "k" * 30


def lines() -> bytes:
    values = [record(n) for n in range(1, 9)]
    values[3] = record(4, title=None, base_sha="abc1234", output="", usage=None)
    values[4] = record(5, prompt=FIFTH)
    values[5] = record(6, **SIXTH)
    values[6] = record(7, output=SEVENTH)
    values += [record(2), record(3, title="changed"), {"x": 1}]
    values += [{**record(20), "project": "nope"}, record(21, extra={"k": [1.5, None]})]
    # Two blank lines (left out), and a last line cut off.
    return jsonl(*values) + b'\n \t\n{"external_id": "cut'


def stored(project) -> list[tuple]:
    return list(
        Run.objects.filter(project=project)
        .order_by("external_id")
        .values_list(*COLUMNS)
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("slot", [parsing.SLOT_BYTES, 2000])
@pytest.mark.parametrize("processes", [1, 2])
def test_batches_read_by_a_parsing_process_store_what_reading_in_line_stores(
    git_repo, monkeypatch, require_postgres, slot, processes
):
    # Two processes take the batches in turn, each with its own slots.
    monkeypatch.setattr(parsing, "PROCESSES", processes)
    # With 2,000-byte slots the batches' lines (about 1,900 bytes) fit, and
    # the streams back of three rows do not: they cross the pipe instead.
    monkeypatch.setattr(parsing, "SLOT_BYTES", slot)
    monkeypatch.setattr(importer, "BATCH_SIZE", 3)
    started: list[multiprocessing.process.BaseProcess] = []

    class Recorded(parsing.ParserProcess):
        def __init__(self, **kw):
            super().__init__(**kw)
            started.extend(self.processes)

    monkeypatch.setattr(importer, "ParserProcess", Recorded)
    in_line, apart = (
        make_git_project(git_repo, "inline"),
        make_git_project(git_repo, "apart"),
    )

    monkeypatch.setattr(importer, "PARSER_PROCESS", False)
    expected = importer.import_stream(chunks=[lines()], project=in_line)
    assert not started
    monkeypatch.setattr(importer, "PARSER_PROCESS", True)
    summary = importer.import_stream(chunks=[lines()], project=apart)

    assert len(started) == processes
    assert all(process.exitcode == 0 for process in started)
    # The same summary, naming the other project.
    assert json.dumps(summary.to_dict()) == json.dumps(expected.to_dict()).replace(
        '"inline', '"apart'
    )
    assert (summary.imported, summary.duplicates, summary.conflicts_total) == (9, 1, 1)
    assert [entry["line"] for entry in summary.invalid] == [11, 12, 16]
    assert stored(apart) == stored(in_line)
    run = Run.objects.get(project=apart, external_id="run-0006")
    assert run.started_at == datetime.fromisoformat("2024-02-29T23:59:59.5+05:30")
    assert run.original_tests_passed is False
    assert run.record == record(6, **SIXTH)
    assert Run.objects.get(project=apart, external_id="run-0005").prompt == FIFTH
    assert Run.objects.get(project=apart, external_id="run-0007").output == (
        "curl -H 'Authorization: Bearer [redacted]' -d key=[redacted]"
    )
    assert not multiprocessing.active_children()


@pytest.mark.django_db(transaction=True)
def test_every_limited_text_at_its_limit_is_stored_whole_by_a_parsing_process(
    git_repo, monkeypatch, require_postgres
):
    # The longest UTF-8 each limit allows (four bytes a character), beside
    # records sharing provider, model, effort and sandbox and one that does
    # not: two batches, each read into its COPY stream by the parsing process.
    monkeypatch.setattr(importer, "BATCH_SIZE", 2)
    project = make_git_project(git_repo, "widest")
    widest = "\U0001f600"
    longest = record(
        1,
        external_id=widest * 255,
        title=widest * 500,
        provider=widest * 100,
        model=widest * 200,
        effort=widest * 50,
        original_branch=widest * 255,
        sandbox={"image": widest * 512, "config_sha256": "d" * 64},
    )
    values = [longest, record(2), record(3), record(4, provider="openai", model="o3")]
    summary = importer.import_stream(chunks=[jsonl(*values)], project=project)

    assert (summary.imported, summary.invalid_total) == (4, 0)
    runs = {run.external_id: run for run in Run.objects.filter(project=project)}
    assert [runs[value["external_id"]].record for value in values] == values
    stored = runs[widest * 255]
    assert (stored.title, stored.original_branch, stored.sandbox_image) == (
        widest * 500,
        widest * 255,
        widest * 512,
    )
    assert (stored.provider, stored.model, stored.effort) == (
        widest * 100,
        widest * 200,
        widest * 50,
    )
    shared, other = runs["run-0002"], runs["run-0004"]
    assert (shared.provider, shared.model) == ("anthropic", "claude-sonnet-4-5")
    assert (other.provider, other.model) == ("openai", "o3")


@pytest.mark.django_db(transaction=True)
def test_a_failure_in_the_parsing_process_reaches_the_caller_and_keeps_whole_batches(
    git_repo, monkeypatch, require_postgres
):
    monkeypatch.setattr(importer, "BATCH_SIZE", 2)
    project = make_git_project(git_repo)
    real_read = parsing.read_batch

    def read_batch(batch, **kw):
        if batch[0][0] == 5:
            raise MemoryError("no room to read")
        return real_read(batch, **kw)

    # Patched before the child is forked, so the child has it too.
    monkeypatch.setattr(parsing, "read_batch", read_batch)

    with pytest.raises(RuntimeError, match="MemoryError: no room to read"):
        importer.import_stream(
            chunks=[jsonl(*(record(n) for n in range(1, 11)))], project=project
        )

    assert sorted(Run.objects.values_list("external_id", flat=True)) == [
        "run-0001",
        "run-0002",
        "run-0003",
        "run-0004",
    ]
    assert not multiprocessing.active_children()


@pytest.mark.django_db(transaction=True)
def test_an_import_leaves_the_callers_connection_and_collector_as_it_found_them(
    git_repo, monkeypatch, require_postgres
):
    # Its batches are stored on a connection of their own that commits
    # without waiting for the disk, and read with the collector looking away.
    monkeypatch.setattr(importer, "BATCH_SIZE", 3)
    project = make_git_project(git_repo)
    frozen = gc.get_freeze_count()

    summary = importer.import_stream(
        chunks=[jsonl(*(record(n) for n in range(1, 11)))], project=project
    )

    assert summary.imported == Run.objects.filter(project=project).count() == 10
    assert gc.get_freeze_count() == frozen
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"
    assert not multiprocessing.active_children()


def test_parsing_processes_that_cannot_start_leave_the_collector_as_it_was(
    monkeypatch,
):
    frozen = gc.get_freeze_count()
    started: list[multiprocessing.process.BaseProcess] = []
    real_start = multiprocessing.context.ForkProcess.start

    def start(self):
        if started:
            raise OSError("no more processes")
        started.append(self)
        real_start(self)

    monkeypatch.setattr(multiprocessing.context.ForkProcess, "start", start)
    with pytest.raises(OSError, match="no more processes"):
        parsing.ParserProcess(
            project=None, max_prompt_bytes=1024, max_line_bytes=1024, processes=2
        )

    assert gc.get_freeze_count() == frozen
    assert started[0].exitcode is not None
    assert not multiprocessing.active_children()


def test_a_packed_batch_is_its_rows_copy_stream_and_gives_them_back():
    lines = [(n, line(record(n)), True) for n in (3, 4, 5)]
    read = rows.read_batch(
        lines, project="shop", max_prompt_bytes=1 << 20, max_line_bytes=1 << 20,
        binary=True,
    )  # fmt: skip
    head, tail = b"H" * 14, b"tail-of-the-batch"

    packed = rows.pack(read.rows, head, tail)

    made = [head + row.columns + tail for row in read.rows]
    assert packed.data == b"".join([rows.SIGNATURE, *made, rows.TRAILER])
    assert rows.unpack(packed) == [row._replace(project=None) for row in read.rows]
    assert rows.unpack(rows.pack([], head, tail)) == []


def test_lines_handed_over_in_shared_memory_come_back_as_they_were(monkeypatch):
    slots = parsing.Slots()
    try:
        lines: rows.Lines = [
            (1, b'{"a": 1}', True),
            (2, None, True),  # over the size limit
            (4, b"", True),
            (5, b'{"b": "line\none"}', True),  # an array's element: a newline
            (6, b"\xff\xfe", True),
            (7, b'{"cut', False),
        ]
        for batch in range(3):
            sent = parsing.hand_over(slots, batch, lines)
            assert isinstance(sent, parsing.Shared)
            assert parsing.taken_over(slots, batch, sent) == lines
        # A batch larger than its slot goes over the pipe as it is.
        monkeypatch.setattr(parsing, "SLOT_BYTES", 16)
        assert parsing.hand_over(slots, 0, lines) is lines
        assert parsing.taken_over(slots, 0, lines) is lines
    finally:
        slots.close()
