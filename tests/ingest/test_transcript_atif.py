"""ATIF trajectories read without a database or a repository, from the
hand-written fixtures in tests/fixtures/transcripts/atif/."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from replayhub.ingest.importer import read_chunks
from replayhub.ingest.lines import split_lines
from replayhub.ingest.transcripts import atif
from replayhub.ingest.transcripts.conversation import (
    ASSISTANT,
    REASONING,
    SYSTEM,
    TOOL,
    USER,
)
from replayhub.ingest.transcripts.shapes import LineError, RecordDraft
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "transcripts" / "atif"
V10 = FIXTURES / "v1.0-summed.json"
V17 = FIXTURES / "v1.7-branch.json"


def lines_of(path: Path):
    with path.open("rb") as stream:
        yield from split_lines(read_chunks(stream), max_line_bytes=1 << 20)


def parsed(document: dict | bytes, limit: int = 1 << 20) -> list:
    data = document if isinstance(document, bytes) else json.dumps(document).encode()
    return list(atif.parse(split_lines([data], max_line_bytes=1 << 22), limit=limit))


def only_draft(results: list) -> RecordDraft:
    [draft] = results
    assert isinstance(draft, RecordDraft), draft
    return draft


def only_error(results: list) -> str:
    [error] = results
    assert isinstance(error, LineError), error
    assert "\n" not in error.error
    return error.error


def document(path: Path) -> dict:
    return json.loads(path.read_text())


def test_a_v1_0_trajectory_without_final_metrics_sums_its_steps():
    draft = only_draft(list(atif.parse(lines_of(V10), name=V10.name, limit=1 << 20)))
    record = draft.record

    assert record["external_id"] == "atif-fixture-0001"
    assert record["prompt"] == (
        "The invoice total drops the last line. Make total() add every line."
    )
    assert record["model"] == "openai/gpt-4.1-mini"
    assert record["usage"] == {
        "input_tokens": 900 + 1100,
        "output_tokens": 40 + 60,
        "turns": 2,
        "cost_usd": pytest.approx(0.0011 + 0.0014),
    }
    assert record["output"] == (
        "total() now sums every line; the slice that dropped the last one is gone."
    )
    # 09:00:05 at +01:00 is 08:00:05 UTC.
    assert record["started_at"] == "2026-11-20T08:00:05Z"
    assert record["transcript"] == {"format": "atif", "document": document(V10)}
    assert "original_branch" not in record
    # Nothing names a commit: no search, and the run says why it has no original.
    assert not (draft.search.find_base or draft.search.find_original)
    assert draft.notes == [
        "the trajectory names no branch or commit: the run has no original commit"
    ]


def test_a_v1_7_trajectory_takes_final_metrics_and_searches_its_branch():
    draft = only_draft(list(atif.parse(lines_of(V17), name=V17.name, limit=1 << 20)))
    record = draft.record

    assert record["external_id"] == "7c1e4b2a-atif-fixture-0002"
    # The multimodal task's text parts; the system prompt is not the task.
    assert record["prompt"] == "Expired coupons still apply at checkout."
    assert record["model"] == "claude-sonnet-4-5"
    # The totals count the subagent the steps do not; the dispatch step made
    # no model call and is not a turn.
    assert record["usage"] == {
        "input_tokens": 7100,
        "output_tokens": 300,
        "turns": 2,
        "cost_usd": 0.031,
    }
    assert record["output"].startswith("Coupons now compare dates")
    assert record["started_at"] == "2026-11-21T14:02:00Z"
    assert record["original_branch"] == "fix/coupon-expiry"
    search = draft.search
    assert (search.branch, search.find_base, search.find_original) == (
        "fix/coupon-expiry",
        True,
        True,
    )
    assert search.start == datetime(2026, 11, 21, 14, 2, tzinfo=UTC)
    assert search.end == datetime(2026, 11, 21, 14, 4, 12, tzinfo=UTC)
    assert draft.notes == []


def test_every_version_from_1_0_to_1_7_is_read():
    for minor in range(8):
        value = document(V10) | {"schema_version": f"ATIF-v1.{minor}"}
        draft = only_draft(parsed(value))
        assert draft.record["prompt"].startswith("The invoice total drops")
        assert draft.notes == [
            "the trajectory names no branch or commit: the run has no original commit"
        ]


def test_a_later_minor_version_is_read_with_a_note():
    value = document(V10) | {"schema_version": "ATIF-v1.8"}
    draft = only_draft(parsed(value))
    assert draft.record["usage"]["input_tokens"] == 2000
    assert draft.notes[0] == (
        "ATIF-v1.8 is newer than this reader: read as ATIF-v1.7, "
        "fields added since are kept but not read"
    )


def test_an_unknown_major_version_is_one_error():
    value = document(V10) | {"schema_version": "ATIF-v2.0"}
    assert only_error(parsed(value)) == (
        "ATIF-v2.0 is not a version this reader knows (ATIF-v1.0 to ATIF-v1.7)"
    )


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ([1, 2], "not an ATIF trajectory: not a JSON object"),
        (
            {"trajectory_format": "mini-swe-agent-1.1", "messages": []},
            'not an ATIF trajectory: no schema_version "ATIF-v1.x" '
            "(schema_version is null)",
        ),
        (
            {"schema_version": "1.4", "agent": {}, "steps": []},
            'not an ATIF trajectory: no schema_version "ATIF-v1.x" '
            '(schema_version is "1.4")',
        ),
        (
            {"schema_version": "ATIF-v1.5", "steps": [{"source": "user"}]},
            "not an ATIF trajectory: no agent object",
        ),
        (
            {"schema_version": "ATIF-v1.5", "agent": {}, "steps": []},
            "the ATIF trajectory has no steps",
        ),
        (
            {
                "schema_version": "ATIF-v1.5",
                "agent": {"name": "x"},
                "steps": [{"source": "system", "message": "hello"}, "junk", 3],
            },
            "the trajectory has no user message: no task",
        ),
    ],
)
def test_a_document_that_is_not_an_atif_trajectory_is_one_error(value, reason):
    assert only_error(parsed(value)) == reason


def test_a_file_that_is_not_json_is_one_error():
    assert only_error(parsed(b'{"schema_version": "ATIF-v1.7", ')).startswith(
        "not valid JSON"
    )


def test_a_trajectory_over_the_limit_is_refused_as_it_is_read():
    error = only_error(list(atif.parse(lines_of(V17), limit=1000)))
    assert error == "the ATIF trajectory is over the limit of 1,000 bytes"


def test_without_a_session_the_id_is_the_documents_then_its_bytes_hash():
    value = document(V17)
    del value["session_id"]
    assert only_draft(parsed(value)).record["external_id"] == (
        "7c1e4b2a-atif-fixture-0002-main"
    )
    del value["trajectory_id"]
    data = json.dumps(value).encode()
    assert only_draft(parsed(data)).record["external_id"] == (
        "atif-" + hashlib.sha256(data).hexdigest()[:32]
    )


def test_times_without_a_zone_give_no_start_and_say_so():
    value = document(V10)
    for step in value["steps"]:
        step["timestamp"] = step["timestamp"].removesuffix("+01:00")
    draft = only_draft(parsed(value))
    assert "started_at" not in draft.record
    assert draft.search.time_from_base
    assert draft.notes[0] == (
        "the steps' times carry no zone: the run has no start time of its own"
    )
    for step in value["steps"]:
        del step["timestamp"]
    assert only_draft(parsed(value)).notes[0] == (
        "the trajectory records no times: the run has no start time of its own"
    )


def test_several_branches_or_a_continuation_are_noted_not_searched():
    value = document(V17)
    value["agent"]["extra"]["git_branches"] = ["main", "fix/coupon-expiry"]
    value["continued_trajectory_ref"] = "trajectory.cont-1.json"
    draft = only_draft(parsed(value))
    assert "original_branch" not in draft.record
    assert not draft.search.find_original
    assert draft.notes == [
        'the run goes on in another trajectory ("trajectory.cont-1.json"): '
        "this one holds only its beginning",
        'the trajectory names 2 branches ("fix/coupon-expiry, main"): '
        "the run has no original commit",
    ]


def test_odd_values_are_read_around_not_crashed_on():
    value = document(V17)
    value["agent"] = {"model_name": 7, "extra": {"git_branches": "main"}}
    value["final_metrics"] = {"total_prompt_tokens": -1, "total_cost_usd": "free"}
    value["steps"][2]["metrics"] = {"prompt_tokens": "many", "cost_usd": True}
    value["steps"][2]["tool_calls"] = [None, {"function_name": 3}]
    value["steps"][2]["observation"] = {"results": "none"}
    value["steps"].insert(0, ["not", "a", "step"])
    draft = only_draft(parsed(value))
    assert draft.record["model"] == "claude-sonnet-4-5"
    assert draft.record["usage"] == {
        "input_tokens": 3400,
        "output_tokens": 90,
        "turns": 2,
        "cost_usd": 0.008,
    }
    assert [t.role for t in atif.turns(draft.record["transcript"])]


def test_the_stored_trajectory_reads_back_as_the_conversation():
    draft = only_draft(list(atif.parse(lines_of(V17), limit=1 << 20)))
    turns = atif.turns(draft.record["transcript"])

    assert [(t.role, t.text[:30]) for t in turns] == [
        (SYSTEM, "You are a coding agent working"),
        (USER, "Expired coupons still apply at"),
        (REASONING, "The expiry is probably compare"),
        (ASSISTANT, "I will look at the coupon chec"),
        (ASSISTANT, ""),
        (ASSISTANT, "Coupons now compare dates, not"),
    ]
    read, test = turns[3].calls
    assert (read.name, read.id, json.loads(read.input)) == (
        "Read",
        "toolu_01",
        {"file_path": "/work/shop/coupons.py"},
    )
    assert read.result == (
        "def valid(coupon, today):\n    return coupon.expires >= str(today)\n"
    )
    assert (test.name, test.result) == ("Bash", "1 failed, 4 passed")
    [dispatch] = turns[4].calls
    assert (dispatch.name, dispatch.result) == ("Task", "38 passed")


def test_a_result_that_names_no_call_of_its_step_is_a_turn_of_its_own():
    value = document(V10)
    value["steps"][0]["observation"] = {
        "results": [{"content": "workspace ready"}, {"content": [{"type": "image"}]}]
    }
    value["steps"][1]["observation"]["results"][0]["source_call_id"] = "elsewhere"
    turns = atif.turns({"format": "atif", "document": value})
    assert [(t.role, t.text, t.note) for t in turns if t.role == TOOL] == [
        (TOOL, "workspace ready", ""),
        (TOOL, "(content with no text)", ""),
        (
            TOOL,
            "def total(lines):\n    return sum(lines[:-1])\n",
            "result of elsewhere",
        ),
    ]
    [call] = turns[3].calls
    assert call.result is None


def test_a_transcript_of_another_shape_reads_as_no_turns():
    assert atif.turns({"format": "atif", "document": [1]}) == []
    assert atif.turns({"format": "atif", "document": {"steps": "no"}}) == []


def test_a_result_naming_no_call_is_the_answer_to_its_steps_only_call():
    value = document(V10)
    del value["steps"][1]["observation"]["results"][0]["source_call_id"]
    turns = atif.turns({"format": "atif", "document": value})
    assert [t.role for t in turns] == [USER, ASSISTANT, ASSISTANT]
    [call] = turns[1].calls
    assert call.result == "def total(lines):\n    return sum(lines[:-1])\n"
