"""Transcripts give the surroundings they hold: Claude Code's working
directory, branch and version, Codex's working directory, branch and CLI
version, as the record's ``surroundings`` a replay places the agent in."""

from __future__ import annotations

import json

from replayhub.ingest.lines import split_lines
from replayhub.ingest.transcripts import claude_code, codex
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "transcripts"
CLAUDE = FIXTURES / "claude-code" / "5f0c9a1e-0000-4000-8000-000000000001.jsonl"


def parsed(module, text: str, name: str) -> dict:
    lines = split_lines([text.encode()], max_line_bytes=1 << 20)
    [draft] = list(module.parse(lines, name=name))
    return draft.record


def test_a_claude_code_session_gives_its_cwd_branch_and_version():
    record = parsed(claude_code, CLAUDE.read_text(), CLAUDE.name)
    assert record["surroundings"] == {
        "cwd": "/home/dev/shop",
        "branch": "feature/rounding",
        "agent": {"name": "claude", "version": "1.0.17"},
    }


def test_a_claude_code_session_on_a_detached_head_says_so():
    lines = []
    for line in CLAUDE.read_text().splitlines():
        value = json.loads(line)
        if "gitBranch" in value:
            value["gitBranch"] = "HEAD"
        value.pop("version", None)
        lines.append(json.dumps(value))
    record = parsed(claude_code, "\n".join(lines) + "\n", CLAUDE.name)
    assert record["surroundings"] == {
        "cwd": "/home/dev/shop",
        "branch": None,
        "agent": {"name": "claude"},
    }


def test_a_codex_rollout_gives_its_cwd_branch_and_cli_version():
    path = FIXTURES / "mixed" / "rollout-2025-06-04T10-00-00-c0de.jsonl"
    text = path.read_text().replace("BASE_SHA_PLACEHOLDER", "a" * 40)
    record = parsed(codex, text, path.name)
    assert record["surroundings"] == {
        "cwd": "/home/dev/shop",
        "branch": "main",
        "agent": {"name": "codex", "version": "0.36.0"},
    }
