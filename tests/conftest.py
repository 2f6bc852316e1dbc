"""Shared fixtures: personas, a real Celery worker, the services switch, and the
projects, repositories and stand-ins the tests of several packages use."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings

from replayhub import roles
from replayhub.demo.calculator import GOOD
from replayhub.demo.model_api import StandInProvider
from replayhub.models import Project, Provider, Run
from tests.factories import (
    make_calc_project,
    make_git_project,
    make_rollout_project,
    make_text_run,
    make_user,
)
from tests.gitrepos import project_repo
from tests.harness import make_environment_repo
from tests.scripted import make_project_repo, original_commit

ROOT = Path(__file__).resolve().parent.parent
# The demo's stand-in model key, set before any worker starts so that the
# workers hold it the way they hold a provider's key.
DEMO_KEY_ENV = "REPLAYHUB_DEMO_MODEL_KEY"
os.environ.setdefault(DEMO_KEY_ENV, "demo-key-for-the-tests")
REQUIRE_SERVICES = os.environ.get("REPLAYHUB_REQUIRE_SERVICES") == "1"


def pytest_configure(config):
    # PBKDF2 costs ~0.2 s a persona, which the people's-side tests pay once
    # per test; the hasher is not what any test is about.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def pytest_report_header(config):
    db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    broker = settings.CELERY_BROKER_URL.split("://", 1)[0]
    return f"replayhub: database={db} broker={broker} var={settings.VAR_DIR}"


# Seconds spent per tests/ directory (set-up, call and tear-down), summed on
# the process that reports: the controller when xdist runs the workers.
_SECONDS: dict[str, float] = {}
# And per module, of which the slowest are printed.
_MODULE_SECONDS: dict[str, float] = {}
SLOWEST_MODULES = 15
# And per test, written whole to the var dir (durations.json) for whoever
# looks for the next minute to save.
_TEST_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report):
    module = report.nodeid.split("::", 1)[0]
    parts = module.split("/")
    where = "/".join(parts[:2]) if len(parts) > 2 else parts[0]
    _SECONDS[where] = _SECONDS.get(where, 0.0) + report.duration
    _MODULE_SECONDS[module] = _MODULE_SECONDS.get(module, 0.0) + report.duration
    test = report.nodeid
    _TEST_SECONDS[test] = _TEST_SECONDS.get(test, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if not _SECONDS:
        return
    total = sum(_SECONDS.values())
    write = terminalreporter.write_line
    terminalreporter.write_sep("=", f"seconds per directory (all workers: {total:.0f})")
    for where, seconds in sorted(_SECONDS.items(), key=lambda kv: -kv[1]):
        write(f"{seconds:8.1f}  {seconds / total:6.1%}  {where}")
    if len(_MODULE_SECONDS) > SLOWEST_MODULES:
        terminalreporter.write_sep("=", f"the {SLOWEST_MODULES} slowest modules")
        ranked = sorted(_MODULE_SECONDS.items(), key=lambda kv: -kv[1])
        for module, seconds in ranked[:SLOWEST_MODULES]:
            write(f"{seconds:8.1f}  {seconds / total:6.1%}  {module}")
    with contextlib.suppress(OSError):
        durations = Path(settings.VAR_DIR) / "durations.json"
        ranked = dict(sorted(_TEST_SECONDS.items(), key=lambda kv: -kv[1]))
        durations.write_text(json.dumps(ranked, indent=0))
        write(f"every test's seconds: {durations}")


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


def spawn_worker(log: Path, *, include: str = "", **env: str) -> subprocess.Popen:
    """Start a real Celery worker process and wait until it is ready; with
    ``include``, a module of the tests' own tasks it imports as well."""
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
                *(["--include", include] if include else []),
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
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """On PostgreSQL the test database is made as a copy of a migrated
    template the server keeps for the current migrations (the benchmarks' own:
    benchmarks/support.py), so the workers of a run, and the runs after it,
    migrate once between them rather than once each; migrate then finds
    nothing to apply."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    from benchmarks.support import admin_connect, migrated_template

    url = database_url()
    with admin_connect(url) as admin:
        template = migrated_template(admin, url)
    connection.settings_dict.setdefault("TEST", {})["TEMPLATE"] = template


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup):
    """pytest-django's test database, dropped at the end without the warning
    "being accessed by other users": a connection a test's helper left open
    (a thread's, a child's on its way out) is ended first, as nothing of the
    run may use the database by then."""
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    from benchmarks.support import admin_connect

    name = connection.settings_dict["NAME"]
    with admin_connect(database_url()) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            [name],
        )


# How often a flush is tried before its failure is the test's.
FLUSH_ATTEMPTS = 5


@pytest.fixture(scope="session", autouse=True)
def flush_by_delete():
    """A transactional test (a live server's, a worker's: they read committed
    rows) empties every table after itself. On PostgreSQL Django does that
    with one TRUNCATE of all of them, which makes new files for each table and
    index: ~0.3-1 s a test, more than many a test's own steps. Deleting the
    rows, in one transaction, leaves the same empty tables (sequences run on
    either way) in a tenth of that, as SQLite's flush always does."""
    from django.db import connection

    if connection.vendor != "postgresql":
        yield
        return
    # On the backend's class, not on one connection object, so that every
    # connection a test flushes through deletes: a flush that truncated while
    # the live server still answered a request was seen to deadlock with it.
    operations = type(connection.ops)
    truncate = operations.sql_flush

    def delete(ops, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade or not tables:
            return truncate(
                ops,
                style,
                tables,
                reset_sequences=reset_sequences,
                allow_cascade=allow_cascade,
            )
        # Foreign keys are checked at the commit, when every row is gone.
        quote = ops.quote_name
        # The names are the database's own tables, as introspection lists them.
        deletes = [f"DELETE FROM {quote(table)}" for table in tables]  # noqa: S608
        return ["SET CONSTRAINTS ALL DEFERRED", *deletes]

    execute = operations.execute_sql_flush

    def execute_again(ops, sql_list):
        # A task the test sent (a night's recount after a decision) may still
        # commit a row between a DELETE and the commit, which the deferred
        # foreign keys then refuse: the flush runs again and takes that row
        # too, as a TRUNCATE's lock would have made it wait for it.
        from django.db import IntegrityError

        for attempt in range(FLUSH_ATTEMPTS):
            try:
                return execute(ops, sql_list)
            except IntegrityError:
                if attempt == FLUSH_ATTEMPTS - 1:
                    raise
                time.sleep(0.2)
        return None

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(operations, "sql_flush", delete)
        patch.setattr(operations, "execute_sql_flush", execute_again)
        yield


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


def processes_mentioning(marker: str) -> list[int]:
    """Host pids whose command line contains `marker` (zombies have none)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry.name))
    return found


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


@pytest.fixture
def mirror_dir(settings):
    """A private mirror directory for one test, removed after it: under the
    work dir, since the sandbox uid reads a replay's objects through it."""
    import uuid

    from replayhub.lib.fstree import remove_tree

    root = Path(settings.REPLAYHUB_WORK_DIR) / f"mirrors-{uuid.uuid4().hex[:8]}"
    settings.REPLAYHUB_MIRROR_DIR = root
    yield root
    remove_tree(root)


# --- the scripted calculator project, for whole replays in the real sandbox ---


@pytest.fixture
def calc_repo(tmp_path):
    return make_project_repo(tmp_path)


@pytest.fixture
def calc_project(calc_repo):
    return make_calc_project(calc_repo)


@pytest.fixture
def calc_base(calc_repo):
    return calc_repo.rev("main")


@pytest.fixture
def calc_good(calc_repo):
    return original_commit(calc_repo, GOOD, branch="agent/good")


# --- the project native records are imported into, on a real repository ---


@pytest.fixture
def git_repo(tmp_path):
    return project_repo(tmp_path)


@pytest.fixture
def git_project(db, git_repo):
    return make_git_project(git_repo)


# --- rollout projects ----------------------------------------------------------


@pytest.fixture
def rollout_project(tmp_path):
    """The rollout environment's project, with its harness, its separate
    verifier and a pass threshold of 0.5."""
    return make_rollout_project(
        make_environment_repo(tmp_path),
        harness_command=["python3", "harness.py"],
        verifier_command=["python3", "verifier.py"],
        pass_threshold=0.5,
    )


@pytest.fixture
def rl_project(db, tmp_path):
    """The project a training run's rollout records are imported into."""
    return Project.objects.create(
        slug="rl",
        repo_path=str(tmp_path),
        rollout_anchor="tool-call",
        harness_command=["python", "harness.py"],
    )


# --- the text tier: the local stand-in for both provider APIs, the two ---------
# --- providers registered in front of it, and a recorded run to replay ---------

# The providers' key is the demo's (DEMO_KEY_ENV, set above before any worker
# starts), so a worker process holds it the way it holds a real provider's key.
TEXT_PRICES = {
    "claude-test": {"input": "3", "output": "15"},
    "gpt-test": {"input": "2", "output": "8"},
}


@pytest.fixture
def text_settings(settings):
    settings.REPLAYHUB_TEXT_TIMEOUT_SECONDS = 1
    settings.REPLAYHUB_TEXT_RETRIES = 2
    settings.REPLAYHUB_TEXT_BACKOFF_MS = 10
    return settings


@pytest.fixture
def standin() -> Iterator[StandInProvider]:
    with StandInProvider(key=os.environ[DEMO_KEY_ENV]) as server:
        yield server


@pytest.fixture
def providers(db, standin) -> dict[str, Provider]:
    """``claude`` (anthropic) and ``gpt`` (openai) in front of the stand-in."""
    return {
        "claude": Provider.objects.create(
            name="claude",
            kind="anthropic",
            base_url=standin.base_url,
            key_env=DEMO_KEY_ENV,
            prices=TEXT_PRICES,
        ),
        "gpt": Provider.objects.create(
            name="gpt",
            kind="openai",
            base_url=standin.base_url + "/v1",
            key_env=DEMO_KEY_ENV,
            prices=TEXT_PRICES,
        ),
    }


@pytest.fixture
def text_run(db) -> Run:
    return make_text_run()
