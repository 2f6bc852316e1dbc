"""A project names an agent profile from the command line and the project
form: no agent command then, and never both."""

from __future__ import annotations

import subprocess
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from replayhub.models import Project, Provider
from tests.reviews.views.test_project_page import form


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


@pytest.fixture
def providers(db):
    for kind in ("anthropic", "openai"):
        Provider.objects.create(
            name=kind, kind=kind, base_url=f"https://{kind}.test", key_env="KEY"
        )


def add(repo, *extra):
    call_command(
        "project_add",
        "shop",
        "--repo",
        str(repo),
        "--test-command",
        "python -m pytest -q",
        *extra,
        stdout=StringIO(),
    )
    return Project.objects.get(slug="shop")


def refused(command, *args) -> str:
    with pytest.raises(CommandError) as caught:
        call_command(command, *args, stdout=StringIO(), stderr=StringIO())
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_project_with_a_profile_needs_no_agent_command(repo, providers):
    shop = add(repo, "--agent", "claude-code", "--providers", "anthropic")
    assert (shop.agent, shop.agent_version, shop.agent_command) == (
        "claude-code",
        "",
        [],
    )
    assert shop.agent_profile is not None
    assert shop.agent_profile.title == "Claude Code"


def test_a_profile_and_an_agent_command_at_once_is_a_one_line_refusal(repo, providers):
    message = refused(
        "project_add",
        "shop",
        "--repo",
        str(repo),
        "--test-command",
        "pytest",
        "--providers",
        "openai",
        "--agent",
        "codex",
        "--agent-command",
        "sh agent.sh",
    )
    assert message == (
        "--agent-command: the project runs the codex profile (--agent codex); "
        "give one or the other, not both."
    )
    assert not Project.objects.exists()


def test_a_custom_project_still_needs_its_agent_command(repo, providers):
    message = refused(
        "project_add", "shop", "--repo", str(repo), "--test-command", "pytest"
    )
    assert message.startswith("--agent-command is required")


def test_a_profile_needs_a_provider_that_speaks_its_wire(repo, providers):
    message = refused(
        "project_add",
        "shop",
        "--repo",
        str(repo),
        "--test-command",
        "pytest",
        "--agent",
        "codex",
        "--providers",
        "anthropic",
    )
    assert message == (
        "--agent codex: Codex CLI calls the OpenAI Responses API; name an openai "
        "provider in --providers."
    )


def test_gemini_cli_needs_a_gemini_provider(repo, providers):
    message = refused(
        "project_add",
        "shop",
        "--repo",
        str(repo),
        "--test-command",
        "pytest",
        "--agent",
        "gemini-cli",
        "--providers",
        "openai",
    )
    assert message == (
        "--agent gemini-cli: Gemini CLI calls Gemini's generateContent API; name "
        "a gemini provider in --providers."
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--agent", "cursor"], "argument --agent: invalid choice: 'cursor'"),
        (
            ["--agent", "aider", "--agent-version", "latest"],
            "--agent-version: 'latest' is not an exact version (such as 2.1.197).",
        ),
        (
            ["--agent-version", "1.0.0", "--agent-command", "sh a.sh"],
            "--agent-version is for an agent profile (give --agent NAME).",
        ),
    ],
)
def test_a_bad_agent_or_version_is_refused_in_one_line(repo, providers, args, expected):
    message = refused(
        "project_add",
        "shop",
        "--repo",
        str(repo),
        "--test-command",
        "pytest",
        "--providers",
        "openai",
        *args,
    )
    assert expected in message


def test_editing_to_a_profile_replaces_the_command_and_back_needs_one(repo, providers):
    shop = add(repo, "--agent-command", "sh agent.sh", "--providers", "openai")
    call_command(
        "project_edit",
        "shop",
        "--agent",
        "aider",
        "--agent-version",
        "0.86.1",
        stdout=StringIO(),
    )
    shop.refresh_from_db()
    assert (shop.agent, shop.agent_version, shop.agent_command) == (
        "aider",
        "0.86.1",
        [],
    )
    # Another profile: its own pinned version unless one is given.
    call_command("project_edit", "shop", "--agent", "mini-swe-agent", stdout=StringIO())
    shop.refresh_from_db()
    assert (shop.agent, shop.agent_version) == ("mini-swe-agent", "")
    call_command("project_edit", "shop", "--agent-version", "2.4.5", stdout=StringIO())
    message = refused("project_edit", "shop", "--agent", "custom")
    assert message.startswith("--agent-command is required")
    call_command(
        "project_edit",
        "shop",
        "--agent",
        "custom",
        "--agent-command",
        "sh agent.sh",
        stdout=StringIO(),
    )
    shop.refresh_from_db()
    assert (shop.agent, shop.agent_version, shop.agent_command) == (
        "custom",
        "",
        ["sh", "agent.sh"],
    )


def test_the_project_form_registers_a_profile_and_refuses_both_beside_the_field(
    client, admin_user, repo, providers
):
    client.force_login(admin_user)
    page = client.get(reverse("reviews:project_create"))
    assert b"Codex CLI (@openai/codex 0.171.0)" in page.content
    both = client.post(
        reverse("reviews:project_create"),
        form(repo, agent="codex", providers=["openai"]),
    )
    assert both.status_code == 400
    errors = both.context["form"].errors
    assert errors["agent_command"] == [
        "The codex profile runs the agent: leave this empty, or choose custom."
    ]
    made = client.post(
        reverse("reviews:project_create"),
        form(
            repo,
            agent="codex",
            agent_version="0.171.0",
            agent_command="",
            providers=["openai"],
        ),
    )
    assert made.status_code == 302
    cart = Project.objects.get(slug="cart")
    assert (cart.agent, cart.agent_version, cart.agent_command) == (
        "codex",
        "0.171.0",
        [],
    )
    edit = client.get(reverse("reviews:project_edit", args=["cart"]))
    assert edit.context["form"].initial["agent"] == "codex"
    listing = client.get(reverse("reviews:projects"))
    assert b"Codex CLI 0.171.0" in listing.content
