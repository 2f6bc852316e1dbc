"""The host never runs what the agent planted in its workspace (fsmonitor,
hooks, attribute drivers, gitfiles, nested repositories), nor git
configuration from the worker's environment."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from replayhub.git.scratch import (
    compare,
    git,
)
from replayhub.replay.capture import capture_workspace
from tests.git.conftest import ls_tree
from tests.gitrepos import make_repo, write_files

# --- the host never runs what the agent planted ----------------------------------


def evil_script(tmp_path: Path, marker: Path) -> Path:
    """A command that records that it ran, then behaves as a pass-through filter."""
    script = tmp_path / "evil.sh"
    script.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\ncat\n')
    script.chmod(0o755)
    return script


def set_config(config: Path, *pairs: tuple[str, str]) -> None:
    for key, value in pairs:
        subprocess.run(
            ["git", "config", "--file", str(config), key, str(value)], check=True
        )


def install_traps(git_dir: Path, script: Path) -> Path:
    """Fill a git dir with traps: fsmonitor, hooks and drivers all run ``script``."""
    hooks = git_dir / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("post-index-change", "pre-commit", "post-checkout", "reference"):
        shutil.copy(script, hooks / hook)
    set_config(
        git_dir / "config",
        ("core.fsmonitor", script),
        ("filter.evil.clean", script),
        ("filter.evil.smudge", script),
        ("diff.evil.command", script),
        ("diff.evil.textconv", script),
    )
    return git_dir


def attacker_git_dir(tmp_path: Path, script: Path) -> Path:
    """A repository outside the workspace, with a commit, made by the agent."""
    return install_traps(make_repo(tmp_path, name="attacker").git_dir, script)


def plant_fsmonitor(workspace, script, tmp_path):
    set_config(workspace / ".git/config", ("core.fsmonitor", script))
    return ["status"]


def plant_hooks_path(workspace, script, tmp_path):
    hooks = tmp_path / "agent-hooks"
    hooks.mkdir()
    shutil.copy(script, hooks / "post-index-change")
    set_config(workspace / ".git/config", ("core.hooksPath", hooks))
    return ["add", "--all"]


def plant_post_index_change_hook(workspace, script, tmp_path):
    hooks = workspace / ".git/hooks"
    hooks.mkdir(exist_ok=True)
    shutil.copy(script, hooks / "post-index-change")
    return ["add", "--all"]


def plant_attribute_drivers(workspace, script, tmp_path):
    (workspace / ".gitattributes").write_text("* filter=evil diff=evil\n")
    set_config(
        workspace / ".git/config",
        ("filter.evil.clean", script),
        ("filter.evil.smudge", script),
        ("filter.evil.required", "true"),
        ("diff.evil.command", script),
        ("diff.evil.textconv", script),
        ("diff.external", script),
    )
    return ["add", "--all"]


def plant_gitfile(workspace, script, tmp_path):
    shutil.rmtree(workspace / ".git")
    attacker = attacker_git_dir(tmp_path, script)
    (workspace / ".git").write_text(f"gitdir: {attacker}\n")
    (workspace / ".gitattributes").write_text("* filter=evil diff=evil\n")
    return ["status"]


def plant_nested_repository(workspace, script, tmp_path):
    nested = make_repo(workspace, {"inner.txt": "inner\n"}, name="vendor/lib")
    install_traps(nested.git_dir, script)
    (nested.path / "inner.txt").write_text("changed\n")
    return ["-C", "vendor/lib", "status"]


def plant_nested_gitfile(workspace, script, tmp_path):
    attacker = attacker_git_dir(tmp_path, script)
    (workspace / "sub").mkdir()
    (workspace / "sub/.git").write_text(f"gitdir: {attacker}\n")
    (workspace / "sub/file.txt").write_text("x\n")
    return ["-C", "sub", "status"]


ATTACKS = [
    plant_fsmonitor,
    plant_hooks_path,
    plant_post_index_change_hook,
    plant_attribute_drivers,
    plant_gitfile,
    plant_nested_repository,
    plant_nested_gitfile,
]


@pytest.mark.parametrize("plant", ATTACKS, ids=lambda plant: plant.__name__)
def test_nothing_planted_in_the_workspace_runs_on_the_host(
    plant, repo, scratch, tmp_path
):
    marker = tmp_path / "host-marker"
    script = evil_script(tmp_path, marker)
    base = repo.head()
    original = repo.commit({"src/app.py": "original\n"}, "original", branch="a")
    workspace = scratch.provision(base)
    write_files(workspace, {"src/app.py": "replayed\n"})
    naive_command = plant(workspace, script, tmp_path)

    tree = capture_workspace(scratch, workspace).tree
    compare(scratch, base=base, original_commit=original, replay_tree=tree)
    scratch.checkout_tree(tree, tmp_path / "gate")

    assert not marker.exists()
    # The same trap does fire for git run the ordinary way inside the workspace,
    # so the assertion above is not vacuous.
    home = tmp_path / "home"
    home.mkdir()
    subprocess.run(
        ["git", *naive_command],
        cwd=workspace,
        env={"PATH": os.environ["PATH"], "HOME": str(home)},
        capture_output=True,
        check=False,
    )
    assert marker.exists()


def test_a_nested_repository_without_commits_is_captured_harmlessly(
    repo, scratch, tmp_path
):
    marker = tmp_path / "host-marker"
    script = evil_script(tmp_path, marker)
    workspace = scratch.provision(repo.head())
    git("init", "--quiet", "--template=", str(workspace / "empty"))
    install_traps(workspace / "empty" / ".git", script)
    (workspace / "empty" / "file.txt").write_text("x\n")

    captured = capture_workspace(scratch, workspace)

    assert ls_tree(scratch, captured.tree)["empty/file.txt"] == ("100644", "x\n")
    assert captured.nested_repositories == ["empty"]
    assert not marker.exists()


def test_git_configuration_from_the_workers_environment_is_ignored(
    repo, scratch, tmp_path, monkeypatch
):
    marker = tmp_path / "host-marker"
    script = evil_script(tmp_path, marker)
    home = tmp_path / "home"
    home.mkdir()
    evil_config = home / ".gitconfig"
    set_config(
        evil_config,
        ("core.fsmonitor", script),
        ("core.hooksPath", tmp_path / "hooks"),
        ("filter.evil.clean", script),
        ("filter.evil.smudge", script),
        ("diff.evil.command", script),
        ("diff.external", script),
    )
    (tmp_path / "hooks").mkdir()
    shutil.copy(script, tmp_path / "hooks" / "post-index-change")
    hostile_env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home),
        "GIT_CONFIG_GLOBAL": str(evil_config),
        "GIT_CONFIG_SYSTEM": str(evil_config),
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.fsmonitor",
        "GIT_CONFIG_VALUE_0": str(script),
        "GIT_EXTERNAL_DIFF": str(script),
        "GIT_DIR": str(tmp_path / "nowhere"),
    }
    for key, value in hostile_env.items():
        monkeypatch.setenv(key, value)
    base = repo.head()
    original = repo.commit({"src/app.py": "original\n"}, "original", branch="a")
    workspace = scratch.provision(base)
    write_files(
        workspace,
        {".gitattributes": "* filter=evil diff=evil\n", "src/app.py": "replayed\n"},
    )

    tree = capture_workspace(scratch, workspace).tree
    comparison = compare(scratch, base=base, original_commit=original, replay_tree=tree)
    dest = scratch.checkout_tree(tree, tmp_path / "gate")

    assert not marker.exists()
    assert "+replayed" in comparison.diff_of_diffs
    assert (dest / "src/app.py").read_text() == "replayed\n"
    monkeypatch.delenv("GIT_DIR")
    subprocess.run(["git", "add", "--all"], cwd=workspace, check=False)
    assert marker.exists()
