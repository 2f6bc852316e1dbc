"""Changing a project from the command line: only what is given, audited."""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from replayhub.management.commands import project_add, project_edit
from replayhub.models import Project
from replayhub.models.project_settings import SETTINGS
from reviews.models import AuditEvent
from tests.conftest import ROOT, child_env


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


@pytest.fixture
def shop(db, repo):
    call_command(
        "project_add",
        "shop",
        "--repo",
        str(repo),
        "--test-command",
        "python -m pytest -q",
        "--agent-command",
        "sh -c 'claude -p \"$(cat $REPLAYHUB_PROMPT_FILE)\"'",
        "--allowed-paths",
        "src/**",
        stdout=StringIO(),
    )
    return Project.objects.get(slug="shop")


def edit(*args: str) -> str:
    out = StringIO()
    call_command("project_edit", "shop", *args, stdout=out)
    return out.getvalue()


def test_only_the_options_given_change_and_each_change_is_printed(shop):
    printed = edit("--time-limit", "900", "--max-tokens", "200000")

    assert printed.splitlines() == [
        "time_limit_seconds: 600 -> 900",
        "max_tokens: none -> 200000",
    ]
    project = Project.objects.get(slug="shop")
    assert (project.time_limit_seconds, project.max_tokens) == (900, 200000)
    # The rest is as it was, the agent's quoted command word for word.
    assert project.agent_command == shop.agent_command
    assert project.allowed_paths == ["src/**"]
    assert project.memory_limit_mb == shop.memory_limit_mb


def test_an_edit_is_audited_the_way_the_project_forms_is(shop):
    edit("--max-cost-usd", "2.5", "--ignored-paths", ".aider*", ".claude/**")

    event = AuditEvent.objects.get(action="project.update")
    assert (event.object_type, event.object_id) == ("project", str(shop.pk))
    assert event.actor is None
    assert event.before == {
        "max_cost_usd": None,
        "ignored_paths": list(shop.ignored_paths),
    }
    assert event.after == {
        "max_cost_usd": "2.5000",
        "ignored_paths": [".aider*", ".claude/**"],
    }


def test_every_cap_setup_limit_and_the_runner_can_be_changed(shop):
    given = {
        "--time-limit": "1200",
        "--test-time-limit": "300",
        "--memory-mb": "4096",
        "--max-processes": "512",
        "--max-output-bytes": "2097152",
        "--max-requests": "40",
        "--max-tokens": "500000",
        "--max-turns": "30",
        "--max-cost-usd": "3",
        "--max-disk-mb": "1024",
        "--max-files": "50000",
        "--cap-grace": "5",
        "--flake-reruns": "1",
        "--evidence-floor": "3",
        "--max-attempts": "2",
        "--setup-time-limit": "900",
        "--setup-memory-mb": "8192",
        "--setup-max-disk-mb": "8192",
        "--setup-max-files": "300000",
        "--runner": "docker",
    }
    assert set(given) | {"--ignored-paths"} == {s.option for s in SETTINGS}

    edit(*[word for pair in given.items() for word in pair])

    project = Project.objects.get(slug="shop")
    for setting in SETTINGS:
        if setting.option in given:
            value = getattr(project, setting.field)
            expected = given[setting.option]
            if isinstance(value, Decimal):
                assert value == Decimal(expected)
            else:
                assert str(value) == expected, setting.option


def test_none_empties_an_optional_cap_and_an_empty_list_empties_globs(shop):
    edit("--max-tokens", "5000", "--test-time-limit", "60")

    printed = edit(
        "--max-tokens", "none", "--test-time-limit", "none", "--ignored-paths"
    )

    project = Project.objects.get(slug="shop")
    assert (project.max_tokens, project.test_time_limit_seconds) == (None, None)
    assert project.ignored_paths == []
    assert "max_tokens: 5000 -> none" in printed


def test_commands_lists_and_switches_are_edited_too(shop, repo):
    edit(
        "--agent-command",
        "aider --yes-always --message-file /replayhub/prompt.txt",
        "--egress-agent",
        "pypi.org:443",
        "--allow-test-interference",
        "--setup-command",
        "sh setup.sh",
    )
    project = Project.objects.get(slug="shop")
    assert project.agent_command[:2] == ["aider", "--yes-always"]
    assert project.egress_agent == ["pypi.org:443"]
    assert project.allow_test_interference
    assert project.setup_command == ["sh", "setup.sh"]

    edit("--no-allow-test-interference", "--setup-command", "")

    project.refresh_from_db()
    assert not project.allow_test_interference
    assert project.setup_command == []


def test_nothing_to_change_says_so_and_records_nothing(shop):
    assert edit("--time-limit", "600") == "shop: nothing changed\n"
    assert not AuditEvent.objects.filter(action="project.update").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--time-limit", "0"], "--time-limit: at least 1 s."),
        (["--time-limit", "ten"], "--time-limit: 'ten' is not a whole number."),
        (
            ["--max-tokens", "lots"],
            "--max-tokens: 'lots' is not a whole number or none",
        ),
        (["--memory-mb", "16"], "--memory-mb: at least 64 MiB."),
        (["--max-cost-usd", "-1"], "--max-cost-usd: cannot be negative."),
        (["--max-cost-usd", "NaN"], "--max-cost-usd: 'NaN' is not an amount."),
        (["--ignored-paths", "[z-a]"], "--ignored-paths: '[z-a]' is not a valid glob"),
        (["--test-command", "pytest 'unclosed"], "cannot split"),
        (["--repo", "/nowhere/at/all"], "is not a git repository"),
        (["--repo", "/" + "b" * 300], "is not a git repository"),
        (["--repo", "~no-such-user-here/repo"], "is not a git repository"),
        (["--root-image", "python:3.12"], "not pinned by digest"),
        (["--max-anchors", "0"], "--max-anchors: draw at least one anchor."),
        (["--max-anchors", "x"], "--max-anchors takes a positive number"),
        (["--pass-threshold", "nan"], "--pass-threshold: give a finite number."),
    ],
)
def test_a_bad_value_is_refused_and_nothing_changes(shop, args, message):
    with pytest.raises(CommandError, match=message.replace("[", r"\[")) as refused:
        edit("--time-limit", "900", *args)

    assert refused.value.returncode == 2
    project = Project.objects.get(slug="shop")
    assert project.time_limit_seconds == 600
    assert not AuditEvent.objects.exists()


def test_an_unknown_project_or_no_option_is_refused(shop):
    with pytest.raises(CommandError, match="there is no project 'nope'"):
        call_command("project_edit", "nope", "--time-limit", "5")
    with pytest.raises(CommandError, match="give at least one option"):
        call_command("project_edit", "shop")


def test_the_command_line_refuses_in_one_line_with_exit_code_2(transactional_db, shop):
    result = subprocess.run(
        [sys.executable, "manage.py", "project_edit", "shop", "--max-files", "9"],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "--max-files: at least 100 files." in result.stderr
    assert Project.objects.get(slug="shop").max_files == 200_000


def test_both_commands_take_the_same_options():
    def options(command) -> set[str]:
        parser = command.Command().create_parser("manage.py", "x")
        return {o for action in parser._actions for o in action.option_strings}

    add, edit_ = options(project_add), options(project_edit)
    assert add == edit_
    assert {s.option for s in SETTINGS} <= add


def test_replicates_are_set_and_turned_off_from_the_command_line(shop):
    out = StringIO()
    call_command("project_edit", "shop", "--replicates", "0.7,0.95,12", stdout=out)

    budget = Project.objects.get(slug="shop").budget
    policy = budget.replicate_policy()
    assert policy is not None
    assert (policy.threshold, policy.confidence, policy.most, policy.margin) == (
        0.7,
        0.95,
        12,
        0.15,
    )
    assert "replicate_threshold: none -> 0.7" in out.getvalue()
    event = AuditEvent.objects.get(action="budget.update")
    assert event.after["budget"]["replicate_most"] == 12

    call_command("project_edit", "shop", "--replicates", "off", stdout=StringIO())
    budget.refresh_from_db()
    assert budget.replicate_policy() is None
    assert budget.replicate_most == 12  # kept for when they are on again


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("0.8,0.9", "give P0,CONFIDENCE,K"),
        ("0.95,0.9,10", "the zone must lie strictly between 0 and 1"),
        ("0.8,0.9,80", "most replicates 80: 1 to 50"),
        ("0.8,high,10", "could not convert"),
    ],
)
def test_a_bad_replicate_policy_is_refused_in_one_line(shop, given, said):
    with pytest.raises(CommandError, match=said):
        call_command("project_edit", "shop", "--replicates", given, stdout=StringIO())
    assert not AuditEvent.objects.filter(action="budget.update").exists()
