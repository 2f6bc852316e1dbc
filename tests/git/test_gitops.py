"""Scratch repositories: provision, capture, compare, checkout and commit of
trees, the git runner, and removal of what the agent locked."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

import pytest

from replayhub.git.scratch import (
    GitError,
    Scratch,
    compare,
    git,
    remove_tree,
)
from replayhub.replay.capture import capture_workspace
from tests.git.conftest import BASE_FILES, ls_tree
from tests.gitrepos import Repo, Symlink, make_repo, write_files


def object_files(repo: Repo) -> set[str]:
    objects = repo.git_dir / "objects"
    return {str(p.relative_to(objects)) for p in objects.rglob("*") if p.is_file()}


# --- provision -----------------------------------------------------------------


def test_provision_checks_out_the_base_even_after_main_moved_on(repo, scratch):
    base = repo.head()
    repo.commit({"src/app.py": "later\n", "later.txt": "x\n"}, "later work")

    workspace = scratch.provision(base)

    assert (workspace / "src/app.py").read_text() == BASE_FILES["src/app.py"]
    assert not (workspace / "later.txt").exists()
    assert os.access(workspace / "run.sh", os.X_OK)
    assert (workspace / ".git" / "HEAD").read_text().strip() == base


def test_provisioned_workspace_has_no_ref_leading_to_later_commits(repo, scratch):
    base = repo.head()
    repo.commit({"solution.py": "x\n"}, "the original", branch="agent/fix")

    workspace = scratch.provision(base)

    refs = git("for-each-ref", git_dir=workspace / ".git").stdout
    assert refs == b""
    packed = workspace / ".git" / "packed-refs"
    assert not packed.exists() or "refs/" not in packed.read_text()


def test_the_agent_git_holds_only_what_the_base_reaches(repo, scratch):
    base = repo.head()
    original = repo.commit({"solution.py": "secret fix\n"}, "original", branch="a")
    fix_blob = repo.git("rev-parse", f"{original}:solution.py")

    workspace = scratch.provision(base)

    ws_git = workspace / ".git"
    assert not (ws_git / "objects" / "info" / "alternates").exists()
    log = git("log", "--format=%H", git_dir=ws_git).stdout.decode()
    assert log.split() == [base]
    # The original's objects cannot be found by hash from inside the workspace.
    probe = git("cat-file", "-e", fix_blob, git_dir=ws_git, check=False)
    assert probe.returncode != 0
    assert str(repo.path) not in (ws_git / "config").read_text()


def test_the_project_repository_is_never_written(repo, scratch):
    base = repo.head()
    original = repo.commit({"src/app.py": "original\n"}, "original", branch="a")
    before = object_files(repo)

    workspace = scratch.provision(base)
    write_files(workspace, {"src/app.py": "replayed\n", "new.bin": b"\0\1\2"})
    tree = capture_workspace(scratch, workspace).tree
    scratch.commit_tree(tree, base, "replay")
    compare(scratch, base=base, original_commit=original, replay_tree=tree)

    assert object_files(repo) == before


def test_provision_refuses_to_reuse_a_workspace(repo, scratch):
    scratch.provision(repo.head())

    with pytest.raises(FileExistsError):
        scratch.provision(repo.head())


def test_provision_rejects_a_base_that_is_not_a_commit(repo, scratch):
    with pytest.raises(GitError, match="does not name a commit"):
        scratch.provision("0123456789abcdef0123456789abcdef01234567")
    with pytest.raises(ValueError, match="not a hex object name"):
        scratch.provision("--upload-pack=touch /tmp/x")


# --- capture -------------------------------------------------------------------


def test_capture_of_an_untouched_workspace_is_the_base_tree(repo, scratch):
    workspace = scratch.provision(repo.head())

    assert capture_workspace(scratch, workspace).tree == repo.tree()


def test_capture_records_edits_additions_deletions_and_mode_changes(repo, scratch):
    workspace = scratch.provision(repo.head())
    write_files(
        workspace,
        {"src/app.py": "edited\n", "src/new.py": "new\n", "docs/guide.md": None},
    )
    (workspace / "src/util.py").chmod(0o755)
    (workspace / "run.sh").chmod(0o644)

    entries = ls_tree(scratch, capture_workspace(scratch, workspace).tree)

    assert entries == {
        "README.md": ("100644", "readme\n"),
        "src/app.py": ("100644", "edited\n"),
        "src/new.py": ("100644", "new\n"),
        "src/util.py": ("100755", BASE_FILES["src/util.py"]),
        "run.sh": ("100644", "#!/bin/sh\necho run\n"),
    }


def test_capture_stores_symlinks_pointing_outside_as_links_never_followed(
    repo, scratch, tmp_path
):
    outside = tmp_path / "host-secrets"
    outside.mkdir()
    (outside / "key").write_text("secret\n")
    workspace = scratch.provision(repo.head())
    write_files(
        workspace,
        {"passwd": Symlink("/etc/passwd"), "src/secrets": Symlink(str(outside))},
    )

    entries = ls_tree(scratch, capture_workspace(scratch, workspace).tree)

    assert entries["passwd"] == ("120000", "/etc/passwd")
    assert entries["src/secrets"] == ("120000", str(outside))
    assert not any(path.startswith("src/secrets/") for path in entries)


def test_capture_replaces_a_tracked_directory_turned_into_a_symlink(repo, scratch):
    workspace = scratch.provision(repo.head())
    shutil.rmtree(workspace / "src")
    (workspace / "src").symlink_to("/usr/lib")

    entries = ls_tree(scratch, capture_workspace(scratch, workspace).tree)

    assert entries["src"] == ("120000", "/usr/lib")
    assert "src/app.py" not in entries


def test_capture_honours_gitignore_like_the_agents_own_git_would(repo, scratch):
    workspace = scratch.provision(repo.head())
    write_files(
        workspace,
        {".gitignore": "*.log\nREADME.md\n", "debug.log": "x\n", "README.md": "new\n"},
    )

    entries = ls_tree(scratch, capture_workspace(scratch, workspace).tree)

    assert "debug.log" not in entries
    # Already tracked at base, so ignoring it does not drop it.
    assert entries["README.md"] == ("100644", "new\n")


def test_capture_ignores_a_deleted_or_replaced_workspace_git_dir(repo, scratch):
    workspace = scratch.provision(repo.head())
    shutil.rmtree(workspace / ".git")
    write_files(workspace, {"src/app.py": "edited\n"})

    entries = ls_tree(scratch, capture_workspace(scratch, workspace).tree)

    assert entries["src/app.py"] == ("100644", "edited\n")
    assert not any(path.startswith(".git") for path in entries)


def test_capture_stores_a_nested_repository_as_a_plain_directory(repo, scratch):
    workspace = scratch.provision(repo.head())
    make_repo(workspace, {"inner.txt": "inner\n"}, name="vendor/lib")

    captured = capture_workspace(scratch, workspace)
    entries = ls_tree(scratch, captured.tree)

    assert entries["vendor/lib/inner.txt"] == ("100644", "inner\n")
    assert not any(".git/" in path for path in entries)
    assert captured.nested_repositories == ["vendor/lib"]


def test_capture_skips_special_files_and_lists_them(repo, scratch):
    workspace = scratch.provision(repo.head())
    os.mkfifo(workspace / "pipe")

    captured = capture_workspace(scratch, workspace)

    assert "pipe" not in ls_tree(scratch, captured.tree)
    assert captured.unstorable == ["pipe"]


def test_capture_needs_to_know_the_base(repo, tmp_path):
    scratch = Scratch(tmp_path / "other", repo.path)
    workspace = tmp_path / "elsewhere"
    workspace.mkdir()

    with pytest.raises(ValueError, match="base"):
        capture_workspace(scratch, workspace)
    tree = capture_workspace(scratch, workspace, base=repo.head()).tree

    assert ls_tree(scratch, tree) == {}


# --- compare -------------------------------------------------------------------


def replay(scratch: Scratch, base: str, files: dict) -> str:
    workspace = scratch.provision(base)
    write_files(workspace, files)
    return capture_workspace(scratch, workspace).tree


def test_the_same_change_gives_identical_trees_and_no_diff_of_diffs(repo, scratch):
    base = repo.head()
    change = {"src/app.py": "def main():\n    return 42\n", "src/extra.py": "x\n"}
    original = repo.commit(change, "original", branch="agent")

    comparison = compare(
        scratch,
        base=base,
        original_commit=original,
        replay_tree=replay(scratch, base, change),
    )

    assert comparison.identical
    assert comparison.original_tree == comparison.replay_tree == repo.tree()
    assert comparison.diff_of_diffs == comparison.diffstat == ""
    assert comparison.differing_paths == []
    assert comparison.files_changed == 0
    assert comparison.original_patch == comparison.replay_patch
    assert "+    return 42" in comparison.replay_patch
    assert comparison.replay_paths == ["src/app.py", "src/extra.py"]
    assert not comparison.truncated


def test_a_different_change_shows_in_the_diff_of_diffs(repo, scratch):
    base = repo.head()
    original = repo.commit(
        {"src/app.py": "def main():\n    return 42\n", "src/extra.py": "x\n"},
        "original",
        branch="agent",
    )
    tree = replay(
        scratch,
        base,
        {"src/app.py": "def main():\n    return 43\n", "src/other.py": "y\n"},
    )

    comparison = compare(scratch, base=base, original_commit=original, replay_tree=tree)

    assert not comparison.identical
    assert comparison.differing_paths == ["src/app.py", "src/extra.py", "src/other.py"]
    assert "-    return 42\n+    return 43\n" in comparison.diff_of_diffs
    assert "src/app.py" in comparison.diffstat
    assert (comparison.files_changed, comparison.insertions) == (3, 2)
    assert comparison.deletions == 2
    assert "+    return 42" in comparison.original_patch
    assert "+    return 43" in comparison.replay_patch
    assert comparison.replay_paths == ["src/app.py", "src/other.py"]
    assert comparison.base_tree != comparison.original_tree


def test_binary_files_differ_without_their_content(repo, scratch):
    base = repo.head()
    original = repo.commit({"logo.png": b"\x89PNG\0\1"}, "logo", branch="agent")
    tree = replay(scratch, base, {"logo.png": b"\x89PNG\0\2"})

    comparison = compare(scratch, base=base, original_commit=original, replay_tree=tree)

    assert "Binary files a/logo.png and b/logo.png differ" in comparison.diff_of_diffs
    assert comparison.differing_paths == ["logo.png"]


def test_a_rename_counts_both_paths_as_touched(repo, scratch):
    base = repo.head()
    tree = replay(
        scratch, base, {"src/util.py": None, "lib/util.py": BASE_FILES["src/util.py"]}
    )

    comparison = compare(
        scratch,
        base=base,
        original_commit=base,
        replay_tree=tree,
        allowed_globs=["src/**"],
    )

    assert "rename from src/util.py" in comparison.replay_patch
    assert comparison.replay_paths == ["lib/util.py", "src/util.py"]
    assert comparison.disallowed_paths == ["lib/util.py"]


def test_paths_outside_the_allowed_globs_are_disallowed(repo, scratch):
    base = repo.head()
    tree = replay(
        scratch,
        base,
        {
            "src/app.py": "x\n",
            "src/deep/mod.py": "x\n",
            "docs/guide.md": "y\n",
            "docs/api/ref.md": "y\n",
            "setup.py": "z\n",
            ".github/workflows/ci.yml": "on: push\n",
        },
    )

    comparison = compare(
        scratch,
        base=base,
        original_commit=base,
        replay_tree=tree,
        allowed_globs=["src/**", "docs/*.md"],
    )

    assert comparison.disallowed_paths == [
        ".github/workflows/ci.yml",
        "docs/api/ref.md",
        "setup.py",
    ]


def test_no_allowed_globs_means_every_path_is_allowed(repo, scratch):
    base = repo.head()
    tree = replay(scratch, base, {"anywhere/at/all.txt": "x\n"})

    comparison = compare(
        scratch, base=base, original_commit=base, replay_tree=tree, allowed_globs=[]
    )

    assert comparison.replay_paths == ["anywhere/at/all.txt"]
    assert comparison.disallowed_paths == []


def test_patches_are_cut_at_the_cap_on_a_line_boundary(repo, scratch):
    base = repo.head()
    big = "".join(f"line {n} of a long generated file\n" for n in range(2000))
    original = repo.commit({"big.txt": big}, "big", branch="agent")
    tree = replay(scratch, base, {"big.txt": big.replace("line", "LINE")})

    comparison = compare(
        scratch, base=base, original_commit=original, replay_tree=tree, cap_bytes=4096
    )

    assert comparison.truncated
    for text in (comparison.diff_of_diffs, comparison.original_patch):
        assert 0 < len(text.encode()) <= 4096
        assert text.endswith("\n")
    assert (comparison.files_changed, comparison.insertions) == (1, 2000)


def test_a_small_change_under_the_cap_is_not_truncated(repo, scratch):
    base = repo.head()
    original = repo.commit({"a.txt": "a\n"}, "a", branch="agent")
    tree = replay(scratch, base, {"a.txt": "b\n"})

    comparison = compare(
        scratch, base=base, original_commit=original, replay_tree=tree, cap_bytes=4096
    )

    assert not comparison.truncated
    assert comparison.to_dict()["differing_paths"] == ["a.txt"]


# --- checkout_tree / commit_tree ----------------------------------------------------


def test_checkout_tree_writes_a_clean_copy_without_git(repo, scratch, tmp_path):
    workspace = scratch.provision(repo.head())
    write_files(workspace, {"link": Symlink("/etc/hostname"), "src/app.py": "new\n"})
    tree = capture_workspace(scratch, workspace).tree

    dest = scratch.checkout_tree(tree, tmp_path / "gate" / "replay")

    assert (dest / "src/app.py").read_text() == "new\n"
    assert os.readlink(dest / "link") == "/etc/hostname"
    assert os.access(dest / "run.sh", os.X_OK)
    assert not (dest / ".git").exists()
    assert not list(scratch.root.glob("checkout-*.index"))


def test_checkout_tree_accepts_a_commit(repo, scratch, tmp_path):
    dest = scratch.checkout_tree(repo.head(), tmp_path / "gate")

    assert (dest / "README.md").read_text() == "readme\n"


def test_checkout_tree_refuses_a_directory_that_is_not_empty(repo, scratch, tmp_path):
    dest = tmp_path / "gate"
    dest.mkdir()
    (dest / "left-over").write_text("x")

    with pytest.raises(FileExistsError):
        scratch.checkout_tree(repo.head(), dest)


def test_commit_tree_makes_a_commit_of_the_tree_on_its_parent(repo, scratch):
    base = repo.head()
    tree = replay(scratch, base, {"a.txt": "a\n"})

    commit = scratch.commit_tree(tree, base, "replay of run 7")

    assert scratch.resolve_tree(commit) == tree
    parents = scratch.git("rev-parse", f"{commit}^@").stdout.decode().split()
    assert parents == [base]


# --- runner ----------------------------------------------------------------------


def test_git_errors_carry_the_tail_of_stderr(repo):
    with pytest.raises(GitError, match="Needed a single revision") as caught:
        git("rev-parse", "--verify", "no-such-ref", git_dir=repo.git_dir)

    assert caught.value.returncode != 0


def test_git_output_beyond_the_cap_is_an_error_unless_truncation_is_asked(repo):
    with pytest.raises(GitError, match="more than 10 bytes"):
        git("cat-file", "-p", "HEAD", git_dir=repo.git_dir, output_cap=10)

    result = git(
        "cat-file", "-p", "HEAD", git_dir=repo.git_dir, output_cap=10, truncate=True
    )

    assert result.truncated
    assert len(result.stdout) == 10


def test_git_that_runs_too_long_is_killed_with_its_children(repo):
    started = time.monotonic()

    with pytest.raises(GitError, match="timed out"):
        git("-c", "alias.slow=!sleep 30", "slow", git_dir=repo.git_dir, timeout=0.5)

    assert time.monotonic() - started < 5


# --- remove ----------------------------------------------------------------------


def locked_tree(top: Path) -> None:
    """Files and directories an agent left read-only or unsearchable."""
    write_files(top, {"a/b/c.txt": "c\n", "a/d.txt": "d\n", "e/f.txt": "f\n"})
    (top / "link-out").symlink_to("/etc")
    for path in (top / "a/b/c.txt", top / "a/d.txt", top / "e/f.txt"):
        path.chmod(0o400)
    (top / "a/b").chmod(0o500)
    (top / "a").chmod(0o500)
    (top / "e").chmod(0o000)


def as_unprivileged_user(uid: int, action) -> int:
    """Run ``action`` in a forked child that dropped root; returns its exit code."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            action()
        except BaseException:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def chown_tree(top: Path, uid: int) -> None:
    os.lchown(top, uid, uid)
    for path in top.rglob("*"):
        os.lchown(path, uid, uid)


def test_remove_deletes_everything_the_agent_locked_and_is_safe_twice(repo, scratch):
    scratch.provision(repo.head())
    locked_tree(scratch.workspace / "build")
    (scratch.workspace).chmod(0o500)

    scratch.remove()
    scratch.remove()

    assert not scratch.root.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="drops root to test what root ignores")
def test_remove_repairs_permissions_an_unprivileged_owner_cannot_ignore():
    nobody = 65534
    parent = Path(tempfile.mkdtemp(prefix="replayhub-remove-"))
    try:
        # The unprivileged owner needs to reach and unlink the top directories.
        os.chown(parent, nobody, nobody)
        plain, repaired = parent / "plain", parent / "repaired"
        for top in (plain, repaired):
            locked_tree(top)
            chown_tree(top, nobody)

        assert as_unprivileged_user(nobody, lambda: shutil.rmtree(plain)) != 0
        assert as_unprivileged_user(nobody, lambda: remove_tree(repaired)) == 0
        assert not repaired.exists()
        assert (Path("/etc/hostname")).exists()
    finally:
        for path in parent.rglob("*"):
            if path.is_dir() and not path.is_symlink():
                path.chmod(stat.S_IRWXU)
        shutil.rmtree(parent)
