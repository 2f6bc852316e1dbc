"""Nothing an agent leaves in its checkout steers or breaks the capture.

Each agent here runs in the real sandbox and leaves something git trips on:
a ``.GIT`` directory, a conversion it cannot apply, nested repositories, one
whose ``HEAD`` is a link to a file only root may read. Each replay ends with a
verdict naming the agent's doing, and no host secret reaches the stored diff.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from replayhub import services
from replayhub.git.scratch import Scratch
from replayhub.models import Replay
from replayhub.replay.capture import capture_workspace
from tests.factories import make_calc_project, make_calc_run
from tests.gitrepos import make_repo

pytestmark = pytest.mark.django_db

AGENT_FAULTS = {"harness_error", "worker_lost"}
GOOD = "def add(a, b):\n    return a + b\n"
WRITE_GOOD = "printf 'def add(a, b):\\n    return a + b\\n' > calc.py\n"


def hostile_replay(repo, base, original, script: str, **project_fields) -> Replay:
    project = make_calc_project(
        repo, agent_command=["sh", "-c", WRITE_GOOD + script], **project_fields
    )
    run = make_calc_run(project, prompt="hostile", original=original, base=base)
    replay = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=replay.pk)
    return Replay.objects.get(pk=replay.pk)


def assert_ended_by_the_agent(result: Replay) -> None:
    assert result.status == "finished"
    assert result.reason_code not in AGENT_FAULTS, result.reason
    assert not (Path(settings.REPLAYHUB_WORK_DIR) / f"replay-{result.pk}").exists()


def test_a_dot_git_directory_in_capitals_is_skipped_and_named(
    calc_repo, calc_base, calc_good, client, reviewer
):
    result = hostile_replay(
        calc_repo,
        calc_base,
        calc_good,
        "mkdir .GIT && printf '[core]\\n\\tbare = true\\n' > .GIT/config",
        allowed_paths=[],
    )

    assert_ended_by_the_agent(result)
    assert (result.verdict, result.reason_code) == ("inconclusive", "unstorable_paths")
    assert ".GIT/config" in result.reason
    assert result.evidence["unstorable_paths"] == [".GIT/config"]
    client.force_login(reviewer)
    page = client.get(reverse("reviews:replay_detail", args=[result.pk])).content
    assert b"Left paths git cannot store (1): <code" in page
    assert b"isolated by <code>bwrap</code> (<code>bwrap</code>)" in page
    assert b"memory and processes capped by <code>" in page


def test_a_path_git_refuses_outside_the_allowed_paths_is_divergent(
    calc_repo, calc_base, calc_good
):
    result = hostile_replay(
        calc_repo, calc_base, calc_good, "mkdir .GIT && echo x > .GIT/config"
    )

    assert (result.verdict, result.reason_code) == ("divergent", "disallowed_paths")
    assert ".GIT/config" in result.reason


def test_a_conversion_the_agent_asks_for_is_not_applied(
    calc_repo, calc_base, calc_good
):
    # No byte-order mark, and not UTF-16: git would fail to convert it.
    result = hostile_replay(
        calc_repo,
        calc_base,
        calc_good,
        "echo 'calc.py working-tree-encoding=UTF-16' > .gitattributes",
        allowed_paths=[],
    )

    assert_ended_by_the_agent(result)
    assert (result.verdict, result.reason_code) == ("equivalent", "tests_agree")
    patch = result.comparison.replay_patch
    assert "+    return a + b" in patch
    assert "working-tree-encoding" in patch


def test_an_empty_nested_repository_is_stored_as_a_plain_directory(
    calc_repo, calc_base, calc_good
):
    result = hostile_replay(
        calc_repo,
        calc_base,
        calc_good,
        "git init -q vendor && echo kept > vendor/notes.txt",
        allowed_paths=[],
    )

    assert_ended_by_the_agent(result)
    assert result.evidence["nested_repositories"] == ["vendor"]
    assert "vendor/notes.txt" in result.comparison.replay_paths
    assert not any(".git" in p for p in result.comparison.replay_paths)


@pytest.fixture
def root_only_secret():
    """A file only root may read, holding what git would take for a commit id."""
    directory = Path(tempfile.mkdtemp(prefix="replayhub-secret-", dir="/tmp"))
    directory.chmod(0o755)
    secret = directory / "secret"
    value = secrets.token_hex(20)
    secret.write_text(value + "\n")
    secret.chmod(0o600)
    yield secret, value
    secret.unlink()
    directory.rmdir()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a root worker")
def test_a_nested_repository_linking_to_a_root_only_file_leaks_nothing(
    calc_repo, calc_base, calc_good, root_only_secret
):
    secret, value = root_only_secret
    script = (
        "mkdir -p vendor/.git/objects vendor/.git/refs/heads vendor/lib\n"
        f"ln -s {secret} vendor/.git/HEAD\n"
        f"ln -s {secret} vendor/.git/refs/heads/main\n"
        "echo 'gitdir: sub' > vendor/lib/.git\n"
        "echo kept > vendor/lib/code.py\n"
    )
    result = hostile_replay(calc_repo, calc_base, calc_good, script, allowed_paths=[])

    assert_ended_by_the_agent(result)
    comparison = result.comparison
    stored = " ".join(
        [comparison.replay_patch, comparison.diff_of_diffs, str(result.evidence)]
    )
    assert value not in stored
    assert "Subproject commit" not in stored
    assert "vendor/lib/code.py" in comparison.replay_paths
    assert result.evidence["nested_repositories"] == ["vendor", "vendor/lib"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a root worker")
def test_capture_reads_the_workspace_as_the_sandbox_user(tmp_path):
    project = make_repo(tmp_path, {"README.md": "readme\n"})
    root = Path(tempfile.mkdtemp(prefix="replayhub-capture-", dir="/tmp"))
    try:
        root.chmod(0o755)
        scratch = Scratch(root / "replay", project.path)
        workspace = scratch.provision(project.head())
        (workspace / "mine.txt").write_text("written by the agent\n")
        (workspace / "locked.txt").write_text("unreadable to its owner\n")
        (workspace / "locked.txt").chmod(0)
        os.chown(workspace, 65534, 65534)
        for path in workspace.rglob("*"):
            os.lchown(path, 65534, 65534)

        captured = capture_workspace(scratch, workspace, user=(65534, 65534))

        objects = root / "replay" / "capture" / "objects"
        written = [p for p in objects.rglob("*") if p.is_file()]
        assert written and all(p.stat().st_uid == 65534 for p in written)
        assert captured.unstorable == []
        listed = scratch.git("ls-tree", "-r", "--name-only", captured.tree).stdout
        assert listed.split() == [b"README.md", b"locked.txt", b"mine.txt"]
    finally:
        scratch.remove()
        root.rmdir()
