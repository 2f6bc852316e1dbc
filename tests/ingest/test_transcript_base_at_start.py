"""A session that names no branch gets the base its checkout stood at when
it started: the Gemini CLI file the real CLI wrote
(tests/fixtures/agents/gemini-cli-session/, started 2026-12-02T22:48:53Z)
imported into real repositories whose branches moved around that time."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from replayhub.ingest.services import PreflightMode, transcripts_import
from replayhub.ingest.transcripts.base_at_start import find_base
from replayhub.ingest.transcripts.repository import Lookups
from replayhub.ingest.transcripts.shapes import RecordDraft, Search
from replayhub.models import ImportFormat, Run
from tests.conftest import ROOT
from tests.factories import make_git_project
from tests.gitrepos import Repo, make_repo
from tests.ingest.test_import_runs import import_runs
from tests.ingest.test_transcript_import import dated_commit

pytestmark = pytest.mark.django_db

SESSION = next(
    (ROOT / "tests" / "fixtures" / "agents" / "gemini-cli-session").glob("*.jsonl")
)
BEFORE = "2026-12-02T20:00:00Z"
JUST_BEFORE = "2026-12-02T22:40:00Z"
AFTER = "2026-12-03T09:00:00Z"
START = datetime(2026, 12, 2, 22, 48, 53, tzinfo=UTC)


def calc_repo(tmp_path: Path) -> tuple[Repo, str]:
    """main with a commit of the evening before the session on top of the
    first one (made now, after it); that evening's commit."""
    repo = make_repo(tmp_path, {"README.md": "# calc\n"})
    return repo, dated_commit(repo, {"test_calc.py": "x = 1\n"}, "tests", BEFORE)


def imported(tmp_path: Path, repo: Repo, **fields) -> Run:
    folder = tmp_path / "sessions"
    folder.mkdir()
    shutil.copy(SESSION, folder / SESSION.name)
    summary = transcripts_import(
        project=make_git_project(repo, **fields),
        paths=[folder / SESSION.name],
        format=ImportFormat.GEMINI_CLI,
        preflight=PreflightMode.SKIP,
    )
    assert (summary.imported, summary.invalid) == (1, []), summary.invalid
    notes = summary.to_dict()["notes"]
    assert notes == [
        {"file": str(folder / SESSION.name), "line": 1, "note": note}
        for note in Run.objects.get().record.get("import_notes", [])
        if note.startswith("no base commit")
    ]
    return Run.objects.get()


def test_the_default_branch_as_it_was_when_the_session_started(tmp_path):
    repo, evening = calc_repo(tmp_path)
    # main moved on the next morning; a branch of old work is older still.
    repo.checkout("old", create=True)
    repo.checkout("main")
    dated_commit(repo, {"calc.py": "later\n"}, "later", AFTER)

    run = imported(tmp_path, repo)

    assert run.base_sha == evening
    assert run.record["inferred"]["base_sha"] == (
        'the session names no branch: the last commit of the default branch "main" '
        "before it started (2026-12-02T22:48:53.091000Z); no other branch had a "
        "newer commit by then"
    )
    assert not [n for n in run.record["import_notes"] if "no base commit" in n]


def test_the_one_branch_worked_on_just_before_the_start(tmp_path):
    repo, _ = calc_repo(tmp_path)
    repo.checkout("fix-add", create=True)
    fix = dated_commit(repo, {"calc.py": "wip\n"}, "wip", JUST_BEFORE)
    # Its local branch and its remote-tracking twin are one checkout.
    repo.git("update-ref", "refs/remotes/origin/fix-add", fix)
    # Work on the branch after the session started is not its base.
    dated_commit(repo, {"calc.py": "after\n"}, "after", AFTER)
    repo.checkout("main")

    run = imported(tmp_path, repo)

    assert run.base_sha == fix
    assert run.record["inferred"]["base_sha"] == (
        'the session names no branch: the last commit of "fix-add" before it '
        "started (2026-12-02T22:48:53.091000Z), the one branch with a commit "
        'newer than "main"\'s by then'
    )


@pytest.mark.parametrize("held", [True, False])
def test_a_branch_moved_on_since_is_walked_back_with_or_without_the_imports_lookups(
    tmp_path, held
):
    repo, _ = calc_repo(tmp_path)
    repo.checkout("fix-add", create=True)
    fix = dated_commit(repo, {"calc.py": "wip\n"}, "wip", JUST_BEFORE)
    dated_commit(repo, {"calc.py": "after\n"}, "after", AFTER)
    draft = RecordDraft(1, {}, Search(start=START, find_base=True))
    lookups = Lookups(repo.git_dir) if held else None

    assert find_base(draft, repo.git_dir, "main", lookups) == ""
    assert draft.record["base_sha"] == fix


def test_the_project_default_branch_is_the_one_asked(tmp_path):
    repo, evening = calc_repo(tmp_path)
    repo.checkout("trunk", create=True)
    repo.checkout("main")
    older = dated_commit(repo, {"calc.py": "x\n"}, "on main", JUST_BEFORE)

    run = imported(tmp_path, repo, default_branch="trunk")

    # trunk is the default: main's newer commit is the one branch ahead of it.
    assert run.base_sha == older
    assert 'newer than "trunk"\'s' in run.record["inferred"]["base_sha"]
    assert evening != older


def test_two_branches_worked_on_before_the_start_is_one_line_saying_which(tmp_path):
    repo, evening = calc_repo(tmp_path)
    make_git_project(repo)
    repo.checkout("fix-add", create=True)
    fix = dated_commit(repo, {"calc.py": "a\n"}, "a", JUST_BEFORE)
    repo.checkout("main")
    repo.checkout("docs", create=True)
    docs = dated_commit(repo, {"NOTES": "b\n"}, "b", "2026-12-02T22:45:00Z")
    repo.checkout("main")

    status, out = import_runs(
        str(SESSION), "--format", "gemini-cli", "--no-preflight", "--project", "shop"
    )

    assert status == 0
    run = Run.objects.get()
    assert run.base_sha == ""
    assert "base_sha" not in run.record.get("inferred", {})
    # One line says it all: nothing more is said of the original.
    [note] = run.record["import_notes"]
    assert note == (
        "no base commit was found: the session names no branch and 3 commits "
        "could have been checked out when it started "
        f'(2026-12-02T22:48:53.091000Z): "docs" at {docs[:12]} '
        f'(2026-12-02T22:45:00Z); "fix-add" at {fix[:12]} (2026-12-02T22:40:00Z); '
        f'"main" at {evening[:12]} (2026-12-02T20:00:00Z); name the run\'s '
        "original with --original <sha> (its parent is taken as the base), or "
        "import the run as a native record with its base_sha"
    )
    assert "\n" not in note
    # The import's summary says it too, on the session's line.
    assert f"{SESSION}: line 1: {note}" in out.splitlines()


def test_no_commit_before_the_start_says_so(tmp_path):
    # The only commit was made now, days after the session.
    repo = make_repo(tmp_path, {"README.md": "# calc\n"})

    run = imported(tmp_path, repo)

    assert run.base_sha == ""
    assert (
        "no base commit was found: the session names no branch and no branch has "
        "a commit made before it started (2026-12-02T22:48:53.091000Z); name the "
        "run's original with --original <sha>"
    ) in run.record["import_notes"][0]
    assert len(run.record["import_notes"]) == 1
