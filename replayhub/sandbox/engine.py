"""A minimal client of the Docker Engine API over its unix socket.

Docker and podman's Docker-compatible service (``podman system service``)
speak the same HTTP API; the runner needs a handful of its calls (ping,
image inspect and pull, container create, attach, start, kill, wait,
inspect, remove), which ``http.client`` does over an ``AF_UNIX`` socket: no
client binary and no new dependency. ``DOCKER_HOST`` names the engine as
``unix:///path``; TCP engines are refused (a unix socket from the worker
could not cross to them anyway, and neither could the workspace bind).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import struct
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode

DEFAULT_SOCKET = "/var/run/docker.sock"
# The oldest API version that has everything used here; both Docker (>= 20)
# and podman (>= 3) serve it.
API = "/v1.41"
TIMEOUT = 60.0


class EngineError(Exception):
    """The engine could not be reached or refused a call; says which and why."""


# What crun answers on a hybrid cgroup host, and what to do about it.
_HYBRID = "cgroups in hybrid mode not supported"
_HYBRID_HINT = (
    "the engine's OCI runtime (crun) runs no container on this host's hybrid "
    'cgroups: configure the engine with runc ([engine] runtime = "runc" in '
    "containers.conf)"
)


def refusal(status: object, data: bytes) -> str:
    """One line from an engine's error answer: its status and message."""
    message = data[:4096].decode(errors="replace").strip()
    with contextlib.suppress(ValueError, AttributeError, RecursionError):
        message = str(json.loads(message).get("message", message))
    if _HYBRID in message:
        return f"{status} {_HYBRID_HINT}"
    return f"{status} {' '.join(message.split())[:300]}"


def socket_path(host: str | None = None) -> str:
    """The engine's socket from ``host`` or ``DOCKER_HOST``, else the default."""
    host = host or os.environ.get("DOCKER_HOST") or f"unix://{DEFAULT_SOCKET}"
    if not host.startswith("unix://"):
        raise EngineError(
            f"only a local engine on a unix socket is supported, not {host!r}"
        )
    return host.removeprefix("unix://")


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class Engine:
    def __init__(self, host: str | None = None, *, timeout: float = TIMEOUT) -> None:
        self.path = socket_path(host)
        self.timeout = timeout

    def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        ok: tuple[int, ...] = (200, 201, 204, 304),
        timeout: float | None = None,
    ) -> Any:
        """One API call; the decoded JSON answer (None when empty)."""
        connection = _UnixConnection(self.path, timeout or self.timeout)
        try:
            connection.request(
                method,
                API + path,
                body=json.dumps(body) if body is not None else None,
                headers={"Content-Type": "application/json"},
            )
            response = connection.getresponse()
            data = response.read()
        except OSError as error:
            raise EngineError(
                f"the engine at {self.path} does not answer ({error})"
            ) from error
        finally:
            connection.close()
        if response.status not in ok:
            raise EngineError(f"{method} {path}: {refusal(response.status, data)}")
        if not data.strip():
            return None
        try:
            return json.loads(data)
        except ValueError:
            return data.decode(errors="replace")

    def attach(self, container: str) -> AttachedStream:
        """The container's multiplexed output stream (call before starting it).

        The API upgrades the HTTP connection to a raw stream, which
        ``http.client`` does not hand over; the request is written by hand.
        """
        stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stream.settimeout(self.timeout)
        try:
            stream.connect(self.path)
            params = "stream=1&stdout=1&stderr=1"
            target = f"{API}/containers/{quote(container)}/attach?{params}"
            stream.sendall(
                f"POST {target} HTTP/1.1\r\nHost: localhost\r\n"
                "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n".encode()
            )
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = stream.recv(4096)
                if not chunk or len(head) > 65536:
                    raise EngineError("the engine closed the attach request")
                head += chunk
        except OSError as error:
            stream.close()
            raise EngineError(f"cannot attach to {container} ({error})") from error
        status_line, _, _ = head.partition(b"\r\n")
        if b" 101 " not in status_line and b" 200 " not in status_line:
            stream.close()
            status = status_line.split()[1:2] or [b"?"]
            body = head.partition(b"\r\n\r\n")[2]
            raise EngineError(
                f"attach refused: {refusal(status[0].decode(errors='replace'), body)}"
            )
        stream.settimeout(None)
        # What followed the headers already is the stream's beginning.
        return AttachedStream(stream, head.partition(b"\r\n\r\n")[2])


class AttachedStream:
    """An attached output stream; bytes that came with the headers first."""

    def __init__(self, sock: socket.socket, prefix: bytes) -> None:
        self.sock = sock
        self.prefix = prefix

    def recv(self, size: int) -> bytes:
        if self.prefix:
            data, self.prefix = self.prefix[:size], self.prefix[size:]
            return data
        return self.sock.recv(size)

    def close(self) -> None:
        self.sock.close()


def demultiplex(
    recv: Callable[[int], bytes], feed: Callable[[int, bytes], None]
) -> None:
    """Feed the payloads of a stdout/stderr frame stream until it ends.

    Each frame is an 8-byte header (stream: 1 stdout, 2 stderr; three zero
    bytes; big-endian length) and that many bytes, fed as (stream, bytes).
    """
    pending = b""
    want: int | None = None
    stream = 1
    while True:
        chunk = recv(65536)
        if not chunk:
            return
        pending += chunk
        while True:
            if want is None:
                if len(pending) < 8:
                    break
                stream = pending[0]
                (want,) = struct.unpack(">I", pending[4:8])
                pending = pending[8:]
            if len(pending) < want and want > 0:
                # Feed partial payloads at once: a huge frame is never held.
                feed(stream, pending)
                want -= len(pending)
                pending = b""
                break
            feed(stream, pending[:want])
            pending = pending[want:]
            want = None


class LineJoiner:
    """Two streams into one output, a line at a time.

    The engine reads a container's stdout and stderr from two pipes, so their
    frames arrive in no fixed order and a line of one can land in the middle
    of a line of the other. Each stream's bytes are held until its next
    newline (at most ``hold`` bytes), so whole lines are interleaved.
    """

    def __init__(self, feed: Callable[[bytes], None], hold: int = 65536) -> None:
        self.feed = feed
        self.hold = hold
        self.partial: dict[int, bytes] = {}

    def __call__(self, stream: int, data: bytes) -> None:
        data = self.partial.pop(stream, b"") + data
        cut = data.rfind(b"\n") + 1
        if cut:
            self.feed(data[:cut])
            data = data[cut:]
        if len(data) > self.hold:
            self.feed(data)
        elif data:
            self.partial[stream] = data

    def close(self) -> None:
        """Feed what is left of each stream (a last line with no newline)."""
        for stream in sorted(self.partial):
            self.feed(self.partial.pop(stream))


def query(**params: object) -> str:
    return "?" + urlencode({k: v for k, v in params.items() if v is not None})
