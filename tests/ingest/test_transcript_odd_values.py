"""A transcript's types, ids and roles are whatever JSON its file holds: a
list or an object where a string belongs is a line of a type the reader does
not know, or no id, never an exception that ends the import (each case below
raised ``TypeError: unhashable type`` before)."""

from __future__ import annotations

import json

import pytest

from replayhub.ingest.lines import split_lines
from replayhub.ingest.services import PreflightMode, transcripts_import
from replayhub.ingest.transcripts import claude_code, codex
from replayhub.ingest.transcripts.conversation import conversation
from replayhub.ingest.transcripts.detect import detect
from replayhub.ingest.transcripts.shapes import LineError, RecordDraft
from replayhub.models import Run
from tests.conftest import ROOT
from tests.factories import make_git_project
from tests.gitrepos import make_repo

CLAUDE = ROOT / "tests/fixtures/transcripts/claude-code/sess-d.jsonl"
CODEX = next((ROOT / "tests/fixtures/agents/codex-0.171").glob("rollout-*.jsonl"))


def parsed(reader, lines: list[str], name: str) -> list[RecordDraft | LineError]:
    data = ("\n".join(lines) + "\n").encode()
    return list(reader(split_lines([data], max_line_bytes=1 << 20), name=name))


def drafts(found: list[RecordDraft | LineError]) -> list[RecordDraft]:
    return [p for p in found if isinstance(p, RecordDraft)]


def test_claude_code_lines_with_a_list_for_a_type_or_an_id_are_read_around():
    lines = CLAUDE.read_text().splitlines()
    first = json.loads(lines[0])
    odd = [
        # A type that is a list, on a line of no session: counted, not read.
        json.dumps({"type": ["user"], "uuid": "x1"}),
        # A message whose uuid is an object: kept, with no uuid to link by.
        json.dumps({**first, "uuid": {"id": "b1"}}),
        # A summary whose leaf is a list: no message it could follow.
        json.dumps({"type": "summary", "summary": "Odd", "leafUuid": ["b2"]}),
    ]
    plain = drafts(parsed(claude_code.parse, lines, CLAUDE.name))
    found = parsed(claude_code.parse, lines + odd, CLAUDE.name)
    assert [d.record["external_id"] for d in drafts(found)] == [
        d.record["external_id"] for d in plain
    ]
    assert sum(d.unread.get('["user"]', 0) for d in drafts(found)) == 1
    assert drafts(found)[0].record["prompt"] == plain[0].record["prompt"]


def test_codex_lines_with_a_list_or_an_object_for_a_type_are_refused_or_counted():
    lines = CODEX.read_text().splitlines()
    stamp = "2026-12-02T22:19:31.700Z"
    odd = [
        json.dumps({"timestamp": stamp, "type": ["event_msg"], "payload": {}}),
        json.dumps(
            {"timestamp": stamp, "type": "response_item", "payload": {"type": {}}}
        ),
    ]
    [plain] = drafts(parsed(codex.parse, lines, CODEX.name))
    found = parsed(codex.parse, lines + odd, CODEX.name)
    # A line whose type is no name is no rollout line: that line is refused.
    assert [p for p in found if isinstance(p, LineError)] == [
        LineError(len(lines) + 1, "not a rollout line (no type and payload)")
    ]
    [draft] = drafts(found)
    assert draft.record["prompt"] == plain.record["prompt"]
    # An item whose type is an object is an item of a type not read.
    assert sum(draft.unread.values()) == sum(plain.unread.values()) + 1


def test_a_file_whose_first_line_has_a_list_for_a_type_is_told_by_its_other_keys():
    head = json.dumps({"type": [1], "payload": {}, "sessionId": "s"}).encode()
    assert detect("odd.jsonl", head + b"\n") == "claude-code"
    assert detect("odd.jsonl", json.dumps({"type": {}}).encode()) is None


def test_a_stored_transcript_with_a_list_for_a_role_or_source_shows_the_rest():
    mini = {
        "format": "mini-swe-agent",
        "document": {
            "messages": [
                {"role": ["system"], "content": "hidden"},
                {"role": "user", "content": "Fix the parser"},
            ]
        },
    }
    assert [t.text for t in conversation(mini)] == ["Fix the parser"]
    steps = [
        {"step_id": 1, "source": ["user"], "message": "odd"},
        {"step_id": 2, "source": "user", "message": "Add a test"},
    ]
    atif = {"format": "atif", "document": {"steps": steps}}
    assert [t.text for t in conversation(atif)] == ["Add a test"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("value", "why"),
    [(10**30, "Integer exceeds 64-bit range"), ("\ud800", "surrogates not allowed")],
)
def test_a_session_holding_a_value_no_run_can_store_is_refused_in_one_line(
    tmp_path, value, why
):
    repo = make_repo(tmp_path / "repo", {"README.md": "# w\n"})
    project = make_git_project(repo)
    lines = CLAUDE.read_text().splitlines()
    odd = json.loads(lines[1])
    odd["message"]["usage"]["output_tokens"] = value
    session = tmp_path / CLAUDE.name
    session.write_text("\n".join([lines[0], json.dumps(odd), *lines[2:]]) + "\n")
    summary = transcripts_import(
        project=project,
        paths=[session],
        format="claude-code",
        preflight=PreflightMode.SKIP,
    )
    [problem] = summary.invalid
    assert problem["error"].startswith("the session holds a value no run can store")
    assert why in problem["error"]
    assert "\n" not in problem["error"]
    # The file is one resumed session: nothing is stored, nothing raised.
    assert summary.imported == Run.objects.count() == 0
