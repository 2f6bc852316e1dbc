"""A rollout file written by the real Codex CLI 0.171.0 (tests/fixtures/agents/
codex-0.171/, see its README): the line types that version adds are counted
apart, never reported as invalid, and each model call keeps its own usage."""

from __future__ import annotations

import json

import pytest

from replayhub.git.scratch import git
from replayhub.ingest.lines import split_lines
from replayhub.ingest.services import transcripts_import
from replayhub.ingest.transcripts import codex
from replayhub.ingest.transcripts.loader import AUTO
from replayhub.ingest.transcripts.shapes import LineError, RecordDraft
from replayhub.models import Run
from tests.conftest import ROOT
from tests.factories import make_git_project
from tests.gitrepos import Repo

FOLDER = ROOT / "tests" / "fixtures" / "agents" / "codex-0.171"
[ROLLOUT] = FOLDER.glob("rollout-*.jsonl")
SESSION = "01a238d7-6a95-71d3-ab3f-c53930fd1f2f"
PROMPT = "Create calc.py with a function add(a, b) that returns a + b. Then stop.\n"
# The commit the CLI ran on, remade from its tree, author and date.
BASE = "4b1f94cf7a719a3aa2ade0a89f5e7a08e19faf4c"
NOTE = (
    "4 lines of types this version does not read "
    "(token_usage_record: 3, world_state: 1)"
)


def parse_lines(lines: list[str]) -> list[RecordDraft | LineError]:
    data = ("\n".join(lines) + "\n").encode()
    return list(
        codex.parse(split_lines([data], max_line_bytes=1 << 20), name=ROLLOUT.name)
    )


def rollout_lines() -> list[str]:
    return ROLLOUT.read_text().splitlines()


def line(kind: str, payload: object) -> str:
    return json.dumps(
        {"timestamp": "2026-12-02T22:19:31.700Z", "type": kind, "payload": payload}
    )


def the_draft(parsed: list[RecordDraft | LineError]) -> RecordDraft:
    assert [p for p in parsed if isinstance(p, LineError)] == []
    [draft] = parsed
    assert isinstance(draft, RecordDraft)
    return draft


def test_a_codex_0_171_rollout_reads_with_no_invalid_line():
    draft = the_draft(parse_lines(rollout_lines()))
    record = draft.record

    assert record["external_id"] == SESSION
    # 0.171 writes no user_message event: the prompt is the user's message,
    # not the environment context or the developer's skills list.
    assert record["prompt"] == PROMPT
    assert record["model"] == "gpt-5.5"
    assert "effort" not in record  # the run set none
    assert record["base_sha"] == BASE
    assert record["original_branch"] == "main"
    assert record["started_at"] == "2026-12-02T22:19:31.364000Z"
    assert record["surroundings"]["agent"] == {"name": "codex", "version": "0.171.0"}
    assert record["output"] == "Created calc.py with add(a, b)."
    assert record["usage"] == {
        "input_tokens": 4050,
        "output_tokens": 112,
        "turns": 3,
        "cached_input_tokens": 2500,
        "reasoning_output_tokens": 8,
    }
    # Every line is kept, the ones not read too.
    assert len(record["transcript"]["lines"]) == len(rollout_lines())
    assert draft.unread == {"world_state": 1, "token_usage_record": 3}
    assert draft.notes == [NOTE]


def test_each_call_has_the_usage_of_the_token_count_that_follows_its_output():
    record = the_draft(parse_lines(rollout_lines())).record
    calls = record["tape"]

    # Call 1's tool output is written before its token_count event.
    assert [c["usage"] for c in calls] == [
        {"input_tokens": 1200, "output_tokens": 40},
        {"input_tokens": 1350, "output_tokens": 60},
        {"input_tokens": 1500, "output_tokens": 12},
    ]
    assert [[i["type"] for i in c["response"]["output"]] for c in calls] == [
        ["function_call"],
        ["custom_tool_call"],
        ["message"],
    ]
    first, second, third = (c["request"]["input"] for c in calls)
    assert [m["role"] for m in first] == ["developer", "user", "user"]
    assert first[-1]["content"][0]["text"] == PROMPT
    assert [i["type"] for i in second] == ["function_call_output"]
    assert [i["type"] for i in third] == ["custom_tool_call_output"]
    assert all(c["model"] == "gpt-5.5" and c["request_is_delta"] for c in calls)


def test_a_repeated_token_count_does_not_move_usage_to_another_call():
    lines = rollout_lines()
    repeat = next(i for i, text in enumerate(lines) if '"token_count"' in text)
    lines.insert(repeat + 1, lines[repeat])

    calls = the_draft(parse_lines(lines)).record["tape"]

    assert [c["usage"]["output_tokens"] for c in calls] == [40, 60, 12]


def test_lines_and_items_of_unknown_types_are_counted_apart_and_the_run_imports():
    lines = rollout_lines()
    lines[3:3] = [
        line("plan_snapshot", {"steps": []}),
        line("response_item", {"type": "hologram", "id": "h_1"}),
        line("plan_snapshot", {"steps": ["read"]}),
    ]

    draft = the_draft(parse_lines(lines))

    assert draft.unread == {
        "plan_snapshot": 2,
        "response_item hologram": 1,
        "token_usage_record": 3,
        "world_state": 1,
    }
    assert draft.notes == [
        "7 lines of types this version does not read (plan_snapshot: 2, "
        "response_item hologram: 1, token_usage_record: 3, world_state: 1)"
    ]
    # The unknown item is not sent to the model in the tape.
    first = draft.record["tape"][0]["request"]["input"]
    assert "hologram" not in [i["type"] for i in first]
    assert draft.record["prompt"] == PROMPT


def test_a_known_line_type_that_cannot_be_read_is_still_an_invalid_line():
    lines = rollout_lines()
    lines.insert(5, line("turn_context", "gpt-5.5"))
    lines.insert(6, json.dumps({"timestamp": "2026-12-02T22:19:31.700Z"}))

    parsed = parse_lines(lines)

    errors = [p for p in parsed if isinstance(p, LineError)]
    assert [(e.line, e.error) for e in errors] == [
        (6, "not a rollout line (no type and payload)"),
        (7, "not a rollout line (no type and payload)"),
    ]
    assert isinstance(parsed[-1], RecordDraft)


def test_made_up_types_are_named_only_up_to_a_bound():
    lines = rollout_lines()
    lines[3:3] = [line(f"kind_{n:02}", {}) for n in range(30)]
    lines[3:3] = [line("x" * 500, {})]

    draft = the_draft(parse_lines(lines))

    assert len(draft.unread) == 11
    assert sum(draft.unread.values()) == 35
    assert draft.unread["other"] == 25
    assert all(len(name) <= 60 for name in draft.unread)


@pytest.mark.django_db(transaction=True)
def test_the_rollout_imports_on_the_commit_it_ran_on_with_its_note(tmp_path):
    repo = Repo(tmp_path / "calc")
    repo.path.mkdir()
    git("init", "--quiet", "--template=", "--initial-branch=main", str(repo.path))
    repo.write({"README.md": "# calc\nA tiny calculator.\n"})
    repo.git("add", "--all")
    who = {"NAME": "t", "EMAIL": "t@x", "DATE": "1796249970 +0000"}
    env = {
        f"GIT_{role}_{k}": v for role in ("AUTHOR", "COMMITTER") for k, v in who.items()
    }
    git(
        "commit", "--quiet", "-m", "init",
        git_dir=repo.git_dir, work_tree=repo.path, env=env,
    )  # fmt: skip
    assert repo.head() == BASE
    # What the run wrote, committed on the branch a few seconds into it.
    repo.write({"calc.py": "def add(a, b):\n    return a + b\n"})
    repo.git("add", "--all")
    env |= {
        "GIT_AUTHOR_DATE": "1796249975 +0000",
        "GIT_COMMITTER_DATE": "1796249975 +0000",
    }
    git(
        "commit", "--quiet", "-m", "Add calc.add",
        git_dir=repo.git_dir, work_tree=repo.path, env=env,
    )  # fmt: skip
    project = make_git_project(repo, slug="calc")

    summary = transcripts_import(project=project, paths=[ROLLOUT], format=AUTO)

    assert (summary.imported, summary.invalid, summary.invalid_total) == (1, [], 0)
    # The summary counts them too, apart from the invalid lines.
    unread = {"world_state": 1, "token_usage_record": 3}
    assert summary.to_dict()["unread_types"] == unread
    run = Run.objects.get()
    assert (run.external_id, run.model, run.base_sha) == (SESSION, "gpt-5.5", BASE)
    assert run.record["prompt"] == PROMPT
    assert run.original_commit == repo.head()
    assert run.record["import_notes"] == [NOTE]
    assert f"import: {NOTE}" in run.provenance["warnings"]
    assert [c["usage"]["input_tokens"] for c in run.record["tape"]] == [
        1200,
        1350,
        1500,
    ]
