"""Local servers that speak the forges' status APIs and receive webhooks, on
127.0.0.1: the stand-ins for what cannot exist here."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

# Read by name on the workers, the way a deployment's tokens are: set before
# any worker starts. The names are in the default allow-list
# (REPLAYHUB_REPO_TOKEN_*); the worker may post to the loopback stand-ins and
# waits a second, then two, between attempts.
TOKEN_ENV = "REPLAYHUB_REPO_TOKEN_OUTBOUND_FORGE"
TOKEN = "forge-token-for-the-tests"
SECRET_ENV = "REPLAYHUB_REPO_TOKEN_OUTBOUND_HOOK"
SECRET = "hook-key-for-the-tests"
os.environ.setdefault(TOKEN_ENV, TOKEN)
os.environ.setdefault(SECRET_ENV, SECRET)
os.environ.setdefault("REPLAYHUB_OUTBOUND_ALLOW_PRIVATE", "127.0.0.1/32")
os.environ.setdefault("REPLAYHUB_OUTBOUND_BACKOFF_SECONDS", "1")
# The worker links each status to its replay page under this address.
BASE_URL = "https://replayhub.example"
os.environ.setdefault("REPLAYHUB_BASE_URL", BASE_URL)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    raw: bytes

    @property
    def json(self) -> dict:
        return json.loads(self.raw)


@dataclass
class Stand:
    """A server on 127.0.0.1 that records each POST and answers the next
    scripted status (201 once the script is spent)."""

    url: str = ""
    script: list[int] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, request: Received) -> int:
        with self.lock:
            self.received.append(request)
            return self.script.pop(0) if self.script else 201


@pytest.fixture
def stand() -> Iterator[Stand]:
    state = Stand()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            request = Received(self.path, dict(self.headers), self.rfile.read(length))
            status = state.answer(request)
            body = b'{"message": "Bad Gateway"}\n' if status >= 500 else b'{"id": 1}'
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture
def outbound_settings(settings):
    settings.REPLAYHUB_OUTBOUND_ALLOW_PRIVATE = ["127.0.0.1/32"]
    settings.REPLAYHUB_OUTBOUND_BACKOFF_SECONDS = 1
    settings.REPLAYHUB_BASE_URL = BASE_URL
    return settings
