"""Real git servers on 127.0.0.1, for the tests of projects on a remote.

    with GitDaemon(tmp_path) as daemon:          # git://, read-only, no auth
        url = daemon.url("project")
    with HttpGitServer(tmp_path, password="s3cret") as server:   # Basic auth
        url = server.url("project")

``GitDaemon`` is ``git daemon --export-all --base-path``; ``HttpGitServer`` is
``git http-backend`` run as a CGI program behind a small ``http.server``
handler, which asks for a password when given one and notes every request.
Both serve the repositories under their base directory as they are, so a
commit made there after a clone is a commit pushed to the remote.
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Self

_GIT_ENV = {
    "PATH": os.environ.get("PATH", os.defpath),
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}


def free_port() -> int:
    """A port nothing listens on now (git daemon cannot be given port 0)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _answers(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


class GitDaemon:
    """``git daemon`` serving every repository under ``base``."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = 0
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}"

    def start(self) -> None:
        # Another process may take the port between probe and bind: try again.
        for _ in range(5):
            self.port = free_port()
            self.proc = subprocess.Popen(
                [
                    "git",
                    "daemon",
                    "--export-all",
                    "--reuseaddr",
                    "--informative-errors",
                    f"--base-path={self.base}",
                    "--listen=127.0.0.1",
                    f"--port={self.port}",
                    str(self.base),
                ],
                env=_GIT_ENV,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            deadline = time.monotonic() + 10
            while self.proc.poll() is None and time.monotonic() < deadline:
                if _answers(self.port):
                    return
                time.sleep(0.05)
            self.stop()
        raise RuntimeError("git daemon did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(timeout=10)
        self.proc = None


class HttpGitServer:
    """``git http-backend`` behind Basic auth (when ``password`` is given)."""

    def __init__(self, base: Path, *, password: str | None = None) -> None:
        self.base = base
        self.password = password
        # What each request carried: method, path with query, Authorization.
        self.requests: list[tuple[str, str, str]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def url(self, name: str, *, user: str = "") -> str:
        who = f"{user}@" if user else ""
        return f"http://{who}127.0.0.1:{self.port}/{name}"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _serve(self) -> None:
                auth = self.headers.get("Authorization", "")
                outer.requests.append((self.command, self.path, auth))
                if outer.password is not None and not _password_is(
                    auth, outer.password
                ):
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="git"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                path, _, query = self.path.partition("?")
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                env = {
                    **_GIT_ENV,
                    "GIT_PROJECT_ROOT": str(outer.base),
                    "GIT_HTTP_EXPORT_ALL": "1",
                    "REQUEST_METHOD": self.command,
                    "PATH_INFO": path,
                    "QUERY_STRING": query,
                    "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                    "CONTENT_LENGTH": str(len(body)),
                    "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                    "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                    "REMOTE_ADDR": "127.0.0.1",
                    "REMOTE_USER": "git",
                }
                done = subprocess.run(
                    ["git", "http-backend"],
                    input=body,
                    env=env,
                    capture_output=True,
                    timeout=60,
                    check=False,
                )
                head, _, payload = done.stdout.partition(b"\r\n\r\n")
                status, headers = 200, []
                for line in head.decode("latin-1").split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.lower() == "status":
                        status = int(value.split()[0])
                    elif name:
                        headers.append((name, value.strip()))
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler


def _password_is(header: str, password: str) -> bool:
    kind, _, encoded = header.partition(" ")
    if kind.lower() != "basic":
        return False
    try:
        decoded = base64.b64decode(encoded).decode()
    except ValueError:
        return False
    return decoded.partition(":")[2] == password
