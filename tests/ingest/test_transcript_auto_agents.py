"""``--format auto`` over a folder of the files the agents themselves wrote:
a Gemini CLI session, a Claude Code session and an OpenCode export (each
written by the real CLI), an ATIF trajectory and a mini-swe-agent trajectory,
each recognised, imported as one run and readable as a conversation on the run
page."""

from __future__ import annotations

import shutil

import pytest

from replayhub.ingest.services import PreflightMode, transcripts_import
from replayhub.ingest.transcripts.conversation import conversation
from replayhub.ingest.transcripts.loader import AUTO
from replayhub.models import Run
from tests.conftest import ROOT
from tests.factories import make_git_project
from tests.gitrepos import make_repo

pytestmark = pytest.mark.django_db

AGENTS = ROOT / "tests" / "fixtures" / "agents"
FILES = {
    "gemini-cli": next((AGENTS / "gemini-cli-session").glob("*.jsonl")),
    "claude-code": AGENTS / "claude-code" / "session-2.1.197.jsonl",
    "atif": ROOT / "tests" / "fixtures" / "transcripts" / "atif" / "v1.7-branch.json",
    "mini-swe-agent": AGENTS / "mini-swe-agent" / "last_mini_run.traj.json",
    "opencode": AGENTS / "opencode-session" / "ses_dbd70c09affeD14Dc6PCY7seK8.json",
}


def test_auto_tells_every_agents_own_file_apart(tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    for path in FILES.values():
        shutil.copy(path, folder / path.name)
    project = make_git_project(make_repo(tmp_path))

    summary = transcripts_import(
        project=project,
        paths=sorted(folder.iterdir()),
        format=AUTO,
        preflight=PreflightMode.SKIP,
    )

    assert (summary.imported, summary.invalid) == (len(FILES), []), summary.invalid
    by_format = {run.record["transcript"]["format"]: run for run in Run.objects.all()}
    assert set(by_format) == set(FILES)
    for name, run in by_format.items():
        assert run.prompt.strip(), name
        turns = conversation(run.record["transcript"])
        assert any(turn.role == "user" for turn in turns), name
        assert any(turn.role == "assistant" for turn in turns), name
