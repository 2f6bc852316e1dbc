"""A run whose original is a patch (a SWE-bench prediction) keeps the patch
itself: the import only reads the project's repository, each patch and each
import's patches are bounded, and runs imported while the patch became a
commit in the repository get their patch from that commit."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from replayhub.git.patches import borrowing, patched_commit, patched_tree
from replayhub.git.scratch import git, repository_git_dir
from replayhub.ingest.preflight import preflight_pending
from replayhub.ingest.services import transcripts_import
from replayhub.ingest.transcripts import loader
from replayhub.models import ImportFormat, Preflight, Project, Run, RunPatch
from tests.factories import make_git_project
from tests.gitrepos import make_repo

pytestmark = pytest.mark.django_db(transaction=True)

CART = "def total(lines):\n    return 0\n"
PATCH = (
    "--- a/cart.py\n+++ b/cart.py\n@@ -1,2 +1,2 @@\n"
    " def total(lines):\n-    return 0\n+    return sum(lines)\n"
)
moved = importlib.import_module("replayhub.migrations.0042_run_patch")


def repository_state(path: Path | str) -> tuple[str, str]:
    """Every ref of a repository and what its object store holds."""
    git_dir = repository_git_dir(path)
    refs = git("for-each-ref", git_dir=git_dir).stdout.decode()
    count = git("count-objects", "-v", git_dir=git_dir).stdout.decode()
    return refs, count


def commit_exists(path: Path | str, sha: str) -> bool:
    found = git(
        "cat-file", "-e", f"{sha}^{{commit}}",
        git_dir=repository_git_dir(path), check=False,
    )  # fmt: skip
    return found.returncode == 0


def predictions(tmp_path, base, *patches, model="acme-agent-v2"):
    path = tmp_path / "predictions.jsonl"
    lines = [
        {
            "instance_id": f"shop__shop-{number}",
            "model_name_or_path": model,
            "model_patch": patch,
            "base_commit": base,
            "problem_statement": "Totals ignore the lines.",
        }
        for number, patch in enumerate(patches, 1)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_an_imported_patch_is_stored_with_its_run_and_the_repository_is_unchanged(
    tmp_path,
):
    repo = make_repo(tmp_path, {"cart.py": CART})
    base = repo.head()
    project = make_git_project(repo)
    before = repository_state(repo.path)
    path = predictions(tmp_path, base, PATCH)

    summary = transcripts_import(
        project=project, paths=[path], format=ImportFormat.SWEBENCH
    )

    assert (summary.imported, summary.invalid) == (1, [])
    assert repository_state(repo.path) == before
    run = Run.objects.get()
    assert run.patch.patch == PATCH
    assert not commit_exists(repo.path, run.original_commit)
    assert run.preflight == Preflight.READY
    assert run.provenance["base"]["source"] == "recorded"
    assert run.provenance["base"]["confirmed"] is True
    # The original commit is the same wherever the patch is applied again.
    with borrowing(repo.git_dir) as scratch:
        tree = patched_tree(scratch, base, PATCH)
        label = "shop__shop-1 (acme-agent-v2)"
        assert patched_commit(scratch, base, tree, label=label) == run.original_commit
    assert run.patch.tree == tree
    # Imported again: the same original, nothing stored twice.
    again = transcripts_import(
        project=project, paths=[path], format=ImportFormat.SWEBENCH
    )
    assert (again.imported, again.duplicates) == (0, 1)
    assert RunPatch.objects.count() == 1
    assert repository_state(repo.path) == before


def test_a_patch_over_its_limit_or_the_imports_is_refused_in_one_line(
    tmp_path, settings
):
    repo = make_repo(tmp_path, {"cart.py": CART})
    base = repo.head()
    project = make_git_project(repo)
    settings.REPLAYHUB_MAX_PATCH_BYTES = 100
    big = PATCH + "".join(f"+# line {n}\n" for n in range(10))
    big = big.replace("@@ -1,2 +1,2 @@", "@@ -1,2 +1,12 @@")

    summary = transcripts_import(
        project=project,
        paths=[predictions(tmp_path, base, big)],
        format=ImportFormat.SWEBENCH,
    )

    [problem] = summary.invalid
    size = len(big.encode())
    assert problem["error"] == (
        f"shop__shop-1 (acme-agent-v2): the submitted patch is {size:,} bytes, "
        "above the limit of 100 bytes a patch"
    )
    assert "\n" not in problem["error"]
    assert not Run.objects.exists()

    settings.REPLAYHUB_MAX_PATCH_BYTES = 1000
    settings.REPLAYHUB_MAX_IMPORT_PATCH_BYTES = len(PATCH) + 10
    other = PATCH.replace("sum(lines)", "sum(lines) + 0")
    summary = transcripts_import(
        project=project,
        paths=[predictions(tmp_path, base, PATCH, other)],
        format=ImportFormat.SWEBENCH,
    )
    [problem] = summary.invalid
    assert problem["line"] == 2
    assert problem["error"] == (
        f"shop__shop-2 (acme-agent-v2): the submitted patch ({len(other):,} "
        f"bytes) would bring this import's patches to "
        f"{len(PATCH) + len(other):,} bytes, above the limit of "
        f"{len(PATCH) + 10:,} bytes an import"
    )
    assert list(Run.objects.values_list("external_id", flat=True)) == [
        "acme-agent-v2:shop__shop-1"
    ]
    assert RunPatch.objects.get().patch == PATCH


def old_import(repo, base, patch, label):
    """A patch imported as imports did before: its commit and a ref of it
    written into the project's repository."""
    with borrowing(repo.git_dir) as scratch:
        tree = patched_tree(scratch, base, patch)
        commit = patched_commit(scratch, base, tree, label=label)
    # Copied into the repository as the old import wrote it there.
    index = repo.path.parent / "old.index"
    git("read-tree", base, git_dir=repo.git_dir, index_file=index)
    git(
        "apply", "--cached", "-", git_dir=repo.git_dir, index_file=index,
        input=patch.encode(),
    )  # fmt: skip
    written = git("write-tree", git_dir=repo.git_dir, index_file=index)
    assert written.stdout.decode().strip() == tree
    date = repo.git("log", "-1", "--format=%cI", base).strip()
    env = {
        "GIT_AUTHOR_NAME": "ReplayHub import",
        "GIT_AUTHOR_EMAIL": "import@replayhub.invalid",
        "GIT_COMMITTER_NAME": "ReplayHub import",
        "GIT_COMMITTER_EMAIL": "import@replayhub.invalid",
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_DATE": date,
    }
    message = f"{label}\n\nThe submitted patch applied at {base} by ReplayHub.\n"
    made = git(
        "commit-tree", tree, "-p", base, git_dir=repo.git_dir,
        input=message.encode(), env=env,
    ).stdout.decode().strip()  # fmt: skip
    assert made == commit
    repo.git("update-ref", f"refs/replayhub/imported/{commit}", commit)
    return commit, tree


def imported_run(project, external_id, base, commit):
    return Run.objects.create(
        project=project,
        external_id=external_id,
        base_sha=base,
        original_commit=commit,
        raw={"transcript": {"format": "swebench"}},
    )


def test_the_migration_moves_an_imported_commits_patch_to_its_run(tmp_path):
    repo = make_repo(tmp_path, {"cart.py": CART})
    base = repo.head()
    project = make_git_project(repo)
    commit, tree = old_import(repo, base, PATCH, "shop__shop-1 (acme-agent-v2)")
    kept = imported_run(project, "gone", base, "f" * 40)
    run = imported_run(project, "moved", base, commit)
    # A commit of the project's own history is no imported patch.
    own = repo.commit({"cart.py": "x = 1\n"}, "work")
    native = imported_run(project, "own", base, own)
    before = repository_state(repo.path)

    counts = moved.move_patches(
        Project, Run, RunPatch, mirror_root=tmp_path / "mirrors"
    )

    assert counts == {"moved": 1, "kept": 2}
    assert repository_state(repo.path) == before
    stored = RunPatch.objects.get()
    assert (stored.run_id, stored.tree) == (run.pk, tree)
    with borrowing(repo.git_dir) as scratch:
        assert patched_tree(scratch, base, stored.patch) == tree
    assert not RunPatch.objects.filter(run__in=[kept, native]).exists()
    # Run again, it finds nothing left to move.
    again = moved.move_patches(Project, Run, RunPatch, mirror_root=tmp_path)
    assert again == {"kept": 2}


def test_the_migration_reads_a_remote_projects_mirror_on_this_host(tmp_path):
    repo = make_repo(tmp_path, {"cart.py": CART})
    base = repo.head()
    commit, tree = old_import(repo, base, PATCH, "shop__shop-1 (acme-agent-v2)")
    mirrored = make_git_project(
        repo, slug="mirrored", repo_path="https://forge.invalid/shop.git"
    )
    elsewhere = make_git_project(
        repo, slug="elsewhere", repo_path="https://forge.invalid/other.git"
    )
    run = imported_run(mirrored, "moved", base, commit)
    imported_run(elsewhere, "unread", base, commit)
    # This host's mirror of the first; the second was imported on another.
    root = tmp_path / "mirrors"
    root.mkdir()
    git(
        "clone",
        "--quiet",
        "--mirror",
        str(repo.path),
        str(root / f"{mirrored.pk}-0.git"),
    )

    counts = moved.move_patches(Project, Run, RunPatch, mirror_root=root)

    assert counts == {"moved": 1, "unread": 1}
    assert RunPatch.objects.get().run_id == run.pk
    assert RunPatch.objects.get().tree == tree


def test_a_run_preflighted_before_its_patch_was_stored_is_preflighted_again(
    tmp_path, monkeypatch
):
    repo = make_repo(tmp_path, {"cart.py": CART})
    base = repo.head()
    project = make_git_project(repo)
    stored = loader.import_lines
    seen = []

    def and_another_imports_preflight(**kwargs):
        # Another import into the project preflights its pending runs while
        # this one has stored its runs and not yet their patches.
        summary = stored(**kwargs)
        preflight_pending(project_ids=[project.pk])
        seen.append(Run.objects.get().preflight)
        return summary

    monkeypatch.setattr(loader, "import_lines", and_another_imports_preflight)

    transcripts_import(
        project=project,
        paths=[predictions(tmp_path, base, PATCH)],
        format=ImportFormat.SWEBENCH,
    )

    assert seen == [Preflight.UNREPRODUCIBLE]
    run = Run.objects.get()
    assert (run.preflight, run.patch.patch) == (Preflight.READY, PATCH)
