"""A PostgreSQL and a Redis of a test's own, on free ports, that the test can
stop and start again, and the test process's ORM pointed at that database.

PostgreSQL is Debian's (``/usr/lib/postgresql/<version>/bin``), run as the
``postgres`` user (``runuser``; the tests run as root) in a folder owned by
it, with trust authentication on 127.0.0.1 and ``fsync`` off: the data is
thrown away with the folder.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def postgres_bin() -> Path | None:
    """The newest Debian PostgreSQL's binaries, or None."""
    found = [
        Path(d)
        for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"))
        if (Path(d) / "pg_ctl").exists() and (Path(d) / "initdb").exists()
    ]
    return max(found, key=lambda p: int(p.parent.name), default=None)


def missing_servers() -> str:
    """Why a private PostgreSQL and Redis cannot be started here ("" when
    they can)."""
    if postgres_bin() is None:
        return "no PostgreSQL binaries under /usr/lib/postgresql/*/bin"
    if shutil.which("redis-server") is None:
        return "no redis-server"
    if shutil.which("runuser") is None or os.geteuid() != 0:
        return "PostgreSQL runs as the postgres user: needs root and runuser"
    return ""


def need_servers(what: str) -> None:
    """Skip the test (fail it in CI) when ``what`` cannot have the servers of
    its own that :func:`missing_servers` looks for."""
    import pytest

    from tests.conftest import REQUIRE_SERVICES

    why = missing_servers()
    if why:
        if REQUIRE_SERVICES:
            pytest.fail(f"{what} needs its own servers: {why}")
        pytest.skip(f"{what} needs its own servers: {why}")


def celery_client(url: str):
    """A Celery app of this process on the broker at ``url``. Celery takes
    CELERY_BROKER_URL from the environment before an app's own broker: the
    read and write URLs it takes as set."""
    from celery import Celery

    app = Celery("tests", set_as_current=False)
    app.conf.broker_read_url = app.conf.broker_write_url = url
    app.conf.broker_connection_retry_on_startup = True
    return app


def _answers(port: int, hello: bytes, expect: bytes) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
            if not hello:
                return True
            s.sendall(hello)
            return s.recv(16).startswith(expect)
    except OSError:
        return False


def _until(predicate, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not answer within {timeout} s")
        time.sleep(0.05)


class Postgres:
    """A throw-away cluster; :meth:`stop` and :meth:`start` take it away and
    give it back on the same port with the same data."""

    def __init__(self) -> None:
        bin_dir = postgres_bin()
        assert bin_dir is not None
        self.bin = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="replayhub-pg-"))
        shutil.chown(self.root, "postgres", "postgres")
        self.data = self.root / "data"
        self.port = free_port()
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def _as_postgres(self, *argv: str) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", str(self.bin / argv[0]), *argv[1:]],
            check=True,
            capture_output=True,
            timeout=60,
        )

    def init(self) -> Postgres:
        self._as_postgres(
            "initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres",
            "--no-sync", "-E", "UTF8", "--locale", "C",
        )  # fmt: skip
        return self.start()

    def start(self) -> Postgres:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=100"
        )
        self._as_postgres(
            "pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"),
            "-o", options, "-w", "-t", "30", "start",
        )  # fmt: skip
        _until(lambda: _answers(self.port, b"", b""), timeout=30, what="PostgreSQL")
        return self

    def stop(self) -> None:
        """Stop at once, cutting every connection (``-m fast``)."""
        self._as_postgres("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class Redis:
    """A Redis without persistence: :meth:`restart` brings it back empty."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> Redis:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
        )
        _until(
            lambda: _answers(self.port, b"PING\r\n", b"+PONG"),
            timeout=10,
            what="Redis",
        )
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


@contextlib.contextmanager
def default_database(url: str) -> Iterator[None]:
    """The ORM's ``default`` connection, in this thread, on ``url``'s
    database; the test database's connection comes back after."""
    from django.db import connections
    from django.db.utils import load_backend

    from replayhub.settings import database_from_url

    previous = connections["default"]
    conf = connections.configure_settings({"default": database_from_url(url)})
    wrapper = load_backend(conf["default"]["ENGINE"]).DatabaseWrapper(
        conf["default"], "default"
    )
    connections["default"] = wrapper
    try:
        yield
    finally:
        wrapper.close()
        connections["default"] = previous
