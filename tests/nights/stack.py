"""The battery's stack of processes on a PostgreSQL and a Redis of its own
(tests/servers.py): worker hosts, each a real Celery worker with var, work
and mirror folders of its own and its own host name, sharing one environment
store; a beat; the web app serving /healthz; ``manage.py nightly``; and this
process's hand on the broker (sending a replay, steering which hosts consume
the replay queue)."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from replayhub.models import Replay
from tests.conftest import ROOT, child_env, spawn_worker, stop_worker
from tests.servers import Postgres, Redis, celery_client, free_port

REPLAY = "replayhub.tasks.run_replay"
# What every process of the stack is told, beside its database and broker.
FAST = {
    "REPLAYHUB_REAP_SECONDS": "3",
    "REPLAYHUB_ORPHAN_AFTER_SECONDS": "3",
    "REPLAYHUB_RETRY_FIRST_SECONDS": "1",
    "REPLAYHUB_RETRY_MAX_SECONDS": "4",
    "LOG_FORMAT": "plain",
}
# The hosts that take replays throughout; host-c's work folder is full, and
# it takes replays only in (c).
REGULAR = ("host-a", "host-b")


@dataclass
class Host:
    """A worker host: its folders, and its worker while one runs."""

    name: str
    root: Path
    env: dict[str, str]
    proc: subprocess.Popen | None = None
    starts: int = 0

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def logs_dir(self) -> Path:
        # spawn_worker names the worker after its log's folder.
        return self.root / self.name

    @property
    def node(self) -> str:
        return f"test-worker-{os.getpid()}-{self.name}@{socket.gethostname()}"

    def logs(self) -> str:
        return "".join(
            p.read_text(errors="replace") for p in sorted(self.logs_dir.glob("*.log"))
        )


@dataclass
class Stack:
    pg: Postgres
    redis: Redis
    root: Path
    hosts: dict[str, Host] = field(default_factory=dict)
    beat: subprocess.Popen | None = None
    web: subprocess.Popen | None = None
    web_port: int = 0

    def env(self, **extra: str) -> dict[str, str]:
        return child_env(
            **{
                "DATABASE_URL": self.pg.url,
                "CELERY_BROKER_URL": self.redis.url,
                "REPLAYHUB_VAR_DIR": str(self.root / "control"),
                "REPLAYHUB_ENV_STORE_DIR": str(self.root / "store"),
                **FAST,
                **extra,
            }
        )

    # -- worker hosts ----------------------------------------------------------

    def host(self, name: str, **settings: str) -> Host:
        root = self.root / name
        for sub in ("var", "work", "mirrors", name):
            (root / sub).mkdir(parents=True, exist_ok=True)
        env = {
            "REPLAYHUB_VAR_DIR": str(root / "var"),
            "REPLAYHUB_WORK_DIR": str(root / "work"),
            "REPLAYHUB_MIRROR_DIR": str(root / "mirrors"),
            "REPLAYHUB_HOST_NAME": name,
            **settings,
        }
        host = self.hosts[name] = Host(name, root, env)
        return host

    def start(self, *hosts: Host) -> None:
        """Start a worker on each host, at once."""

        def one(host: Host) -> None:
            host.starts += 1
            log = host.logs_dir / f"worker-{host.starts}.log"
            host.proc = spawn_worker(log, **self.env(**host.env))

        with concurrent.futures.ThreadPoolExecutor(len(hosts)) as pool:
            list(pool.map(one, hosts))

    def stop(self, host: Host) -> None:
        if host.proc is not None:
            stop_worker(host.proc)
            host.proc = None

    def kill(self, host: Host) -> None:
        """SIGKILL to the worker and its pool: no shutdown, no clean-up."""
        assert host.proc is not None
        os.killpg(host.proc.pid, signal.SIGKILL)
        host.proc.wait()
        host.proc = None

    # -- the other processes -----------------------------------------------------

    def child(self, argv: list[str], log: str) -> subprocess.Popen:
        with (self.root / f"{log}.log").open("ab") as out:
            return subprocess.Popen(
                [sys.executable, *argv],
                cwd=ROOT,
                env=self.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def start_beat(self) -> None:
        self.beat = self.child(
            [
                "-m",
                "celery",
                "-A",
                "replayhub",
                "beat",
                "--schedule",
                str(self.root / "beat-schedule"),
                "--loglevel",
                "INFO",
            ],
            "beat",
        )

    def start_web(self) -> None:
        """Start the web app; :meth:`healthz` answers once it is up."""
        self.web_port = free_port()
        self.web = self.child(
            [
                "manage.py",
                "runserver",
                "--noreload",
                "--skip-checks",
                f"127.0.0.1:{self.web_port}",
            ],
            "web",
        )

    def healthz(self) -> tuple[int, dict]:
        """/healthz as a load balancer asks it: (status, body)."""
        url = f"http://127.0.0.1:{self.web_port}/healthz"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())
        except OSError:
            return 0, {}

    def nightly(self, slug: str) -> str:
        """``manage.py nightly --project <slug> --now``'s output."""
        return subprocess.run(
            [sys.executable, "manage.py", "nightly", "--project", slug, "--now"],
            cwd=ROOT,
            env=self.env(),
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout

    # -- the broker, from this process -------------------------------------------

    @property
    def celery(self):
        app = getattr(self, "_celery", None)
        if app is None:
            app = self._celery = celery_client(self.redis.url)
        return app

    def restart_redis(self) -> None:
        """Redis back, empty; this process's broker connections made anew."""
        self.redis.restart()
        app = getattr(self, "_celery", None)
        if app is not None:
            app.close()
            self._celery = None

    def send(self, replay: Replay) -> None:
        self.celery.send_task(REPLAY, args=(replay.pk,), queue="replay")

    def only(self, *taking: Host) -> None:
        """Only ``taking``'s workers consume the replay queue."""
        for host in self.hosts.values():
            if host.proc is None:
                continue
            if host in taking:
                self.control("add_consumer", host)
            else:
                self.control("cancel_consumer", host)

    def control(self, command: str, host: Host, *, timeout: float = 60) -> None:
        """``command`` for the replay queue, sent until ``host`` answers it.

        A worker on a busy machine may answer after the broadcast's wait: the
        command is sent again (adding or cancelling a consumer twice does no
        harm) until its answer arrives, so that what follows runs on the
        hosts it means to."""
        import redis

        deadline = time.monotonic() + timeout
        while True:
            send = getattr(self.celery.control, command)
            try:
                replies = send("replay", destination=[host.node], reply=True, timeout=5)
            except redis.ConnectionError:
                # kombu's first broadcast after Redis restarted finds the old
                # connection closed; the next one makes a new one.
                replies = []
            if any(host.node in reply for reply in replies or []):
                return
            if time.monotonic() > deadline:
                tail = "".join(host.logs().splitlines(keepends=True)[-20:])
                said = f"{host.name} did not answer {command} in {timeout:.0f} s"
                raise AssertionError(f"{said}; its log ends:\n{tail}")

    def everyone(self) -> None:
        """The regular hosts, and they alone, consume the replay queue."""
        self.only(*(self.hosts[name] for name in REGULAR))

    def stop_all(self) -> None:
        """Every process of the stack asked to stop at once, then waited for."""
        hosts = [h for h in self.hosts.values() if h.proc is not None]
        procs = [h.proc for h in hosts] + [p for p in (self.beat, self.web) if p]
        for proc in procs:
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for host in hosts:
            host.proc = None
        self.beat = self.web = None


def create_tables() -> None:
    """The schema made from the models, as Django's test runner makes it
    with ``MIGRATE: False``: 1 s here, where running the 40-odd migrations
    takes 25 s of the module's two minutes. The models are the migrations'
    end state (``makemigrations --check`` fails the build otherwise); the
    data migrations' one effect on an empty database, the role groups, is
    made by ``roles.sync_groups``."""
    from django.apps import apps
    from django.conf import settings
    from django.core.management import call_command

    from replayhub import roles

    kept = settings.MIGRATION_MODULES
    settings.MIGRATION_MODULES = {app.label: None for app in apps.get_app_configs()}
    try:
        call_command("migrate", run_syncdb=True, verbosity=0)
    finally:
        settings.MIGRATION_MODULES = kept
    roles.sync_groups(apps)
