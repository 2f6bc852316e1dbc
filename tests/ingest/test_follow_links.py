"""Nothing outside what was named is read: following and importing never
follow a link, and say what they passed over."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from replayhub.models import Project, Run
from tests.ingest.test_follow import follow_once, record, step_file, write
from tests.traces import line


@pytest.fixture
def project(db, tmp_path):
    return Project.objects.create(
        slug="rl",
        repo_path=str(tmp_path),
        rollout_anchor="tool-call",
        harness_command=["python", "harness.py"],
    )


@pytest.fixture
def secret(tmp_path) -> Path:
    """Rollout records outside the followed tree, as a root-only file."""
    outside = tmp_path / "private" / "train_rollouts_secret.jsonl"
    write(outside, line(record(99)))
    outside.chmod(0o600)
    return outside


def test_following_a_tree_never_follows_a_link_out_of_it(project, tmp_path, secret):
    run_dir = tmp_path / "output"
    write(step_file(run_dir, 1), line(record(1)))
    (run_dir / "train_rollouts_stolen.jsonl").symlink_to(secret)
    (run_dir / "linked_dir").symlink_to(secret.parent, target_is_directory=True)
    (run_dir / "train_rollouts_passwd.jsonl").symlink_to("/etc/passwd")

    summary = follow_once(project, run_dir)

    assert Run.objects.count() == 1  # the one real record file
    problems = {
        os.path.basename(p["file"]): p["problem"]
        for p in summary["files"]
        if p.get("problem")
    }
    assert problems == {
        "train_rollouts_stolen.jsonl": "a symbolic link: not followed",
        "linked_dir": "a symbolic link: not followed",
        "train_rollouts_passwd.jsonl": "a symbolic link: not followed",
    }


def test_a_glob_skips_links_and_matches_resolving_out_of_its_directory(
    project, tmp_path, secret
):
    run_dir = tmp_path / "output"
    write(run_dir / "a" / "train_rollouts_env.jsonl", line(record(1)))
    (run_dir / "b").symlink_to(secret.parent, target_is_directory=True)

    summary = follow_once(project, run_dir / "*" / "train_rollouts_*.jsonl")

    assert Run.objects.count() == 1
    assert any("train_rollouts_secret.jsonl" in p["file"] for p in summary["files"])


def test_a_named_file_that_is_a_link_or_a_fifo_is_refused_not_read(project, tmp_path):
    link = tmp_path / "runs.jsonl"
    link.symlink_to("/etc/passwd")
    with pytest.raises(CommandError, match="a symbolic link, not followed"):
        call_command("import_runs", str(link), stdout=io.StringIO())

    fifo = tmp_path / "train_rollouts_fifo.jsonl"
    os.mkfifo(fifo)
    out = io.StringIO()
    with pytest.raises(SystemExit):  # the import is incomplete: exit 1
        call_command(
            "import_runs",
            "--format",
            "verifiers",
            "--project",
            project.slug,
            str(fifo),
            "--json",
            stdout=out,
        )
    result = json.loads(out.getvalue())
    assert result["files"][0]["problem"] == "not a regular file"
