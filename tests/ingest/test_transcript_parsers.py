"""The transcript formats read without a database or a repository, from the
hand-written fixtures in tests/fixtures/transcripts/."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from replayhub.ingest.importer import read_chunks
from replayhub.ingest.lines import split_lines
from replayhub.ingest.transcripts import (
    aider,
    claude_code,
    codex,
    documents,
    swebench,
)
from replayhub.ingest.transcripts.conversation import conversation
from replayhub.ingest.transcripts.detect import detect
from replayhub.ingest.transcripts.shapes import LineError, RecordDraft
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "transcripts"


def lines_of(path: Path):
    with path.open("rb") as stream:
        yield from split_lines(read_chunks(stream), max_line_bytes=1 << 20)


def drafts(parsed) -> list[RecordDraft]:
    return [p for p in parsed if isinstance(p, RecordDraft)]


def test_a_claude_code_session_counts_each_message_once_and_keeps_its_tape():
    path = FIXTURES / "claude-code" / "5f0c9a1e-0000-4000-8000-000000000001.jsonl"
    [draft] = list(claude_code.parse(lines_of(path), name=path.name))
    record = draft.record
    assert record["external_id"] == "5f0c9a1e-0000-4000-8000-000000000001"
    assert record["prompt"] == "Fix the rounding in cart totals"
    assert record["model"] == "claude-sonnet-4-20250514"
    assert record["started_at"] == "2025-06-01T10:00:00Z"
    assert record["original_branch"] == "feature/rounding"
    assert record["title"] == "Cart rounding fix"
    # msg_01 is written on two lines with the same usage: counted once.
    assert record["usage"] == {
        "input_tokens": 300,
        "output_tokens": 50,
        "cache_creation_input_tokens": 10,
        "cache_read_input_tokens": 1500,
        "turns": 2,
    }
    assert record["output"].startswith("Rounded each line")
    first, second = record["tape"]
    assert [b["type"] for b in first["response"]["content"]] == ["text", "tool_use"]
    assert first["request"]["messages"][0]["content"].startswith("Fix the rounding")
    # The compaction summary is the second call's new input, not a prompt.
    assert second["request"]["messages"][-1]["content"].startswith("This session")
    assert second["usage"] == {"input_tokens": 200, "output_tokens": 30}
    assert draft.search.branch == "feature/rounding"
    assert draft.search.find_base and draft.search.find_original


def test_two_sessions_in_one_file_are_two_runs_and_a_bad_line_is_reported():
    path = FIXTURES / "claude-code" / "two-sessions.jsonl"
    parsed = list(claude_code.parse(lines_of(path), name=path.name))
    errors = [p for p in parsed if isinstance(p, LineError)]
    assert [e.line for e in errors] == [6]
    b, c = drafts(parsed)
    assert (b.record["external_id"], b.record["prompt"]) == ("sess-b", "Add a README")
    # A meta line (a slash command's wrapper) is not the prompt.
    assert (c.record["external_id"], c.record["prompt"]) == (
        "sess-c",
        "Explain the build",
    )
    assert c.line == 3


def test_a_resumed_session_keeps_its_history_and_counts_only_its_own_usage():
    path = FIXTURES / "claude-code" / "sess-d.jsonl"
    [draft] = drafts(claude_code.parse(lines_of(path), name=path.name))
    record = draft.record
    assert record["external_id"] == "sess-d"
    assert record["resumed_from"] == ["sess-b"]
    assert record["prompt"] == "Add a README"
    assert record["started_at"] == "2025-06-03T08:00:00Z"
    assert record["usage"]["input_tokens"] == 13
    assert len(record["transcript"]["lines"]) == 4
    assert len(record["tape"]) == 1
    assert len(record["tape"][0]["request"]["messages"]) == 3


def test_a_codex_rollout_reads_its_recorded_base_model_and_token_totals():
    path = FIXTURES / "mixed" / "rollout-2025-06-04T10-00-00-c0de.jsonl"
    text = path.read_text().replace("BASE_SHA_PLACEHOLDER", "a" * 40)
    lines = split_lines([text.encode()], max_line_bytes=1 << 20)
    [draft] = list(codex.parse(lines, name=path.name))
    record = draft.record
    assert record["external_id"] == "c0de0000-0000-4000-8000-000000000004"
    assert record["prompt"] == "Make the tax rate configurable"
    assert (record["model"], record["effort"]) == ("gpt-5-codex", "medium")
    assert record["base_sha"] == "a" * 40
    assert record["usage"] == {
        "input_tokens": 2500,
        "output_tokens": 90,
        "turns": 2,
        "cached_input_tokens": 1800,
        "reasoning_output_tokens": 20,
    }
    assert record["output"] == "TAX now reads SHOP_TAX from the environment."
    calls = record["tape"]
    assert [c["usage"]["output_tokens"] for c in calls] == [50, 40]
    assert calls[0]["response"]["output"][1]["type"] == "function_call"
    assert not draft.search.find_base and draft.search.find_original


def test_aider_sessions_without_a_request_are_left_out():
    path = FIXTURES / "mixed" / ".aider.chat.history.md"
    [draft] = drafts(aider.parse(lines_of(path), name=path.name))
    record = draft.record
    assert record["external_id"] == "aider-20250605T100000"
    assert record["prompt"] == (
        "Add a discount field to the cart\nand show it on the receipt"
    )
    assert record["model"] == "anthropic/claude-sonnet-4-20250514"
    assert record["usage"] == {
        "input_tokens": 5600,
        "output_tokens": 200,
        "turns": 2,
        "approximate": True,
        "cost_usd": 0.0193,
    }
    assert "started_at" in draft.inferred


def test_a_prediction_without_its_instance_is_a_line_error_naming_it():
    lines = split_lines(
        [b'{"instance_id":"x__y-1","model_name_or_path":"m","model_patch":""}\n'],
        max_line_bytes=1 << 20,
    )
    [error] = list(swebench.parse(lines, instances={}))
    assert isinstance(error, LineError)
    assert error.error.startswith("x__y-1: no instance with a base_commit")


def test_a_swe_agent_trajectory_reads_its_config_stats_steps_and_patch():
    path = FIXTURES / "swe-agent" / "shop__shop-7.traj"
    when = datetime(2025, 6, 7, 8, 0, tzinfo=UTC)
    [draft] = list(
        documents.parse_swe_agent(
            lines_of(path), name=path.name, limit=1 << 20, file_time=when
        )
    )
    record = draft.record
    assert record["external_id"] == "claude-sonnet-4-20250514:shop__shop-7"
    assert record["prompt"] == "Cart.total() returns 0 whatever the lines are"
    assert record["base_sha"] == "BASE_SHA_PLACEHOLDER"
    assert record["usage"] == {
        "input_tokens": 4000,
        "output_tokens": 300,
        "turns": 3,
        "cost_usd": 0.125,
    }
    # The submission is the patch to apply at the base, and the output.
    patch = record["transcript"]["document"]["info"]["submission"]
    assert draft.search.patch == patch == record["output"]
    assert patch.startswith("--- a/cart.py")
    assert draft.search.patch_label == "shop__shop-7 (claude-sonnet-4-20250514)"
    # No start time in a trajectory: the file's, said as inferred.
    assert record["started_at"] == "2025-06-07T08:00:00Z"
    assert set(draft.inferred) == {"started_at"}
    turns = conversation(record["transcript"])
    calls = [call for turn in turns for call in turn.calls]
    assert [call.name for call in calls] == ["open", "edit", "submit"]
    assert calls[1].input.startswith("edit 2:2\n    return sum(lines)")
    assert calls[1].result is not None and "File updated." in calls[1].result
    assert turns[-1].note == "submitted patch"


def test_a_swe_agent_trajectory_without_a_file_time_asks_for_the_bases_date():
    path = FIXTURES / "swe-agent" / "shop__shop-7.traj"
    [draft] = list(
        documents.parse_swe_agent(lines_of(path), name=path.name, limit=1 << 20)
    )
    assert isinstance(draft, RecordDraft)
    assert "started_at" not in draft.record
    assert draft.search.time_from_base


def test_a_swe_agent_trajectory_over_the_size_limit_is_refused_as_it_is_read():
    path = FIXTURES / "swe-agent" / "shop__shop-7.traj"
    [error] = list(documents.parse_swe_agent(lines_of(path), limit=1000))
    assert isinstance(error, LineError)
    assert "over the limit of 1,000 bytes" in error.error


def test_an_openhands_trajectory_reads_its_events_metrics_and_answer():
    path = FIXTURES / "openhands" / "trajectory.json"
    [draft] = list(documents.parse_openhands(lines_of(path), limit=1 << 20))
    record = draft.record
    # Named by its bytes: the events name no session.
    assert record["external_id"].startswith("openhands-")
    assert len(record["external_id"]) == len("openhands-") + 32
    assert record["prompt"] == "Make Cart.total() sum its lines"
    assert record["model"] == "claude-sonnet-4-20250514"
    # The last event's accumulated metrics, not a sum of them.
    assert record["usage"] == {
        "input_tokens": 2500,
        "output_tokens": 120,
        "cost_usd": 0.025,
    }
    assert record["output"] == "Cart.total() now returns the sum of its lines."
    # Times without a zone are read as UTC, and said so.
    assert record["started_at"] == "2025-06-06T09:00:00Z"
    assert "started_at" in draft.inferred
    assert draft.notes == [
        "an OpenHands trajectory names no commit: the run has no original commit"
    ]
    turns = conversation(record["transcript"])
    assert [t.role for t in turns] == [
        "user",
        "assistant",
        "assistant",
        "compaction",
        "assistant",
    ]
    run, edit = turns[1].calls[0], turns[2].calls[0]
    assert (run.name, run.result) == ("run", "def total(lines):\n    return 0\n")
    assert turns[1].text == "Read the cart first."
    assert edit.name == "edit" and '"new_str": "return sum(lines)"' in edit.input
    assert edit.result == "The file /workspace/cart.py has been edited."


def test_an_openhands_file_that_is_not_a_list_of_events_is_refused():
    lines = split_lines([b'{"events": 3}'], max_line_bytes=1 << 20)
    [error] = list(documents.parse_openhands(lines, limit=1 << 20))
    assert isinstance(error, LineError)
    assert error.error.startswith("not an OpenHands trajectory")


def test_auto_names_each_format_from_the_first_bytes():
    mixed = FIXTURES / "mixed"
    found = {
        path.name: detect(path.name, path.read_bytes()[:4096])
        for path in [*mixed.iterdir(), *(FIXTURES / "claude-code").iterdir()]
    }
    assert found == {
        "rollout-2025-06-04T10-00-00-c0de.jsonl": "codex",
        ".aider.chat.history.md": "aider",
        "predictions.jsonl": "swebench",
        "5f0c9a1e-0000-4000-8000-000000000001.jsonl": "claude-code",
        "two-sessions.jsonl": "claude-code",
        "sess-d.jsonl": "claude-code",
    }
    for path in [
        FIXTURES / "swe-agent" / "shop__shop-7.traj",
        FIXTURES / "openhands" / "trajectory.json",
    ]:
        found[path.name] = detect(path.name, path.read_bytes()[:4096])
    assert found["shop__shop-7.traj"] == "swe-agent"
    assert found["trajectory.json"] == "openhands"
    assert detect("x.jsonl", b'{"external_id": "a", "prompt": "p"}\n') == "native"
    assert detect("notes.txt", b"hello") is None
