"""A mixed directory of transcripts imported into a project on a real
repository: each file read in its own format, the repository filling in the
commits, inferred fields never trusted, a second import a no-op."""

from __future__ import annotations

import json
import shutil

import pytest

from replayhub.git.scratch import git
from replayhub.ingest.services import transcripts_import
from replayhub.ingest.transcripts import loader
from replayhub.ingest.transcripts.loader import AUTO
from replayhub.models import Preflight, Run
from tests.factories import make_git_project
from tests.gitrepos import make_repo
from tests.ingest.test_imported_patches import commit_exists
from tests.ingest.test_transcript_parsers import FIXTURES

pytestmark = pytest.mark.django_db(transaction=True)


def dated_commit(repo, files, message, when, *, author="Dev <dev@example.com>"):
    repo.write(files)
    repo.git("add", "--all")
    env = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    git(
        "commit", "--quiet", "-m", message, f"--author={author}",
        git_dir=repo.git_dir, work_tree=repo.path, env=env,
    )  # fmt: skip
    return repo.head()


@pytest.fixture
def setup(tmp_path):
    repo = make_repo(tmp_path, {"cart.py": "def total(lines):\n    return 0\n"})
    base = repo.head()
    one = dated_commit(
        repo, {"cart.py": "class Cart:\n    discount = 0\n"},
        "feat: Add discount field to cart", "2025-06-05T10:01:00Z",
        author="Dev (aider) <dev@example.com>",
    )  # fmt: skip
    two = dated_commit(
        repo, {"test_cart.py": "def test(): pass\n"},
        "test: Cover the cart discount", "2025-06-05T10:02:00Z",
        author="Dev (aider) <dev@example.com>",
    )  # fmt: skip
    repo.checkout("main")
    directory = tmp_path / "transcripts"
    shutil.copytree(FIXTURES / "mixed", directory)
    patch = "--- a/cart.py\n+++ b/cart.py\n@@ -1,2 +1,2 @@\n def total(lines):\n-    return 0\n+    return 1\n"  # noqa: E501
    for path in directory.iterdir():
        text = path.read_text()
        text = text.replace("BASE_SHA_PLACEHOLDER", base)
        text = text.replace("AIDER_ONE", one[:7]).replace("AIDER_TWO", two[:7])
        text = text.replace('"PATCH_ONE"', json.dumps(patch))
        path.write_text(text)
    project = make_git_project(repo)
    return project, directory, base, one, two


def test_a_mixed_directory_imports_each_file_in_its_own_format(setup):
    project, directory, base, _one, two = setup
    paths = sorted(directory.iterdir())
    summary = transcripts_import(project=project, paths=paths, format=AUTO)
    runs = {run.external_id: run for run in Run.objects.all()}
    assert set(runs) == {
        "c0de0000-0000-4000-8000-000000000004",
        "aider-20250605T100000",
        "acme-agent-v2:shop__shop-1",
    }
    # The second prediction's patch does not apply: a line error naming it.
    [problem] = summary.invalid
    assert problem["file"].endswith("predictions.jsonl")
    assert problem["line"] == 2
    assert problem["error"].startswith("shop__shop-2 (acme-agent-v2): git apply")

    codex = runs["c0de0000-0000-4000-8000-000000000004"]
    assert (codex.base_sha, codex.model) == (base, "gpt-5-codex")
    assert codex.record["transcript"]["format"] == "codex"

    aider_run = runs["aider-20250605T100000"]
    assert aider_run.original_commit == two
    assert aider_run.base_sha == base
    assert set(aider_run.record["inferred"]) == {"base_sha", "started_at"}
    assert aider_run.preflight == Preflight.READY
    assert aider_run.provenance["base"]["source"] == "inferred"
    assert aider_run.provenance["base"]["trusted"] is False
    assert any("base_sha was inferred" in w for w in aider_run.provenance["warnings"])

    prediction = runs["acme-agent-v2:shop__shop-1"]
    assert prediction.base_sha == base
    # The patch is the run's; the repository gained no commit and no ref.
    assert "+    return 1" in prediction.patch.patch
    assert not commit_exists(project.repo_path, prediction.original_commit)
    assert prediction.provenance["base"]["source"] == "recorded"
    assert prediction.preflight == Preflight.READY

    again = transcripts_import(project=project, paths=paths, format=AUTO)
    assert (again.imported, again.duplicates) == (0, 3)


def test_a_swe_agent_submission_becomes_the_original_commit_at_its_base(tmp_path):
    repo = make_repo(tmp_path, {"cart.py": "def total(lines):\n    return 0\n"})
    base = repo.head()
    source = FIXTURES / "swe-agent" / "shop__shop-7.traj"
    path = tmp_path / source.name
    path.write_text(source.read_text().replace("BASE_SHA_PLACEHOLDER", base))
    project = make_git_project(repo)

    summary = transcripts_import(project=project, paths=[path], format=AUTO)

    assert (summary.imported, summary.invalid) == (1, [])
    run = Run.objects.get()
    assert run.base_sha == base
    assert run.provenance["base"]["source"] == "recorded"
    assert "+    return sum(lines)" in run.patch.patch
    assert not commit_exists(repo.path, run.original_commit)
    assert run.preflight == Preflight.READY
    # The same patch at the same base is the same commit: a second import is
    # all duplicates.
    again = transcripts_import(project=project, paths=[path], format=AUTO)
    assert (again.imported, again.duplicates) == (0, 1)


def test_an_openhands_trajectory_is_stored_without_an_original(tmp_path):
    repo = make_repo(tmp_path)
    project = make_git_project(repo)
    path = FIXTURES / "openhands" / "trajectory.json"

    transcripts_import(project=project, paths=[path], format="openhands")

    run = Run.objects.get()
    assert run.preflight == Preflight.UNREPRODUCIBLE
    assert run.record["transcript"]["file"] == "trajectory.json"
    assert any("names no commit" in w for w in run.provenance["warnings"])


def test_a_transcript_with_no_time_and_nothing_to_date_it_by_is_refused_saying_so(
    tmp_path,
):
    """An ATIF trajectory with no step times, sent without a file time (as the
    upload page and the API send it) into a project where no base commit
    dates it: one line says why, not a missing field's name."""
    trajectory = {
        "schema_version": "ATIF-v1.4",
        "session_id": "untimed-1",
        "agent": {"name": "terminus-2", "version": "1.0.0", "model_name": "gpt-5"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "say hello"},
            {"step_id": 2, "source": "agent", "message": "hello"},
        ],
    }
    project = make_git_project(make_repo(tmp_path))

    summary = loader.import_sources(
        project=project,
        sources=[loader.Source("trajectory.json", [json.dumps(trajectory).encode()])],
        format="atif",
    )

    assert summary.imported == 0
    assert [e["error"] for e in summary.invalid] == [
        "the run has no start time: the file records none, and it came with no "
        "file time and no base commit to date it by"
    ]


@pytest.mark.parametrize(
    "format",
    ["opencode", "atif", "mini-swe-agent", "swe-agent", "openhands", "swebench"],
)
def test_an_empty_document_holds_no_record_rather_than_bad_json(tmp_path, format):
    """As an empty file of run records: nothing imported, nothing invalid, so
    the page says the file held no records (not "line 1: not valid JSON")."""
    project = make_git_project(make_repo(tmp_path))

    summary = loader.import_sources(
        project=project,
        sources=[loader.Source("export.json", [b"", b"  ", b""])],
        format=format,
    )

    assert (summary.imported, summary.invalid_total, summary.invalid) == (0, 0, [])
