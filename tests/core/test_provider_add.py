"""Registering model providers, and naming them and egress hosts on a project."""

from __future__ import annotations

import subprocess
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command

from replayhub.models import Project, Provider


def provider_add(*args):
    call_command("provider_add", *args)


def test_a_provider_is_registered_with_its_prices_and_no_key(db, capsys):
    provider_add(
        "acme",
        "--kind",
        "anthropic",
        "--base-url",
        "https://models.example/",
        "--key-env",
        "ACME_API_KEY",
        "--price",
        "claude-x=3,15",
        "--price",
        "claude-y=0.8,4,0.08",
    )

    provider = Provider.objects.get()
    assert (provider.kind, provider.base_url, provider.key_env) == (
        "anthropic",
        "https://models.example",
        "ACME_API_KEY",
    )
    assert provider.prices == {
        "claude-x": {"input": "3", "output": "15"},
        "claude-y": {"input": "0.8", "output": "4", "cached": "0.08"},
    }
    assert Decimal(provider.prices["claude-y"]["cached"]) == Decimal("0.08")
    assert "$ACME_API_KEY" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--base-url", "ftp://x"], "is not an http"),
        (["--base-url", "https://u:secret@x"], "must not carry credentials"),
        (["--key-env", "sk-live-123"], "looks like a key itself"),
        (["--key-env", "live key 123"], "is not an environment variable name"),
        (["--price", "m=1"], "write MODEL=IN,OUT"),
        (["--price", "m=a,b"], "must be numbers"),
        (["--price", "m=-1,2"], "zero or more"),
    ],
)
def test_bad_input_is_refused_with_one_line_and_nothing_saved(db, args, message):
    base = {
        "--base-url": "https://models.example",
        "--key-env": "ACME_API_KEY",
    }
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    argv = ["acme", "--kind", "openai"]
    for flag, value in base.items():
        argv += [flag, value]
    if "--price" in args:
        argv += ["--price", args[args.index("--price") + 1]]

    with pytest.raises(CommandError, match=message) as refused:
        provider_add(*argv)

    assert refused.value.returncode == 2
    assert "\n" not in str(refused.value)
    assert not Provider.objects.exists()


def test_a_second_provider_of_the_same_name_is_refused(db):
    args = ["acme", "--kind", "openai", "--base-url", "http://h", "--key-env", "K"]
    provider_add(*args)
    with pytest.raises(CommandError, match="already exists"):
        provider_add(*args)


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def project_add(repo, *extra):
    call_command(
        "project_add",
        "shop",
        "--repo",
        str(repo),
        "--test-command",
        "pytest",
        "--agent-command",
        "./agent.sh",
        *extra,
    )


def test_a_project_names_its_providers_and_egress_hosts(db, repo):
    provider_add("acme", "--kind", "openai", "--base-url", "http://h", "--key-env", "K")

    project_add(
        repo,
        "--providers",
        "acme",
        "--egress-agent",
        "pypi.org:443",
        "*.pythonhosted.org:443",
        "--egress-tests",
        "127.0.0.1:8000",
    )

    project = Project.objects.get()
    assert [p.name for p in project.providers.all()] == ["acme"]
    assert project.egress_agent == ["pypi.org:443", "*.pythonhosted.org:443"]
    assert project.egress_tests == ["127.0.0.1:8000"]


def test_an_unknown_provider_or_a_bad_host_pattern_is_refused(db, repo):
    with pytest.raises(CommandError, match="no provider named 'nope'"):
        project_add(repo, "--providers", "nope")
    with pytest.raises(CommandError, match=r"--egress-agent: 'pypi\.org' is not"):
        project_add(repo, "--egress-agent", "pypi.org")
    with pytest.raises(CommandError, match="--egress-tests: 'h:99999' is not"):
        project_add(repo, "--egress-tests", "h:99999")
    assert not Project.objects.exists()
