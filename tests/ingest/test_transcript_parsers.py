"""The transcript formats read without a database or a repository, from the
hand-written fixtures in tests/fixtures/transcripts/."""

from __future__ import annotations

from pathlib import Path

from replayhub.ingest.importer import read_chunks
from replayhub.ingest.native import split_lines
from replayhub.ingest.transcripts import aider, claude_code, codex, swebench
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
    assert detect("x.jsonl", b'{"external_id": "a", "prompt": "p"}\n') == "native"
    assert detect("notes.txt", b"hello") is None
