"""A repository's credential comes only from a variable the operator allows,
and a remote is asked nothing until every other value of the project passed.

Each remote here is a real git server on 127.0.0.1 that notes every request
it gets and the password it carried: a refused registration, by the command
or the browser form, must leave it with none.
"""

from __future__ import annotations

import base64
import uuid

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from replayhub.models import Project, Provider
from replayhub.models.project_settings import SETTINGS
from tests.gitrepos import make_repo
from tests.gitservers import HttpGitServer

SECRET = "tok-" + uuid.uuid4().hex
PROVIDER_KEY = "sk-" + uuid.uuid4().hex


@pytest.fixture
def server(tmp_path, monkeypatch):
    """A private repository behind a password, and the variables a worker or
    web host holds: a repository token, a provider's key, the secret key."""
    make_repo(tmp_path / "served", {"app.py": "VALUE = 1\n"}, name="app")
    monkeypatch.setenv("REPLAYHUB_REPO_TOKEN_APP", SECRET)
    monkeypatch.setenv("ANTHROPIC_PROVIDER_KEY", PROVIDER_KEY)
    monkeypatch.setenv("SECRET_KEY", PROVIDER_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", PROVIDER_KEY)
    with HttpGitServer(tmp_path / "served", password=SECRET) as served:
        yield served


@pytest.fixture
def anthropic(db):
    return Provider.objects.create(
        name="anthropic",
        kind="anthropic",
        base_url="https://api.anthropic.example",
        key_env="ANTHROPIC_PROVIDER_KEY",
    )


def passwords(server: HttpGitServer) -> list[str]:
    """The password of each request the server got (empty when none)."""
    found = []
    for _, _, auth in server.requests:
        encoded = auth.partition(" ")[2]
        found.append(base64.b64decode(encoded).decode().partition(":")[2])
    return found


def add(url: str, *extra: str) -> None:
    call_command(
        "project_add",
        "app",
        "--repo",
        url,
        "--test-command",
        "pytest",
        "--agent-command",
        "./agent.sh",
        *extra,
    )


REFUSED = [
    # Not on the list.
    ([], "AWS_SECRET_ACCESS_KEY", "is not a variable this deployment allows"),
    ([], "ANTHROPIC_PROVIDER_KEY", "holds provider anthropic's key"),
    # On it, and still the deployment's own secret or a provider's key.
    (["SECRET_KEY"], "SECRET_KEY", "holds one of this deployment's own secrets"),
    (["ANTHROPIC_*"], "ANTHROPIC_PROVIDER_KEY", "holds provider anthropic's key"),
]


@pytest.mark.parametrize(("listed", "name", "message"), REFUSED)
def test_the_command_refuses_a_variable_not_allowed_and_sends_nothing(
    server, anthropic, mirror_dir, settings, listed, name, message
):
    settings.REPLAYHUB_REPO_CREDENTIAL_ENVS = ["REPLAYHUB_REPO_TOKEN_*", *listed]

    with pytest.raises(CommandError) as refused:
        add(server.url("app"), "--repo-credential-env", name)

    assert refused.value.returncode == 2
    assert str(refused.value).startswith(f"--repo-credential-env: {name} ")
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert PROVIDER_KEY not in str(refused.value)
    assert server.requests == []
    assert not Project.objects.exists()


def test_an_allowed_variable_is_the_only_password_the_remote_gets(
    server, anthropic, mirror_dir
):
    add(server.url("app"), "--repo-credential-env", "REPLAYHUB_REPO_TOKEN_APP")

    assert Project.objects.get().repo_credential_env == "REPLAYHUB_REPO_TOKEN_APP"
    assert set(passwords(server)) <= {"", SECRET}
    assert SECRET in passwords(server)


@pytest.mark.parametrize(
    "extra",
    [
        ["--test-command", "pytest 'unclosed"],
        ["--allowed-paths", "[z-a].py"],
        ["--root-image", "python:3.12"],
        ["--max-anchors", "0"],
    ],
)
def test_the_command_asks_the_remote_nothing_when_another_option_is_refused(
    db, server, mirror_dir, extra
):
    with pytest.raises(CommandError) as refused:
        add(
            server.url("app"),
            "--repo-credential-env",
            "REPLAYHUB_REPO_TOKEN_APP",
            *extra,
        )

    assert refused.value.returncode == 2
    assert server.requests == []


def test_an_edit_asks_the_remote_nothing_when_another_option_is_refused(
    db, server, mirror_dir
):
    add(server.url("app"), "--repo-credential-env", "REPLAYHUB_REPO_TOKEN_APP")
    asked = len(server.requests)

    with pytest.raises(CommandError):
        call_command("project_edit", "app", "--test-command", "pytest 'unclosed")

    assert len(server.requests) == asked


# --- the project form in the browser --------------------------------------------


def form(url: str, **overrides: str) -> dict[str, str]:
    data = {
        setting.field: " ".join(setting.default)
        if setting.kind == "globs"
        else ("" if setting.default is None else str(setting.default))
        for setting in SETTINGS
    }
    data.update(
        slug="cart",
        repo=url,
        repo_credential_env="REPLAYHUB_REPO_TOKEN_APP",
        test_command="python -m pytest -q",
        agent_command="./agent.sh",
    )
    data.update(overrides)
    return data


@pytest.mark.parametrize(("listed", "name", "message"), REFUSED)
def test_the_form_refuses_a_variable_not_allowed_beside_it_and_sends_nothing(
    client, admin_user, server, anthropic, mirror_dir, settings, listed, name, message
):
    settings.REPLAYHUB_REPO_CREDENTIAL_ENVS = ["REPLAYHUB_REPO_TOKEN_*", *listed]
    client.force_login(admin_user)

    response = client.post(
        reverse("reviews:project_create"),
        form(server.url("app"), repo_credential_env=name),
    )

    assert response.status_code == 400
    errors = response.context["form"].errors
    assert list(errors) == ["repo_credential_env"]
    (said,) = errors["repo_credential_env"]
    assert said.startswith(f"{name} ") and message in said
    assert PROVIDER_KEY not in response.content.decode()
    assert server.requests == []
    assert not Project.objects.exists()


@pytest.mark.parametrize(
    "overrides",
    [
        # Refused by the form's own fields...
        {"slug": "not a slug!"},
        {"time_limit_seconds": "soon"},
        # ...and by the checks project_add shares.
        {"test_command": "pytest 'unclosed"},
        {"egress_agent": "pypi.org"},
    ],
)
def test_a_form_refused_for_another_field_asks_the_remote_nothing(
    client, admin_user, server, mirror_dir, overrides
):
    client.force_login(admin_user)

    response = client.post(
        reverse("reviews:project_create"), form(server.url("app"), **overrides)
    )

    assert response.status_code == 400
    assert server.requests == []
    assert not Project.objects.exists()


def test_a_valid_form_registers_the_remote_with_its_allowed_variable(
    client, admin_user, server, mirror_dir
):
    client.force_login(admin_user)

    response = client.post(reverse("reviews:project_create"), form(server.url("app")))

    assert response.status_code == 302
    assert SECRET in passwords(server)
    assert Project.objects.get().repo_credential_env == "REPLAYHUB_REPO_TOKEN_APP"
