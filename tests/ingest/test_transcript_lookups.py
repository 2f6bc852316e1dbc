"""An import asks the repository once per branch, not once per session: the
branch list and each branch's first-parent history are read once and give
the same answers as asking git for each session."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from replayhub.git.scratch import git
from replayhub.ingest.services import transcripts_import
from replayhub.ingest.transcripts import repository
from replayhub.ingest.transcripts.repository import (
    Lookups,
    branch_ref,
    last_before,
    made_after,
)
from replayhub.models import ImportFormat, Run
from tests.factories import make_git_project
from tests.gitrepos import make_repo
from tests.ingest.test_transcript_import import dated_commit

MOMENTS = [
    datetime(2025, 6, 1, 8, 0, tzinfo=UTC),  # before every commit
    datetime(2025, 6, 1, 10, 0, tzinfo=UTC),  # exactly a commit's time
    datetime(2025, 6, 1, 10, 30, tzinfo=UTC),
    datetime(2025, 6, 1, 12, 0, tzinfo=UTC),  # after every commit
]


@pytest.fixture
def branches(tmp_path):
    """``main`` and ``feature/a`` (with a merge of main on its first-parent
    line), commits at 09:00, 10:00, 11:00, 11:15 (the merge) and 11:30, on a
    first commit made today."""
    repo = make_repo(tmp_path, {"a.py": "0\n"})
    dated_commit(repo, {"a.py": "1\n"}, "one", "2025-06-01T09:00:00Z")
    repo.checkout("feature/a", create=True)
    dated_commit(repo, {"b.py": "1\n"}, "two", "2025-06-01T10:00:00Z")
    repo.checkout("main")
    dated_commit(repo, {"a.py": "2\n"}, "three", "2025-06-01T11:00:00Z")
    repo.checkout("feature/a")
    when = "2025-06-01T11:15:00Z"
    git(
        "merge", "--quiet", "--no-edit", "main",
        git_dir=repo.git_dir, work_tree=repo.path,
        env={"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when},
    )  # fmt: skip
    dated_commit(repo, {"b.py": "2\n"}, "four", "2025-06-01T11:30:00Z")
    repo.checkout("main")
    return repo


def test_the_held_branches_answer_as_git_does_for_each_session(branches):
    lookups = Lookups(branches.git_dir)
    for name in ["main", "feature/a", "absent", "feature", "-x", "a..b", "HEAD@{1}"]:
        assert branch_ref(branches.git_dir, name, lookups) == branch_ref(
            branches.git_dir, name
        ), name
    for ref in ["refs/heads/main", "refs/heads/feature/a"]:
        for moment in MOMENTS:
            assert last_before(branches.git_dir, ref, moment, lookups) == last_before(
                branches.git_dir, ref, moment
            ), (ref, moment)
    assert last_before(branches.git_dir, "refs/heads/main", MOMENTS[-1], lookups)
    # Bases among the dated commits: under the first one, made today, git's
    # --since stops its walk early where the dates go backwards.
    dated = ["main~1", "main", "feature/a~2", "feature/a~1"]
    for base in [branches.rev(name) for name in dated]:
        for start in MOMENTS:
            for end in MOMENTS:
                held = made_after(
                    branches.git_dir, base, start=start, end=end, lookups=lookups
                )
                assert held == made_after(
                    branches.git_dir, base, start=start, end=end
                ), (base, start, end)
    everything = made_after(
        branches.git_dir, branches.rev("main~1"), start=MOMENTS[0], end=MOMENTS[-1]
    )
    # two, three, the merge and four.
    assert len(everything) == 4


def sessions(count: int, branch: str) -> str:
    lines = []
    for number in range(count):
        session = f"{number:08x}-0000-4000-8000-000000000000"
        head = {"sessionId": session, "cwd": "/w/shop", "gitBranch": branch}
        lines.append(
            {
                **head,
                "type": "user",
                "uuid": f"{session}-u",
                "timestamp": f"2025-06-01T10:{number:02d}:30Z",
                "message": {"role": "user", "content": f"Fix issue {number}"},
            }
        )
    return "".join(json.dumps(line) + "\n" for line in lines)


@pytest.mark.django_db(transaction=True)
def test_sessions_on_one_branch_read_its_history_once(branches, tmp_path, monkeypatch):
    asked: list[str] = []
    real = repository.git

    def counted(*args, **kwargs):
        asked.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(repository, "git", counted)
    path = tmp_path / "sessions.jsonl"
    path.write_text(sessions(12, "feature/a"))
    project = make_git_project(branches)

    summary = transcripts_import(
        project=project, paths=[path], format=ImportFormat.CLAUDE_CODE
    )

    assert summary.imported == 12
    bases = set(Run.objects.values_list("base_sha", flat=True))
    # Every session started after 10:00 and before 11:00: feature/a's commit
    # of 10:00 is each one's base.
    assert bases == {branches.rev("feature/a~2")}
    # The branch's history once, the base's descendants once.
    assert asked.count("rev-list") == 2
    assert asked.count("for-each-ref") == 1
    assert "check-ref-format" not in asked
