"""What a transcript leaves out, found in a real repository: Claude Code's
base (the branch's last commit before the session) and original (the last
commit of the one line of work, on any branch, that descends from the base
and was committed during the session or within 30 minutes of its end),
Codex's original (found the same way from the base its rollout names). Every
such field is a provenance warning and the base is never trusted."""

from __future__ import annotations

import json
import shutil
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

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


def test_claude_codes_original_is_the_last_commit_of_its_line_of_work(
    tmp_path, rounding
):
    repo, commits = rounding
    project = make_git_project(repo)

    claude_import(tmp_path, project)

    run = Run.objects.get(external_id=SESSION)
    # The two commits made during the session are one line: the last is the
    # change. The one two hours later is another session's.
    assert run.original_commit == commits["marked"]
    assert run.preflight == Preflight.READY
    warnings = run.provenance["warnings"]
    for name in ("base_sha", "original_commit"):
        assert any(w.startswith(f"{name} was inferred") for w in warnings), name
    assert "original_commit was inferred" in run.provenance["base"]["reason"]


def test_a_commit_made_after_the_session_on_a_new_branch_is_the_original(tmp_path):
    """As people work: the session ran on one branch; its change was read,
    then committed (with no word of Claude) on a branch of its own."""
    repo = make_repo(tmp_path, {"cart.py": "def total(lines):\n    return 0\n"})
    repo.checkout("feature/rounding", create=True)
    base = dated_commit(repo, {"cart.py": "v1\n"}, "Prepare", "2025-06-01T09:30:00Z")
    repo.checkout("fix-teens", create=True)
    mine = dated_commit(
        repo, {"cart.py": "v2\n"}, "Round the teens", "2025-06-01T10:20:00Z"
    )
    repo.checkout("main")
    project = make_git_project(repo)

    claude_import(tmp_path, project)

    run = Run.objects.get(external_id=SESSION)
    assert (run.base_sha, run.original_commit) == (base, mine)
    assert run.record["original_branch"] == "fix-teens"
    assert run.preflight == Preflight.READY
    rule = run.record["inferred"]["original_commit"]
    assert "any branch" in rule and "30 minutes after it" in rule


def test_two_lines_of_work_from_the_base_name_no_original_and_say_how(tmp_path):
    repo = make_repo(tmp_path, {"cart.py": "def total(lines):\n    return 0\n"})
    repo.checkout("feature/rounding", create=True)
    dated_commit(repo, {"cart.py": "v1\n"}, "Prepare", "2025-06-01T09:30:00Z")
    repo.checkout("try-one", create=True)
    one = dated_commit(repo, {"cart.py": "a\n"}, "One way", "2025-06-01T10:02:00Z")
    repo.checkout("feature/rounding")
    repo.checkout("try-two", create=True)
    two = dated_commit(repo, {"cart.py": "b\n"}, "Another", "2025-06-01T10:03:00Z")
    repo.checkout("main")
    project = make_git_project(repo)

    claude_import(tmp_path, project)

    run = Run.objects.get(external_id=SESSION)
    assert run.original_commit == ""
    (note,) = [n for n in run.record["import_notes"] if "lines of work" in n]
    assert one[:12] in note and two[:12] in note and "--original <sha>" in note


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


def test_an_original_named_on_import_settles_two_lines_of_work(tmp_path):
    repo = make_repo(tmp_path, {"cart.py": "def total(lines):\n    return 0\n"})
    repo.checkout("feature/rounding", create=True)
    dated_commit(repo, {"cart.py": "v1\n"}, "Prepare", "2025-06-01T09:30:00Z")
    repo.checkout("try-one", create=True)
    dated_commit(repo, {"cart.py": "a\n"}, "One way", "2025-06-01T10:02:00Z")
    repo.checkout("feature/rounding")
    repo.checkout("try-two", create=True)
    two = dated_commit(repo, {"cart.py": "b\n"}, "Another", "2025-06-01T10:03:00Z")
    repo.checkout("main")
    make_git_project(repo)
    directory = tmp_path / "sessions"
    directory.mkdir()
    shutil.copy(FIXTURES / "claude-code" / f"{SESSION}.jsonl", directory)
    path = directory / f"{SESSION}.jsonl"

    # A commit that is not in the repository is refused, and nothing imported.
    out = StringIO()
    with pytest.raises(SystemExit):
        call_command(
            "import_runs", str(path), "--format", "claude-code", "--project",
            "shop", "--original", "0123456789abcdef", "--json", stdout=out,
        )  # fmt: skip
    refused = json.loads(out.getvalue())
    assert refused["imported"] == 0
    assert "not a commit of the project repository" in refused["invalid"][0]["error"]

    call_command(
        "import_runs", str(path), "--format", "claude-code", "--project", "shop",
        "--original", two[:10], stdout=StringIO(),
    )  # fmt: skip

    run = Run.objects.get(external_id=SESSION)
    assert run.original_commit == two
    assert run.record["inferred"]["original_commit"] == "named on import (--original)"
    assert run.preflight == Preflight.READY


def test_original_is_refused_for_native_records(tmp_path):
    with pytest.raises(CommandError, match="--original takes an agent's own files"):
        call_command("import_runs", str(tmp_path / "x.jsonl"), "--original", "abc1234")
