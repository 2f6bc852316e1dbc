"""Gemini CLI chat recordings read as runs, from the file the real CLI 0.61.0
wrote (tests/fixtures/agents/gemini-cli-session/)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from replayhub.ingest.lines import split_lines
from replayhub.ingest.native import check_record
from replayhub.ingest.transcripts import gemini_cli
from replayhub.ingest.transcripts.conversation import ASSISTANT, TOOL, USER
from replayhub.ingest.transcripts.shapes import LineError, RecordDraft
from tests.conftest import ROOT

SESSION = (
    ROOT
    / "tests"
    / "fixtures"
    / "agents"
    / "gemini-cli-session"
    / "session-2026-12-02T22-48-e42c6cb9.jsonl"
)
PROMPT = "Make the tests in test_calc.py pass by writing calc.py."
LAST_ANSWER_ID = "319f73d0-6ce4-412f-a55d-5d6429d3400e"


def parsed(data: bytes) -> list:
    lines = split_lines([data], max_line_bytes=1 << 20)
    return list(gemini_cli.parse(lines, name=SESSION.name))


def only_draft(data: bytes) -> RecordDraft:
    results = parsed(data)
    drafts = [p for p in results if isinstance(p, RecordDraft)]
    assert len(drafts) == 1, results
    return drafts[0]


def with_lines(*extra: object, after: int | None = None) -> bytes:
    """The real file with ``extra`` lines added (after line ``after``, or at
    the end)."""
    lines = SESSION.read_bytes().splitlines()
    added = [e if isinstance(e, bytes) else json.dumps(e).encode() for e in extra]
    at = len(lines) if after is None else after
    return b"\n".join(lines[:at] + added + lines[at:]) + b"\n"


def test_the_real_session_reads_as_one_run():
    results = parsed(SESSION.read_bytes())
    assert not [p for p in results if isinstance(p, LineError)]
    [draft] = results
    record = draft.record
    assert record["external_id"] == "e42c6cb9-3c4e-4825-9e15-2764a454fadc"
    # The CLI's <session_context> message comes first; it is not the request.
    assert record["prompt"] == PROMPT
    assert record["provider"] == "gemini"
    assert record["model"] == "gemini-2.5-pro"
    # Three calls of 10 in / 10 out; the two written twice (tokens, then the
    # tool calls) count once.
    assert record["usage"] == {
        "input_tokens": 30,
        "output_tokens": 30,
        "cached_input_tokens": 0,
        "reasoning_output_tokens": 0,
        "tool_input_tokens": 0,
        "turns": 3,
    }
    assert record["output"] == "Wrote calc.py."
    assert record["started_at"] == "2026-12-02T22:48:53.091000Z"
    assert record["cwd"] == "/tmp/gem/run/work/calc"
    assert record["surroundings"] == {
        "agent": {"name": "gemini"},
        "cwd": "/tmp/gem/run/work/calc",
    }
    assert record["transcript"]["format"] == "gemini-cli"
    assert len(record["transcript"]["lines"]) == 16
    assert draft.unread == {}
    assert draft.notes == []


def test_the_session_is_searched_from_its_start_to_its_last_line():
    search = only_draft(SESSION.read_bytes()).search
    assert search.start == datetime(2026, 12, 2, 22, 48, 53, 91000, tzinfo=UTC)
    assert search.end == datetime(2026, 12, 2, 22, 48, 53, 591000, tzinfo=UTC)
    # The file names no branch: the original is looked for on every branch.
    assert search.branch == ""
    assert search.find_base and search.find_original


def test_the_record_is_a_valid_native_record():
    record = only_draft(SESSION.read_bytes()).record
    checked = check_record(record, max_prompt_bytes=1 << 20, project="calc")
    assert checked.external_id == "e42c6cb9-3c4e-4825-9e15-2764a454fadc"
    assert checked.usage["turns"] == 3


def test_a_broken_line_is_reported_and_the_session_still_read():
    results = parsed(with_lines(b'{"id": "x", "type": "user", "content', after=3))
    errors = [p for p in results if isinstance(p, LineError)]
    assert [e.line for e in errors] == [4]
    assert "not valid JSON" in errors[0].error
    [draft] = [p for p in results if isinstance(p, RecordDraft)]
    assert draft.record["prompt"] == PROMPT
    assert draft.record["usage"]["turns"] == 3


def test_records_of_types_not_known_are_counted_not_read():
    data = with_lines(
        {"$compactTo": {"id": "abc"}},
        {"id": "m1", "timestamp": "2026-12-02T22:49:00Z", "type": "tool_group"},
        {"id": "m2", "type": "gemini", "content": "Later answer", "model": "x"},
    )
    results = parsed(data)
    assert not [p for p in results if isinstance(p, LineError)]
    [draft] = results
    assert draft.unread == {"$compactTo": 1, "message tool_group": 1}
    assert draft.notes == [
        "2 lines of types this version does not read "
        "($compactTo: 1, message tool_group: 1)"
    ]
    # A known message after them is still read; the unknown one's time is not.
    assert draft.record["output"] == "Later answer"
    assert draft.search.end == datetime(2026, 12, 2, 22, 48, 53, 591000, tzinfo=UTC)


def test_a_rewind_drops_the_answer_but_not_the_tokens_it_cost():
    draft = only_draft(with_lines({"$rewindTo": LAST_ANSWER_ID}))
    assert "output" not in draft.record
    assert draft.record["usage"]["turns"] == 3
    said = [t.text for t in gemini_cli.turns(draft.record["transcript"])]
    assert "Wrote calc.py." not in said


def test_a_session_without_a_request_is_one_line_error():
    lines = SESSION.read_bytes().splitlines()
    # The metadata and the CLI's context message only.
    results = parsed(b"\n".join(lines[:2]) + b"\n")
    assert len(results) == 1
    assert isinstance(results[0], LineError)
    assert results[0].line == 1
    assert "no user message" in results[0].error


def test_a_session_without_a_time_is_one_line_error():
    lines = [
        {"sessionId": "s1", "projectHash": "0" * 64, "startTime": "yesterday"},
        {"id": "u1", "type": "user", "content": [{"text": "Fix it"}]},
    ]
    results = parsed(b"\n".join(json.dumps(v).encode() for v in lines) + b"\n")
    assert len(results) == 1
    assert isinstance(results[0], LineError)
    assert "no timestamp with a zone" in results[0].error


def test_a_file_without_session_metadata_is_one_line_error():
    line = {"id": "u1", "type": "user", "content": "Fix it", "timestamp": "x"}
    results = parsed(json.dumps(line).encode() + b"\n")
    assert len(results) == 1
    assert isinstance(results[0], LineError)
    assert "sessionId" in results[0].error


def test_a_directory_the_project_hash_does_not_vouch_for_is_not_the_cwd():
    data = SESSION.read_bytes().replace(b"4f647b1be7d5", b"000000000000")
    draft = only_draft(data)
    assert "cwd" not in draft.record
    assert draft.record["surroundings"] == {"agent": {"name": "gemini"}}


@pytest.mark.parametrize(
    "line",
    [
        b"[1, 2]",
        b'"text"',
        b"{}",
        b'{"$set": 5}',
        b'{"$set": {"messages": [1, {"id": 2}, {"id": "z", "type": "user"}]}}',
        b'{"sessionId": "s", "projectHash": "p", "messages": 7}',
        b'{"sessionId": 1, "projectHash": [], "directories": "no"}',
        b'{"id": "t", "type": ["user"], "content": "a list for a type"}',
        b'{"$rewindTo": "nowhere"}',
        b'{"id": "g", "type": "gemini", "content": {"a": 1}, "tokens": {"input": -1}}',
        b'{"id": "g2", "type": "gemini", "toolCalls": [1, {"result": "x"}]}',
        b'{"id": "g3", "type": "gemini", "thoughts": "no", "toolCalls": {}}',
        b'{"id": "g4", "type": "gemini", "thoughts": 5, "content": [{"text": 1}]}',
        b'{"id": "u", "type": "user", "content": [{"functionResponse": 3}]}',
    ],
)
def test_odd_lines_never_break_the_reader(line: bytes):
    results = parsed(with_lines(line, after=4))
    for result in results:
        assert isinstance(result, LineError | RecordDraft)
        if isinstance(result, RecordDraft):
            gemini_cli.turns(result.record["transcript"])
    assert gemini_cli.turns({"lines": "no"}) == []


def test_the_stored_transcript_reads_back_as_the_conversation():
    record = only_draft(SESSION.read_bytes()).record
    turns = gemini_cli.turns(record["transcript"])
    assert [(t.role, t.note) for t in turns] == [
        (USER, "context the CLI added"),
        (USER, ""),
        (ASSISTANT, ""),
        (ASSISTANT, ""),
        (ASSISTANT, ""),
    ]
    assert turns[1].text == PROMPT
    [read] = turns[2].calls
    assert (read.name, read.id) == ("read_file", "read_file__call_fake_0")
    assert json.loads(read.input) == {"file_path": "test_calc.py"}
    assert read.result == (
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    assert not read.error
    [write] = turns[3].calls
    assert write.name == "write_file"
    assert write.result is not None
    assert write.result.startswith("Successfully created and wrote")
    assert turns[4].text == "Wrote calc.py."
    # The results the CLI sends back as user messages fold into their calls.
    assert TOOL not in [t.role for t in turns]


def test_a_result_no_recorded_call_asked_for_is_a_turn_of_its_own():
    orphan = {
        "id": "u9",
        "type": "user",
        "content": [
            {"functionResponse": {"id": "c9", "response": {"error": "denied"}}}
        ],
    }
    record = only_draft(with_lines(orphan)).record
    last = gemini_cli.turns(record["transcript"])[-1]
    assert (last.role, last.text, last.note) == (TOOL, "denied", "result of c9")
