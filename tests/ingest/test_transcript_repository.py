"""What a transcript leaves out, found in a real repository: Claude Code's
base (the branch's last commit before the session) and original (the newest
commit during the session that mentions Claude), Codex's original (the
branch's last commit during the session). Every such field is a provenance
warning and the base is never trusted."""

from __future__ import annotations

import shutil

import pytest

from replayhub.ingest.services import transcripts_import
from replayhub.models import ImportFormat, Preflight, Run
from tests.factories import make_git_project
from tests.gitrepos import make_repo
from tests.ingest.test_transcript_import import dated_commit
from tests.ingest.test_transcript_parsers import FIXTURES

pytestmark = pytest.mark.django_db(transaction=True)

SESSION = "5f0c9a1e-0000-4000-8000-000000000001"
CLAUDE = "Claude <noreply@anthropic.com>"


@pytest.fixture
def rounding(tmp_path):
    """A repository whose ``feature/rounding`` branch has commits before,
    during and after the fixture session (2025-06-01 10:00 to 10:04 UTC)."""
    repo = make_repo(tmp_path, {"cart.py": "def total(lines):\n    return 0\n"})
    repo.checkout("feature/rounding", create=True)
    commits = {
        "before": dated_commit(
            repo, {"cart.py": "v1\n"}, "Prepare the cart", "2025-06-01T09:30:00Z"
        ),
        "unmarked": dated_commit(
            repo, {"cart.py": "v2\n"}, "Tidy imports", "2025-06-01T10:01:00Z"
        ),
        "marked": dated_commit(
            repo,
            {"cart.py": "v3\n"},
            f"Round each line before summing\n\nCo-Authored-By: {CLAUDE}",
            "2025-06-01T10:03:00Z",
        ),
        "later": dated_commit(
            repo,
            {"cart.py": "v4\n"},
            f"Another session\n\nCo-Authored-By: {CLAUDE}",
            "2025-06-01T12:00:00Z",
        ),
    }
    repo.checkout("main")
    # A newer commit on another branch is never the base.
    dated_commit(repo, {"other.py": "x\n"}, "Elsewhere", "2025-06-01T09:50:00Z")
    return repo, commits


def claude_import(tmp_path, project):
    directory = tmp_path / "sessions"
    directory.mkdir()
    name = f"{SESSION}.jsonl"
    shutil.copy(FIXTURES / "claude-code" / name, directory / name)
    return transcripts_import(
        project=project, paths=[directory / name], format=ImportFormat.CLAUDE_CODE
    )


def test_claude_codes_base_is_the_branchs_last_commit_before_the_session(
    tmp_path, rounding
):
    repo, commits = rounding
    project = make_git_project(repo)

    summary = claude_import(tmp_path, project)

    assert summary.imported == 1
    run = Run.objects.get(external_id=SESSION)
    assert run.base_sha == commits["before"]
    assert "feature/rounding" in run.record["inferred"]["base_sha"]
    assert run.provenance["base"]["source"] == "inferred"
    assert run.provenance["base"]["trusted"] is False


def test_claude_codes_original_is_the_newest_commit_during_it_mentioning_claude(
    tmp_path, rounding
):
    repo, commits = rounding
    project = make_git_project(repo)

    claude_import(tmp_path, project)

    run = Run.objects.get(external_id=SESSION)
    # Not the unmarked commit made during the session, not the marked one after.
    assert run.original_commit == commits["marked"]
    assert run.preflight == Preflight.READY
    warnings = run.provenance["warnings"]
    for name in ("base_sha", "original_commit"):
        assert any(w.startswith(f"{name} was inferred") for w in warnings), name
    assert "original_commit was inferred" in run.provenance["base"]["reason"]


def test_a_session_on_a_branch_the_repository_lacks_has_no_original(tmp_path):
    repo = make_repo(tmp_path)
    project = make_git_project(repo)

    claude_import(tmp_path, project)

    run = Run.objects.get(external_id=SESSION)
    assert (run.base_sha, run.original_commit) == ("", "")
    assert run.preflight == Preflight.UNREPRODUCIBLE
    notes = run.record["import_notes"]
    assert any("feature/rounding" in note for note in notes)
    assert any(w.startswith("import: ") for w in run.provenance["warnings"])


def test_codexs_original_is_the_branchs_last_commit_during_the_session(tmp_path):
    repo = make_repo(tmp_path, {"tax.py": "TAX = 0.2\n"})
    base = dated_commit(
        repo, {"tax.py": "TAX = 0.2\n# v1\n"}, "Start", "2025-06-04T09:00:00Z"
    )
    done = dated_commit(
        repo,
        {"tax.py": "import os\nTAX = float(os.environ['SHOP_TAX'])\n"},
        "Read the tax rate from SHOP_TAX",
        "2025-06-04T10:00:08Z",
    )
    dated_commit(repo, {"later.py": "x\n"}, "Unrelated", "2025-06-04T15:00:00Z")
    path = tmp_path / "rollout-2025-06-04T10-00-00-c0de.jsonl"
    text = (FIXTURES / "mixed" / path.name).read_text()
    path.write_text(text.replace("BASE_SHA_PLACEHOLDER", base))
    project = make_git_project(repo)

    transcripts_import(project=project, paths=[path], format=ImportFormat.CODEX)

    run = Run.objects.get()
    assert (run.base_sha, run.original_commit) == (base, done)
    # The base was read from the rollout, the original inferred.
    assert set(run.record["inferred"]) == {"original_commit"}
    assert run.provenance["base"]["trusted"] is False
    assert any(
        w.startswith("original_commit was inferred") for w in run.provenance["warnings"]
    )
