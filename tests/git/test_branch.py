"""The workspace on the original's branch: a local branch of that name at
the base instead of a detached HEAD, when git takes the name as a branch."""

from __future__ import annotations

from pathlib import Path

import pytest

from replayhub.git.scratch import Scratch, branch_name, git
from tests.gitrepos import Repo, make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return make_repo(tmp_path, {"README.md": "readme\n"})


@pytest.fixture
def scratch(tmp_path: Path, repo: Repo):
    scratch = Scratch(tmp_path / "replay", repo.path)
    yield scratch
    scratch.remove()


def _in_workspace(workspace: Path, *args: str) -> str:
    result = git(*args, git_dir=workspace / ".git", work_tree=workspace)
    return result.stdout.decode().strip()


@pytest.mark.parametrize("name", ["master", "feature/x", "replay-base"])
def test_the_base_is_checked_out_on_the_original_branch(repo, scratch, name):
    base = repo.head()
    repo.commit({"later.txt": "x\n"}, "later work")

    workspace = scratch.provision(base, branch=name)

    assert scratch.branch == name
    assert _in_workspace(workspace, "symbolic-ref", "--short", "HEAD") == name
    assert _in_workspace(workspace, "rev-parse", "HEAD") == base
    assert not (workspace / "later.txt").exists()
    # One branch, no remote and no upstream: nothing names the scratch dir.
    assert _in_workspace(workspace, "branch", "--format=%(refname)") == (
        f"refs/heads/{name}"
    )
    assert _in_workspace(workspace, "remote") == ""
    config = (workspace / ".git" / "config").read_text()
    assert "remote" not in config and str(scratch.root) not in config


@pytest.mark.parametrize(
    "name", ["HEAD", "-f", "@", "@{-1}", "a..b", "x.lock", "a b", "tab\tx", "é\ud800"]
)
def test_a_name_git_refuses_leaves_the_head_detached(repo, scratch, name):
    workspace = scratch.provision(repo.head(), branch=name)

    assert branch_name(name) is None
    assert scratch.branch is None
    head = (workspace / ".git" / "HEAD").read_text().strip()
    assert head == repo.head()


def test_a_name_the_scratch_refs_cannot_hold_leaves_the_head_detached(repo, scratch):
    # refs/heads/replay-base exists once a replay was provisioned there.
    scratch.create()
    scratch.git("update-ref", "refs/heads/replay-base", repo.head())

    workspace = scratch.provision(repo.head(), branch="replay-base/x")

    assert scratch.branch is None
    assert (workspace / ".git" / "HEAD").read_text().strip() == repo.head()
