"""Production readiness: deploy checks, /healthz, structured logs."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

from replayhub.logs import JsonFormatter, ReplayIdFilter, replay_context
from tests.conftest import ROOT, child_env

PRODUCTION = {
    "DEBUG": "0",
    "SECRET_KEY": "x7!Kq2#pL9vR4mZ8wT1yB6nC3dF5gH0jS2aE7uI9oP4lM1kN8bV3cX6zQ5wR2tY",
    "ALLOWED_HOSTS": "replayhub.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://replayhub.example.com",
    "SECURE_SSL_REDIRECT": "1",
    "SECURE_COOKIES": "1",
    "SECURE_HSTS_SECONDS": "31536000",
    "BEHIND_TLS_PROXY": "1",
    "STATIC_MANIFEST": "1",
}


def test_the_deploy_checks_pass_with_production_values(db):
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=child_env(**PRODUCTION),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_deploy_checks_catch_the_development_defaults(db):
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=child_env(DEBUG="0"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_healthz_reports_database_broker_and_sandbox_without_login(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200
    data = response.json()
    assert data["status"] == "ok"
    assert data["database"] == "ok" and data["broker"] == "ok"
    assert data["sandbox"] == "ok"


def test_healthz_names_a_missing_sandbox(client, db, settings):
    settings.REPLAYHUB_DEFAULT_RUNNER = "docker"  # no pinned image, no engine
    data = client.get("/healthz").json()
    assert data["sandbox"].startswith("unavailable:")
    assert data["status"] == "ok"  # the web app itself is up


def test_every_log_line_of_a_replay_carries_its_id():
    record = logging.LogRecord(
        "replayhub", logging.INFO, "", 0, "step <b>%s</b>", ("x",), None
    )
    with replay_context(42):
        ReplayIdFilter().filter(record)
    line = json.loads(JsonFormatter().format(record))
    assert line["replay_id"] == 42
    assert line["message"] == "step <b>x</b>"
    assert line["level"] == "INFO"

    outside = logging.LogRecord("replayhub", logging.INFO, "", 0, "idle", (), None)
    ReplayIdFilter().filter(outside)
    assert "replay_id" not in json.loads(JsonFormatter().format(outside))


def test_the_deploy_checks_warn_when_only_rlimits_cap_the_sandbox(monkeypatch):
    from replayhub import checks
    from replayhub.sandbox.bwrap import BwrapRunner

    monkeypatch.setattr(
        checks, "get_runner", lambda name: BwrapRunner(limit_backend="rlimit")
    )
    found = checks.sandbox_caps_are_the_kernels(None)
    assert [warning.id for warning in found] == ["replayhub.W001"]

    with_cgroups = BwrapRunner(limit_backend="auto")
    if with_cgroups.limit_backend != "rlimit":
        monkeypatch.setattr(checks, "get_runner", lambda name: with_cgroups)
        assert checks.sandbox_caps_are_the_kernels(None) == []
