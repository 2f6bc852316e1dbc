"""ATIF written from what ReplayHub holds, and read back by ReplayHub's own
ATIF reader: an imported session's conversation and a replay's tape keep
their steps, tool calls, results and token counts; untrusted text stays
text, and a document too big is cut where it says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replayhub.gateway import tape
from replayhub.ingest.importer import read_chunks
from replayhub.ingest.lines import split_lines
from replayhub.ingest.transcripts import atif, atif_export, claude_code
from replayhub.ingest.transcripts.conversation import conversation
from replayhub.ingest.transcripts.shapes import RecordDraft
from replayhub.ingest.transcripts.turns import (
    ASSISTANT,
    REASONING,
    SYSTEM,
    TOOL,
    USER,
    Call,
    Turn,
)
from tests.conftest import ROOT

TRANSCRIPTS = ROOT / "tests" / "fixtures" / "transcripts"
SESSION = TRANSCRIPTS / "claude-code" / "5f0c9a1e-0000-4000-8000-000000000001.jsonl"
ATIF_V17 = TRANSCRIPTS / "atif" / "v1.7-branch.json"
SCRIPT = "<script>window.__pwned=1</script>"
LIMIT = 1 << 22


def read_file(path: Path, parse, **options: Any) -> dict[str, Any]:
    with path.open("rb") as stream:
        lines = split_lines(read_chunks(stream), max_line_bytes=1 << 20)
        [draft] = [
            d
            for d in parse(lines, name=path.name, **options)
            if isinstance(d, RecordDraft)
        ]
    return draft.record


def read_back(document: dict[str, Any]) -> dict[str, Any]:
    """The exported document as bytes, through the reader a user's import
    takes: the record it makes."""
    data = atif_export.encode(document)
    lines = split_lines([data], max_line_bytes=len(data) + 1)
    [draft] = list(atif.parse(lines, limit=len(data) + 1))
    assert isinstance(draft, RecordDraft), draft
    return draft.record


def exported(record: dict[str, Any], **bounds: Any) -> dict[str, Any]:
    steps, source = atif_export.run_steps(record)
    name, version = atif_export.agent_of(record)
    origin = atif_export.Origin(
        run_id=7,
        project="shop",
        external_id=str(record["external_id"]),
        source=source,
        agent_name=name,
        agent_version=version,
        model=str(record.get("model") or ""),
    )
    totals = atif_export.run_totals(record.get("usage"), with_money=True)
    return atif_export.document(steps, origin, totals, **({"limit": LIMIT} | bounds))


def plain(turns: list[Turn]) -> list[tuple]:
    return [
        (t.role, t.text, [(c.id, c.name, c.input, c.result) for c in t.calls])
        for t in turns
    ]


# --- an imported session ------------------------------------------------------


def test_an_imported_claude_code_session_reads_back_with_its_calls_and_usage():
    record = read_file(SESSION, claude_code.parse)
    before = conversation(record["transcript"])

    document = exported(record)
    again = read_back(document)
    after = atif.turns(again["transcript"])

    assert document["schema_version"] == "ATIF-v1.7"
    assert document["agent"] == {
        "name": "claude",
        "version": "1.0.17",
        "model_name": "claude-sonnet-4-20250514",
    }
    assert document["extra"]["replayhub"]["run"] == 7
    assert "run 7" in document["notes"]
    # The person's request, the answers, the call with its result: the same.
    spoken = [t for t in before if t.role in (USER, ASSISTANT, REASONING, TOOL)]
    assert plain([t for t in after if t.role != SYSTEM]) == plain(spoken)
    [call] = [c for t in after for c in t.calls]
    assert (call.id, call.name) == ("toolu_1", "Read")
    assert json.loads(call.input) == {"file_path": "/home/dev/shop/cart.py"}
    assert call.result and call.result.startswith("def total(lines):")
    # The compaction and the summaries are system steps, their text kept.
    marks = [t for t in after if t.role == SYSTEM]
    assert [t.text for t in marks] == [
        t.text or t.note for t in before if t.role not in [t.role for t in spoken]
    ]
    assert "context compacted (auto, 150,000 tokens before)" in [t.text for t in marks]
    # The prompt, the model, the answer and the tokens an import would take.
    assert again["prompt"] == record["prompt"] == "Fix the rounding in cart totals"
    assert again["model"] == record["model"]
    assert again["output"] == record["output"]
    assert again["usage"]["input_tokens"] == record["usage"]["input_tokens"] == 300
    assert again["usage"]["output_tokens"] == record["usage"]["output_tokens"] == 50
    assert document["final_metrics"]["extra"] == {
        "cache_read_input_tokens": 1500,
        "cache_creation_input_tokens": 10,
    }


def test_an_imported_atif_trajectory_goes_out_as_it_came_in():
    record = read_file(ATIF_V17, atif.parse, limit=1 << 20)

    again = read_back(exported(record))

    assert plain(atif.turns(again["transcript"])) == plain(
        atif.turns(record["transcript"])
    )
    assert again["external_id"] == record["external_id"]
    for key in ("input_tokens", "output_tokens", "cost_usd"):
        assert again["usage"][key] == pytest.approx(record["usage"][key])
    assert again["transcript"]["document"]["agent"]["name"] == "claude-code"


def test_cost_is_left_out_of_the_totals_when_the_viewer_may_not_see_money():
    usage = {"input_tokens": 5, "output_tokens": 2, "cost_usd": 0.5}

    assert atif_export.run_totals(usage, with_money=False).cost_usd is None
    assert atif_export.run_totals(usage, with_money=True).cost_usd == 0.5


# --- a replay's tape ----------------------------------------------------------


def anthropic_tape() -> list[dict[str, Any]]:
    first = [{"role": "user", "content": f"fix the cart {SCRIPT}"}]
    call = {"type": "tool_use", "id": "toolu_9", "name": "bash"}
    call["input"] = {"cmd": "pytest"}
    result = {"type": "tool_result", "tool_use_id": "toolu_9", "content": "1 failed"}
    second = [
        *first,
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result]},
    ]
    answers = [
        [
            {"type": "thinking", "thinking": "tests first"},
            {"type": "text", "text": "Running the tests."},
            call,
        ],
        [{"type": "text", "text": "Fixed: rounding per line."}],
    ]
    return [
        entry(
            "anthropic",
            "/v1/messages",
            {"system": "be careful", "messages": messages},
            {"content": content},
            usage,
        )
        for messages, content, usage in zip(
            [first, second], answers, [(120, 30), (160, 12)], strict=True
        )
    ]


def openai_tape() -> list[dict[str, Any]]:
    first = [
        {"role": "system", "content": "be careful"},
        {"role": "user", "content": f"fix the cart {SCRIPT}"},
    ]
    call = {"id": "call_9", "type": "function"}
    call["function"] = {"name": "bash", "arguments": '{"cmd": "pytest"}'}
    asked = {"role": "assistant", "content": "Running the tests.", "tool_calls": [call]}
    second = [
        *first,
        asked,
        {"role": "tool", "tool_call_id": "call_9", "content": "1 failed"},
    ]
    answers = [asked, {"role": "assistant", "content": "Fixed: rounding per line."}]
    return [
        entry(
            "openai",
            "/v1/chat/completions",
            {"messages": messages},
            {"choices": [{"message": message}]},
            usage,
        )
        for messages, message, usage in zip(
            [first, second], answers, [(120, 30), (160, 12)], strict=True
        )
    ]


def entry(kind: str, path: str, request: dict, response: dict, usage: tuple) -> dict:
    return {
        "provider_kind": kind,
        "method": "POST",
        "path": path,
        "request": {"model": "m-1", **request},
        "status": 200,
        "stream": False,
        "response": response,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
        "model": "m-1",
    }


def replay_document(exchanges: list[tape.Exchange], **bounds: Any) -> dict[str, Any]:
    origin = atif_export.Origin(
        run_id=3, project="shop", external_id="s-1", source="its tape", replay_id=9
    )
    return atif_export.document(
        atif_export.steps_from_exchanges(exchanges),
        origin,
        atif_export.tape_totals(exchanges, None),
        **({"limit": LIMIT} | bounds),
    )


@pytest.mark.parametrize("recorded", [anthropic_tape, openai_tape])
def test_a_tape_reads_back_as_its_conversation_with_each_calls_usage(recorded):
    exchanges = tape.from_record_tape(recorded())

    document = replay_document(exchanges)
    again = read_back(document)
    turns = atif.turns(again["transcript"])

    assert [(t.role, t.text) for t in turns if t.role != REASONING] == [
        (SYSTEM, "be careful"),
        (USER, f"fix the cart {SCRIPT}"),
        (ASSISTANT, "Running the tests."),
        (ASSISTANT, "Fixed: rounding per line."),
    ]
    [call] = [c for t in turns for c in t.calls]
    assert call.id in ("toolu_9", "call_9") and call.name == "bash"
    assert json.loads(call.input) == {"cmd": "pytest"}
    assert call.result == "1 failed"
    agents = [s for s in document["steps"] if s["source"] == "agent"]
    assert [s["metrics"] for s in agents] == [
        {"prompt_tokens": 120, "completion_tokens": 30},
        {"prompt_tokens": 160, "completion_tokens": 12},
    ]
    assert again["usage"] == {"input_tokens": 280, "output_tokens": 42, "turns": 2}
    assert again["model"] == "m-1"
    assert again["external_id"] == "s-1-replay-9"
    where = document["extra"]["replayhub"]
    assert (where["run"], where["replay"]) == (3, 9)
    assert document["notes"].startswith("Exported by ReplayHub from replay 9 of run 3")


def test_the_thinking_an_answer_shows_goes_with_its_step():
    document = replay_document(tape.from_record_tape(anthropic_tape()))
    [first, _] = [s for s in document["steps"] if s["source"] == "agent"]
    assert first["reasoning_content"] == "tests first"


def test_a_mixed_tape_of_anthropic_and_openai_calls_keeps_every_call():
    exchanges = tape.from_record_tape(anthropic_tape()[:1] + openai_tape()[1:])

    again = read_back(replay_document(exchanges))

    assert again["usage"]["turns"] == 2
    texts = [t.text for t in atif.turns(again["transcript"]) if t.role == ASSISTANT]
    assert texts == ["Running the tests.", "Fixed: rounding per line."]


# --- untrusted and unbounded --------------------------------------------------


def test_untrusted_text_stays_text_and_a_huge_output_is_cut_where_it_says():
    huge = "x" * 50_000 + "\x00" + SCRIPT
    turns = [
        Turn(USER, f"go {SCRIPT}\x00"),
        Turn(ASSISTANT, "ok"),
    ]
    turns[1].calls = [Call(name=SCRIPT, input=json.dumps({"cmd": SCRIPT}), result=huge)]
    origin = atif_export.Origin(run_id=1, project="p", external_id="e", source="t")
    document = atif_export.document(
        atif_export.steps_from_turns(turns),
        origin,
        atif_export.FinalMetrics(),
        limit=LIMIT,
        text_chars=1000,
    )
    data = atif_export.encode(document)
    again = read_back(document)
    [user, agent] = atif.turns(again["transcript"])

    assert user.text == f"go {SCRIPT}\x00"
    assert b"\\u0000" in data and b"\x00" not in data
    [call] = agent.calls
    assert call.name == SCRIPT and json.loads(call.input) == {"cmd": SCRIPT}
    assert call.result is not None and len(call.result) < 1100
    assert call.result.startswith("x" * 1000)
    assert call.result.endswith("[cut by ReplayHub: 50,034 characters in all]")
    assert document["steps"][1]["extra"]["cut"] == ["observation"]
    assert "1 text longer than 1,000 characters" in document["notes"]


def test_a_document_past_its_limit_stops_its_steps_and_says_so():
    turns = []
    for n in range(200):
        turns += [Turn(USER, f"ask {n} " + "y" * 900), Turn(ASSISTANT, f"answer {n}")]
    origin = atif_export.Origin(run_id=1, project="p", external_id="e", source="t")
    totals = atif_export.FinalMetrics(prompt_tokens=4000, completion_tokens=900)
    limit = 64 * 1024

    document = atif_export.document(
        atif_export.steps_from_turns(turns), origin, totals, limit=limit
    )
    again = read_back(document)

    assert len(atif_export.encode(document)) <= limit
    kept = document["extra"]["replayhub"]["steps_kept"]
    assert 10 < kept < 400 == document["final_metrics"]["total_steps"]
    assert [s["step_id"] for s in document["steps"]] == list(range(1, kept + 1))
    assert f"the steps stop after {kept} of 400" in document["notes"]
    # The totals are the whole run's, cut or not.
    assert again["usage"]["input_tokens"] == 4000


def test_a_record_with_neither_transcript_nor_tape_has_nothing_to_export():
    assert atif_export.run_steps({"external_id": "x", "prompt": "p"}) == ([], "")
    assert atif_export.run_steps({"transcript": {"format": "nope"}, "tape": []}) == (
        [],
        "",
    )


def test_a_recorded_run_without_usage_totals_reads_back_its_calls_sums():
    record = {"external_id": "rec-1", "tape": anthropic_tape()}

    document = exported(record)
    again = read_back(document)

    assert "total_prompt_tokens" not in document["final_metrics"]
    assert document["extra"]["replayhub"]["source"] == "its recorded tape"
    assert again["usage"] == {"input_tokens": 280, "output_tokens": 42, "turns": 2}
