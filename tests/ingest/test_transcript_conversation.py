"""Every transcript format read back as the same plain conversation: turns,
tool calls with the result each got, compactions and summaries marked. Built
from the hand-written fixtures, without a database."""

from __future__ import annotations

import json

from replayhub.ingest.transcripts import aider, claude_code, codex
from replayhub.ingest.transcripts.conversation import conversation
from tests.ingest.test_transcript_parsers import FIXTURES, drafts, lines_of


def roles(turns) -> list[str]:
    return [turn.role for turn in turns]


def test_a_claude_code_session_folds_each_result_into_its_call():
    path = FIXTURES / "claude-code" / "5f0c9a1e-0000-4000-8000-000000000001.jsonl"
    [draft] = drafts(claude_code.parse(lines_of(path), name=path.name))

    turns = conversation(draft.record["transcript"])

    assert roles(turns) == [
        "user",
        "assistant",
        "compaction",
        "summary",
        "assistant",
        "summary",
    ]
    # msg_01's two lines are one turn: its text and its call.
    answer = turns[1]
    assert answer.text == "Let me look at the cart."
    [call] = answer.calls
    assert (call.name, call.id) == ("Read", "toolu_1")
    assert json.loads(call.input) == {"file_path": "/home/dev/shop/cart.py"}
    assert call.result is not None and call.result.startswith("def total(lines)")
    assert turns[2].note == "context compacted (auto, 150,000 tokens before)"
    assert turns[3].note == "compaction summary"
    assert turns[-1].text == "Cart rounding fix"


def test_a_codex_rollout_pairs_calls_and_outputs_by_call_id():
    path = FIXTURES / "mixed" / "rollout-2025-06-04T10-00-00-c0de.jsonl"
    [draft] = drafts(codex.parse(lines_of(path), name=path.name))

    turns = conversation(draft.record["transcript"])

    assert roles(turns) == [
        "user",
        "user",
        "reasoning",
        "assistant",
        "compaction",
        "assistant",
    ]
    [call] = turns[3].calls
    assert call.name == "shell"
    assert json.loads(call.input) == {"command": ["rg", "TAX"]}
    # The output's JSON wrapper is taken off: the shell's text is shown.
    assert call.result == "tax.py:1:TAX = 0.2\n"
    assert turns[4].text == "Summary: TAX lives in tax.py."


def test_an_aider_history_splits_requests_answers_and_aiders_notes():
    path = FIXTURES / "mixed" / ".aider.chat.history.md"
    [draft] = drafts(aider.parse(lines_of(path), name=path.name))

    turns = conversation(draft.record["transcript"])

    users = [t.text for t in turns if t.role == "user"]
    assert users == [
        "Add a discount field to the cart\nand show it on the receipt",
        "now test it",
    ]
    assert any(t.role == "assistant" and "<<<<<<< SEARCH" in t.text for t in turns)
    assert any(t.role == "system" and "Applied edit" in t.text for t in turns)


def test_a_result_without_its_call_is_a_turn_of_its_own():
    transcript = {
        "format": "claude-code",
        "lines": [
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "gone", "content": "x"}
                    ],
                },
            }
        ],
    }
    [turn] = conversation(transcript)
    assert (turn.role, turn.text, turn.note) == ("tool", "x", "result of gone")


def test_a_call_never_answered_keeps_no_result():
    transcript = {
        "format": "openhands",
        "events": [
            {"id": 1, "source": "agent", "action": "run", "args": {"command": "ls"}},
        ],
    }
    [turn] = conversation(transcript)
    [call] = turn.calls
    assert (call.name, call.result) == ("run", None)


def test_an_unknown_shape_reads_as_no_conversation():
    assert conversation(None) == []
    assert conversation({"format": "something-else", "lines": []}) == []
    assert conversation({"format": "codex", "lines": "not a list"}) == []


def test_a_real_mini_swe_agent_trajectory_reads_as_a_conversation():
    path = FIXTURES.parent / "agents" / "mini-swe-agent" / "last_mini_run.traj.json"
    document = json.loads(path.read_text())

    turns = conversation({"format": "mini-swe-agent", "document": document})

    assert [t.role for t in turns] == [
        "system",
        "user",
        "assistant",
        "assistant",
        "summary",
    ]
    assert turns[1].text.startswith("Please solve this issue: Cart.total()")
    edit = turns[2].calls[0]
    assert edit.name == "bash" and "sed -i" in edit.input
    assert edit.result is not None and '"returncode": 0' in edit.result
    assert turns[4].text.startswith("diff --git a/cart.py")
