"""A mirror's clone or fetch is bounded: in bytes, in time, and by the life of
the process that started it. The remotes are real, on 127.0.0.1: git daemon,
a relay that hands its answer over slowly, and a server whose answer never
ends."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

import pytest

from replayhub.git.mirrors import FetchTooLarge, Mirror, Remote, RepoUnreachable
from replayhub.models import Project
from tests.conftest import ROOT, processes_mentioning
from tests.gitrepos import Repo, make_repo
from tests.gitservers import GitDaemon

KIB = 1024


class EndlessServer:
    """An HTTP server whose answer never ends: headers, then a chunk of bytes
    every tenth of a second, fast enough for git's low-speed limit."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.asked = threading.Event()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/{name}"

    def __enter__(self) -> EndlessServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.listener.close()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                self.asked.set()
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/x-git-upload-pack"
                    b"-advertisement\r\nTransfer-Encoding: chunked\r\n\r\n"
                )
                while not self.stopping.is_set():
                    conn.sendall(b"800\r\n" + b"0" * 0x800 + b"\r\n")
                    time.sleep(0.1)
            except OSError:
                pass


class SlowRelay:
    """A TCP relay to ``port`` that hands the answer over at ``rate`` bytes a
    second, as a remote on a slow link does."""

    def __init__(self, port: int, rate: int) -> None:
        self.port = port
        self.rate = rate
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.stopping = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.listener.getsockname()[1]}/{name}"

    def close(self) -> None:
        self.stopping.set()
        self.listener.close()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.port))
            for source, sink, rate in (
                (client, server, 0),
                (server, client, self.rate),
            ):
                threading.Thread(
                    target=self._pump, args=(source, sink, rate), daemon=True
                ).start()

    def _pump(self, source: socket.socket, sink: socket.socket, rate: int) -> None:
        step = max(rate // 20, 1) if rate else 65536
        try:
            while not self.stopping.is_set() and (data := source.recv(step)):
                sink.sendall(data)
                if rate:
                    time.sleep(len(data) / rate)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                end.close()


def kill_leftovers(marker: str) -> list[int]:
    """Kill (by pid) the processes still naming ``marker``; their pids."""
    found = processes_mentioning(marker)
    for pid in found:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return found


def gone(marker: str, grace: float) -> list[int]:
    """The processes naming ``marker`` still there after ``grace`` seconds."""
    deadline = time.monotonic() + grace
    while (left := processes_mentioning(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.fixture
def origin(tmp_path) -> Repo:
    return make_repo(tmp_path / "served", {"app.py": "VALUE = 1\n"}, name="app")


def noise(size: int) -> bytes:
    """Bytes no compression shrinks: a pack carries them whole."""
    return os.urandom(size)


# The child process: a host process that fetches a mirror and is then killed
# the way gunicorn kills a worker past its timeout (SIGKILL, no handler).
FETCHER = """
import sys
from pathlib import Path
from replayhub.git.mirrors import Mirror, Remote
Mirror(root=Path(sys.argv[1]), key="1", remote=Remote(sys.argv[2])).ready()
"""


def test_a_fetch_that_never_ends_dies_with_the_process_that_started_it(tmp_path):
    marker = f"never-{uuid.uuid4().hex[:12]}"
    with EndlessServer() as server:
        fetcher = subprocess.Popen(
            [
                sys.executable,
                "-c",
                FETCHER,
                str(tmp_path / "mirrors"),
                server.url(marker),
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stderr=subprocess.PIPE,
        )
        try:
            if not server.asked.wait(30):
                fetcher.kill()
                pytest.fail(f"git never asked the server: {fetcher.communicate()[1]!r}")
            # git and its http helper are fetching now.
            assert len(processes_mentioning(marker)) >= 2
            fetcher.kill()
            fetcher.wait(timeout=10)

            left = gone(marker, grace=5)
        finally:
            fetcher.kill()
            leftovers = kill_leftovers(marker)

    assert left == [], f"git outlived its parent: {leftovers}"


def test_a_fetch_that_never_ends_stops_at_its_timeout_with_its_helpers(tmp_path):
    marker = f"never-{uuid.uuid4().hex[:12]}"
    with EndlessServer() as server:
        mirror = Mirror(
            root=tmp_path / "mirrors",
            key="1",
            remote=Remote(server.url(marker)),
            timeout=2,
        )
        started = time.monotonic()
        try:
            with pytest.raises(RepoUnreachable) as caught:
                mirror.ready()
            left = gone(marker, grace=2)
        finally:
            kill_leftovers(marker)

    assert time.monotonic() - started < 15
    assert "timed out after 2s" in caught.value.line
    assert left == []
    # Nothing half-made is left where the mirror goes.
    assert [p.name for p in mirror.root.iterdir()] == [f"{mirror.name}.lock"]


def test_a_clone_past_the_byte_cap_is_refused_in_one_line_and_leaves_nothing(
    origin, tmp_path
):
    origin.commit({"blob.bin": noise(1024 * KIB)}, "a large file")
    root = tmp_path / "mirrors"
    with GitDaemon(origin.path.parent) as daemon:
        mirror = Mirror(
            root=root,
            key="1",
            remote=Remote(daemon.url("app")),
            max_fetch_bytes=256 * KIB,
        )
        with pytest.raises(FetchTooLarge) as caught:
            mirror.ready()

    assert caught.value.line == (
        "the fetch was stopped: it would grow the mirror past 262,144 bytes "
        "(REPLAYHUB_MIRROR_FETCH_MAX_BYTES)"
    )
    assert not mirror.exists()
    assert not list(root.glob("*.tmp-*"))


def test_a_fetch_past_the_byte_cap_is_stopped_while_it_runs(origin, tmp_path):
    root = tmp_path / "mirrors"
    with GitDaemon(origin.path.parent) as daemon:
        # 4 MiB at 256 KiB/s: sixteen seconds, were it let through.
        relay = SlowRelay(daemon.port, rate=256 * KIB)
        try:
            mirror = Mirror(
                root=root,
                key="1",
                remote=Remote(relay.url("app")),
                max_fetch_bytes=512 * KIB,
            )
            mirror.ready()
            before = origin.head()
            large = origin.commit({"blob.bin": noise(4096 * KIB)}, "a large file")
            started = time.monotonic()
            with pytest.raises(FetchTooLarge) as caught:
                mirror.ready(refresh=True)
            took = time.monotonic() - started
        finally:
            relay.close()

    assert "would grow the mirror past 524,288 bytes" in caught.value.line
    assert took < 8
    # The refs are as they were, and no partial pack is kept.
    assert mirror.missing([before]) == []
    assert mirror.missing([large]) == [large]
    assert not list((mirror.git_dir / "objects" / "pack").glob("tmp_*"))
    # A fetch within the cap goes through.
    with GitDaemon(origin.path.parent) as daemon:
        roomy = Mirror(
            root=root,
            key="1",
            remote=Remote(daemon.url("app")),
            max_fetch_bytes=8192 * KIB,
        )
        assert roomy.ready(commits=[large]) and roomy.missing([large]) == []


def web_timeouts() -> dict[str, int]:
    """gunicorn's --timeout where the web server is started."""
    found = {}
    for name in ("dev", "Dockerfile"):
        text = (ROOT / name).read_text()
        match = re.search(r'--timeout"?,?\s+"?(\d+)', text)
        assert match, f"{name} starts gunicorn without --timeout"
        found[name] = int(match.group(1))
    return found


def test_a_mirror_fetch_ends_well_before_the_web_server_gives_up(db, settings):
    project = Project.objects.create(
        slug="app", repo_path="https://git.example.com/app.git"
    )
    mirror = project.mirror()

    assert mirror.timeout == settings.REPLAYHUB_MIRROR_FETCH_SECONDS
    assert mirror.max_fetch_bytes == settings.REPLAYHUB_MIRROR_FETCH_MAX_BYTES
    for where, timeout in web_timeouts().items():
        assert mirror.timeout <= 0.6 * timeout, where
