"""Registering a project of rollouts from the command line: its harness,
verifier and anchors, and the settings its rollout mode would ignore."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from replayhub.models import Project


def test_a_project_of_rollouts_takes_its_settings_and_needs_no_agent(db, repo):
    call_command(
        "project_add",
        "rl",
        "--repo",
        str(repo),
        "--harness-command",
        "python harness.py --env 'invoicer env'",
        "--rollout-mode",
        "continue",
        "--anchor",
        "tool-call",
        "--max-anchors",
        "3",
        "--min-source-reward",
        "0",
        "--max-source-reward",
        "0.5",
        "--pass-threshold",
        "0.8",
    )
    project = Project.objects.get(slug="rl")
    assert project.harness_command == ["python", "harness.py", "--env", "invoicer env"]
    assert project.agent_command == [] and project.test_command == []
    assert (project.rollout_mode, project.rollout_anchor) == ("continue", "tool-call")
    assert project.max_anchors == 3
    assert (project.min_source_reward, project.max_source_reward) == (0.0, 0.5)
    assert project.pass_threshold == 0.8
    assert project.verification_turn.startswith("Carefully check your work")


def test_a_separate_verifier_is_an_argument_list_and_its_absence_is_warned(db, repo):
    err = StringIO()
    call_command(
        "project_add",
        "rl",
        "--repo",
        str(repo),
        "--harness-command",
        "./harness",
        stdout=StringIO(),
        stderr=err,
    )
    assert "rl has a rollout harness but no separate verifier" in err.getvalue()

    err = StringIO()
    call_command(
        "project_add",
        "rl2",
        "--repo",
        str(repo),
        "--harness-command",
        "./harness",
        "--verifier-command",
        "python score.py --strict 'a b'",
        stdout=StringIO(),
        stderr=err,
    )
    project = Project.objects.get(slug="rl2")
    assert project.verifier_command == ["python", "score.py", "--strict", "a b"]
    assert err.getvalue() == ""


def test_a_verifier_command_must_be_an_argument_list(db, repo):
    project = Project.objects.create(
        slug="rl", repo_path=str(repo), verifier_command="python score.py"
    )
    with pytest.raises(ValidationError) as refused:
        project.full_clean()
    assert "verifier_command" in refused.value.message_dict


def test_every_anchor_is_asked_for_with_all(db, repo):
    call_command(
        "project_add",
        "rl",
        "--repo",
        str(repo),
        "--harness-command",
        "./harness",
        "--anchor",
        "tool-call",
        "--max-anchors",
        "all",
    )
    assert Project.objects.get().max_anchors is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--max-anchors", "0"], "--max-anchors: draw at least one anchor."),
        (["--max-anchors", "two"], "--max-anchors takes a positive number"),
        (["--rollout-seed", str(2**31)], "--rollout-seed: at most 2,147,483,647."),
        (["--verification-turn", " "], "--verification-turn: the verification turn"),
        (
            ["--min-source-reward", "1", "--max-source-reward", "0"],
            "minimum source reward is above the maximum",
        ),
        (["--harness-command", ""], "--harness-command is empty"),
        ([], "--test-command is required"),
    ],
)
def test_bad_rollout_settings_are_refused(db, repo, extra, message):
    args = ["rl", "--repo", str(repo), *extra]
    if "--harness-command" not in extra and extra:
        args += ["--harness-command", "./harness"]
    with pytest.raises(CommandError, match=message) as info:
        call_command("project_add", *args)
    assert info.value.returncode == 2
    assert not Project.objects.exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--rollout-mode", "recheck", "--anchor", "tool-call"],
            "--anchor: only continue seeds have anchors; recheck has none.",
        ),
        (
            ["--rollout-mode", "recheck", "--max-anchors", "2"],
            "--max-anchors: only continue seeds have anchors; recheck has none.",
        ),
        (
            ["--max-anchors", "2"],
            "--max-anchors: only tool-call anchors are drawn; the project "
            "continues at compaction anchors (give --anchor tool-call).",
        ),
        (
            ["--anchor", "compaction", "--rollout-seed", "7"],
            "--rollout-seed: only tool-call anchors are drawn",
        ),
    ],
)
def test_a_setting_the_rollout_mode_would_ignore_is_refused(db, repo, extra, message):
    args = ["rl", "--repo", str(repo), "--harness-command", "./harness", *extra]
    with pytest.raises(CommandError) as info:
        call_command("project_add", *args)
    assert info.value.returncode == 2
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)
    assert not Project.objects.exists()


def test_an_edit_away_from_tool_calls_keeps_the_stored_draw(db, repo):
    call_command(
        "project_add", "rl", "--repo", str(repo), "--harness-command", "./harness",
        "--anchor", "tool-call", "--max-anchors", "2",
    )  # fmt: skip
    call_command("project_edit", "rl", "--rollout-mode", "recheck")
    project = Project.objects.get()
    assert (project.rollout_mode, project.max_anchors) == ("recheck", 2)
    with pytest.raises(CommandError, match="--max-anchors: only continue seeds"):
        call_command("project_edit", "rl", "--max-anchors", "3")
