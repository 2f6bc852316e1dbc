"""Shared fixtures: personas, a real Celery worker, the services switch."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User

from replayhub import roles

ROOT = Path(__file__).resolve().parent.parent
# The demo's stand-in model key, set before any worker starts so that the
# workers hold it the way they hold a provider's key.
os.environ.setdefault("REPLAYHUB_DEMO_MODEL_KEY", "demo-key-for-the-tests")
REQUIRE_SERVICES = os.environ.get("REPLAYHUB_REQUIRE_SERVICES") == "1"


def pytest_report_header(config):
    db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    broker = settings.CELERY_BROKER_URL.split("://", 1)[0]
    return f"replayhub: database={db} broker={broker} var={settings.VAR_DIR}"


def make_user(username: str, role: str | None) -> User:
    if role and not Group.objects.filter(name=role).exists():
        # A transactional test flushed the tables the data migration filled.
        from django.apps import apps

        roles.sync_groups(apps)
    user = User.objects.create_user(username=username, password="pw-" + username)
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def reviewer(db):
    return make_user("rita", roles.REVIEWER)


@pytest.fixture
def lead(db):
    return make_user("leo", roles.LEAD)


@pytest.fixture
def admin_user(db):
    return make_user("ada", roles.ADMIN)


@pytest.fixture
def nobody(db):
    """Logged in, but in no group."""
    return make_user("nora", None)


def database_url() -> str:
    """The URL of the database the tests use, for child processes."""
    from django.db import connection

    conf = connection.settings_dict
    if conf["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{conf['NAME']}"
    auth = quote(conf["USER"] or "", safe="")
    if conf["PASSWORD"]:
        auth += ":" + quote(conf["PASSWORD"], safe="")
    host = conf["HOST"] or "localhost"
    port = f":{conf['PORT']}" if conf["PORT"] else ""
    return f"postgres://{auth}@{host}{port}/{conf['NAME']}"


def child_env(**extra: str) -> dict[str, str]:
    """Environment for a ReplayHub child process sharing the test database."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "COV_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="replayhub.settings",
        DATABASE_URL=database_url(),
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        REPLAYHUB_VAR_DIR=str(settings.VAR_DIR),
        PYTHONPATH=str(ROOT),
    )
    env.update(extra)
    return env


def spawn_worker(log: Path, **env: str) -> subprocess.Popen:
    """Start a real Celery worker process and wait until it is ready."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "replayhub",
                "worker",
                "-Q",
                "default,replay",
                "--concurrency",
                "1",
                "--pool",
                "prefork",
                "--loglevel",
                "INFO",
                "--without-mingle",
                "--without-gossip",
                "--hostname",
                f"test-worker-{os.getpid()}-{log.parent.name}@%h",
            ],
            cwd=ROOT,
            env=child_env(**env),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 60
    while b"ready." not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the Celery worker did not start:\n" + log.read_text()[-3000:])
        time.sleep(0.2)
    return proc


def stop_worker(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, 15)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, django_db_blocker, tmp_path_factory):
    """A real worker process consuming the test broker, for the whole session."""
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    with django_db_blocker.unblock():
        proc = spawn_worker(log)
    yield proc
    stop_worker(proc)


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.2):
    """Poll until ``predicate()`` is truthy; return its value or fail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"condition not met within {timeout} s")


def _need(service: str, present: bool, hint: str) -> None:
    if present:
        return
    if REQUIRE_SERVICES:
        pytest.fail(f"{service} is required (REPLAYHUB_REQUIRE_SERVICES=1): {hint}")
    pytest.skip(f"needs {service}: {hint}")


@pytest.fixture
def require_postgres():
    from django.db import connection

    _need("PostgreSQL", connection.vendor == "postgresql", "set DATABASE_URL")


@pytest.fixture
def require_redis():
    _need(
        "Redis", settings.CELERY_BROKER_URL.startswith("redis"), "set CELERY_BROKER_URL"
    )


@pytest.fixture
def env_cache(settings):
    """A private environment cache for one test, removed after it: under the
    work dir, since the sandbox uid must be able to reach it."""
    import uuid

    from replayhub.lib.fstree import remove_tree

    root = Path(settings.REPLAYHUB_WORK_DIR) / f"envs-{uuid.uuid4().hex[:8]}"
    settings.REPLAYHUB_ENV_CACHE_DIR = root
    yield root
    remove_tree(root)
