"""The agents' own files: which paths they are, and trees read without them."""

from __future__ import annotations

from pathlib import Path

import pytest

from replayhub.git.agentfiles import at_base, left_out
from replayhub.git.scratch import Scratch
from replayhub.models.projects import DEFAULT_IGNORED_PATHS
from replayhub.replay.capture import capture_workspace
from tests.gitrepos import make_repo, write_files

DEFAULTS = list(DEFAULT_IGNORED_PATHS)


@pytest.mark.parametrize(
    "path",
    [
        ".aider.chat.history.md",
        ".aider.input.history",
        ".aider.tags.cache.v3/cache.db",
        ".claude/settings.local.json",
        ".codex/sessions/a.jsonl",
        ".openhands/state.json",
        ".openhands-state/events/1.json",
        ".cursor/rules/x.mdc",
        ".continue/config.json",
        "trajectories/me/run.traj",
    ],
)
def test_the_default_globs_name_what_the_common_agents_leave(path):
    assert left_out(path, DEFAULTS)


@pytest.mark.parametrize(
    "path",
    [
        "aider.py",
        "src/.aider.chat.history.md",
        "docs/claude/x.md",
        ".claude",
        "CLAUDE.md",
    ],
)
def test_the_default_globs_leave_the_projects_own_files_alone(path):
    assert not left_out(path, DEFAULTS)


def test_a_test_path_is_never_left_out():
    assert left_out("tests/notes.md", ["tests/**"])
    assert not left_out("tests/test_app.py", ["tests/**"], kept=["**/test_*.py"])
    assert not left_out("anything", [])


@pytest.fixture
def repo(tmp_path: Path):
    return make_repo(
        tmp_path,
        {"app.py": "x = 1\n", ".aider.chat.history.md": "base chat\n"},
    )


@pytest.fixture
def scratch(tmp_path: Path, repo):
    scratch = Scratch(tmp_path / "replay", repo.path)
    yield scratch
    scratch.remove()


def files_of(scratch: Scratch, tree: str) -> dict[str, str]:
    out = scratch.git("ls-tree", "-r", "-z", tree).stdout.decode()
    entries = {}
    for line in filter(None, out.split("\0")):
        meta, path = line.split("\t", 1)
        entries[path] = scratch.git("cat-file", "blob", meta.split()[2]).stdout.decode()
    return entries


def test_a_tree_gets_the_bases_agent_files_back_and_loses_its_own(repo, scratch):
    base = repo.head()
    changed = repo.commit(
        {
            "app.py": "x = 2\n",
            ".aider.chat.history.md": "another chat\n",
            ".claude/settings.local.json": "{}\n",
        },
        "a change and its chat",
    )

    result = at_base(scratch, tree=changed, base=base, ignored=DEFAULTS)

    assert files_of(scratch, result.tree) == {
        "app.py": "x = 2\n",
        ".aider.chat.history.md": "base chat\n",
    }
    assert result.paths == [".aider.chat.history.md", ".claude/settings.local.json"]


def test_a_deleted_agent_file_is_restored_and_a_tree_without_any_is_unchanged(
    repo, scratch
):
    base = repo.head()
    deleted = repo.commit({".aider.chat.history.md": None}, "chat removed")
    plain = repo.commit({".aider.chat.history.md": "base chat\n", "app.py": "y\n"})

    restored = at_base(scratch, tree=deleted, base=base, ignored=DEFAULTS)
    untouched = at_base(scratch, tree=plain, base=base, ignored=DEFAULTS)

    assert restored.tree == repo.tree(base)
    assert restored.paths == [".aider.chat.history.md"]
    assert (untouched.tree, untouched.paths) == (repo.tree(plain), [])
    assert at_base(scratch, tree=deleted, base=base, ignored=[]).paths == []


def test_a_directory_of_agent_files_where_the_base_has_a_file(tmp_path, scratch, repo):
    base = repo.commit({".aider": "a file at the base\n"}, "a file named .aider")
    grown = repo.commit({".aider": None, ".aider/cache.db": "tags\n"}, "a directory")

    result = at_base(scratch, tree=grown, base=base, ignored=[".aider", ".aider/**"])

    assert result.tree == repo.tree(base)
    assert result.paths == [".aider", ".aider/cache.db"]


def test_capture_leaves_untracked_agent_files_unread(repo, scratch):
    workspace = scratch.provision(repo.head())
    write_files(
        workspace,
        {
            "app.py": "x = 3\n",
            ".aider.input.history": "typed\n",
            ".codex/log.jsonl": "{}\n",
            "tests/.aider.notes": "a test path\n",
        },
    )

    captured = capture_workspace(
        scratch,
        workspace,
        ignored=[*DEFAULTS, "tests/.aider*"],
        kept=["tests/**"],
    )

    stored = files_of(scratch, captured.tree)
    assert set(stored) == {"app.py", ".aider.chat.history.md", "tests/.aider.notes"}
    assert captured.left_out == [".aider.input.history", ".codex/log.jsonl"]
    assert captured.left_out_count == 2
