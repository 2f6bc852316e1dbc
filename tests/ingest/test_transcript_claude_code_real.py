"""A session file the real Claude Code CLI (2.1.197) wrote, imported as it is.

The file (``tests/fixtures/agents/claude-code/session-2.1.197.jsonl``) is what
``claude -p`` left under ``~/.claude/projects/`` after it read
``test_calc.py`` and wrote ``calc.py`` against a scripted model, on
``master``: queue operations, attachments and a ``last-prompt`` line beside
the conversation. As people work, the change was then committed on a branch
of its own a few minutes later, with no word of Claude in it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from replayhub.ingest.services import transcripts_import
from replayhub.models import ImportFormat, Preflight, Run
from tests.factories import make_git_project
from tests.gitrepos import Repo
from tests.ingest.test_transcript_import import dated_commit

pytestmark = pytest.mark.django_db(transaction=True)

FILE = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "agents"
    / "claude-code"
    / "session-2.1.197.jsonl"
)
PROMPT = "Create calc.py with a function add(a, b) that returns a + b. Then stop."
TESTS = "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def session_id() -> str:
    return json.loads(FILE.read_text().splitlines()[0])["sessionId"]


@pytest.fixture
def calc(tmp_path):
    """``master`` as it was before the session, and the change committed on
    ``fix-calc`` ten minutes after it."""
    path = tmp_path / "calc"
    subprocess.run(["git", "init", "-q", "-b", "master", str(path)], check=True)
    repo = Repo(path)
    base = dated_commit(repo, {"test_calc.py": TESTS}, "tests", "2026-12-02T22:00:00Z")
    repo.checkout("fix-calc", create=True)
    good = "def add(a, b):\n    return a + b\n"
    original = dated_commit(
        repo, {"calc.py": good}, "Add calc.add", "2026-12-02T22:28:00Z"
    )
    repo.checkout("master")
    return repo, base, original


def test_a_real_claude_code_session_imports_ready_with_its_calls(tmp_path, calc):
    repo, base, original = calc
    project = make_git_project(repo)
    copy = tmp_path / "sessions" / FILE.name
    copy.parent.mkdir()
    shutil.copy(FILE, copy)

    summary = transcripts_import(
        project=project, paths=[copy], format=ImportFormat.CLAUDE_CODE
    )

    assert (summary.imported, summary.invalid) == (1, []), summary.invalid
    run = Run.objects.get(external_id=session_id())
    assert run.prompt == PROMPT
    assert run.model == "claude-sonnet-4-5"
    assert (run.base_sha, run.original_commit) == (base, original)
    assert run.record["original_branch"] == "fix-calc"
    assert run.preflight == Preflight.READY
    # Three model calls, each 10 tokens in and out (the scripted model's).
    tape = run.record["tape"]
    assert len(tape) == 3
    assert run.record["usage"]["turns"] == 3
    assert run.record["usage"]["input_tokens"] == 30
    assert run.record["usage"]["output_tokens"] == 30
