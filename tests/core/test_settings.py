"""Settings helpers fail loudly on malformed values."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from replayhub.settings import database_from_url, env_bool, env_int, env_names


@pytest.mark.parametrize(("raw", "value"), [("1", True), ("off", False), ("", True)])
def test_env_bool_reads_the_usual_spellings(monkeypatch, raw, value):
    monkeypatch.setenv("X_FLAG", raw)
    assert env_bool("X_FLAG", True) is value


def test_a_malformed_boolean_is_an_error(monkeypatch):
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG='maybe' is not a boolean"):
        env_bool("X_FLAG", False)


def test_a_malformed_integer_is_an_error(monkeypatch):
    monkeypatch.setenv("X_INT", "ten")
    with pytest.raises(ImproperlyConfigured, match="not an integer"):
        env_int("X_INT", 1)


def test_a_credential_allow_list_names_variables_or_prefixes(monkeypatch):
    monkeypatch.setenv("X_NAMES", "CI_GIT_TOKEN, REPLAYHUB_REPO_TOKEN_*")
    assert env_names("X_NAMES", []) == ["CI_GIT_TOKEN", "REPLAYHUB_REPO_TOKEN_*"]
    for malformed in ("*", "A-B", "TOKEN_*_X", "$HOME"):
        monkeypatch.setenv("X_NAMES", malformed)
        with pytest.raises(ImproperlyConfigured, match="not a variable name"):
            env_names("X_NAMES", [])


def test_database_urls_are_translated():
    pg = database_from_url("postgres://u:p%40ss@db.local:5433/replay")
    assert (
        pg["ENGINE"],
        pg["NAME"],
        pg["USER"],
        pg["PASSWORD"],
        pg["HOST"],
        pg["PORT"],
    ) == ("django.db.backends.postgresql", "replay", "u", "p@ss", "db.local", "5433")
    lite = database_from_url("sqlite:////tmp/x.sqlite3")
    assert lite["NAME"] == "/tmp/x.sqlite3"
    with pytest.raises(ImproperlyConfigured, match="mysql"):
        database_from_url("mysql://x/y")


@pytest.mark.django_db
def test_the_checks_migrate_runs_find_nothing_on_this_database():
    # What ``migrate`` (so ``./dev run``) checks, on whichever database the
    # suite runs on: a newcomer's first command prints no warning.
    from django.core.management import call_command

    # Raises SystemCheckError on any warning not silenced.
    call_command("check", "--database", "default", "--fail-level", "WARNING")
