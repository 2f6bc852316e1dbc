"""The providers a gateway forwards to, and its kept-alive connections to them."""

from __future__ import annotations

import contextlib
import http.client
import re
import select
import socket
import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from replayhub.gateway import wire

IDLE_CONNECTIONS = 8
# As provider_add accepts them: a name is one path segment.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
# A key becomes a header value; http.client would echo a bad one in its error.
_KEY = re.compile(r"[\x21-\x7e]*")


@dataclass(frozen=True)
class Upstream:
    """A provider the agent may call. ``key`` is the real secret (empty for a
    local server that takes none); ``prices`` is ``{model: {"input", "output",
    "cached", "cache_write"}}`` in USD per million tokens."""

    name: str
    kind: str
    base_url: str
    key: str = field(repr=False)
    prices: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"{self.name!r} is not a provider name")
        if self.kind not in wire.KINDS:
            raise ValueError(f"provider {self.name}: unknown kind {self.kind!r}")
        url = urlsplit(self.base_url)
        if (
            url.scheme not in ("http", "https")
            or not url.hostname
            or url.username is not None
            or url.password is not None
            or url.query
            or url.fragment
        ):
            # Not echoed: a URL with credentials in it is a secret too.
            raise ValueError(
                f"provider {self.name}: the base URL must be http(s) with a host "
                "and no credentials, query or fragment"
            )
        if not _KEY.fullmatch(self.key):
            raise ValueError(
                f"provider {self.name}: the key holds characters a header cannot carry"
            )


class ConnectionPool:
    """Kept-alive connections to one upstream, so a call pays no TCP or TLS
    handshake when an idle connection is at hand."""

    def __init__(
        self,
        upstream: Upstream,
        *,
        connect_timeout: float,
        read_timeout: float,
        context: ssl.SSLContext | None,
    ) -> None:
        url = urlsplit(upstream.base_url)
        self.https = url.scheme == "https"
        self.host = url.hostname or ""
        self.port = url.port or (443 if self.https else 80)
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.context = context
        self._lock = threading.Lock()
        self._idle: list[http.client.HTTPConnection] = []
        self._busy: set[http.client.HTTPConnection] = set()
        self._closed = False

    def _connect(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection
        if self.https:
            # The default context verifies the certificate and the host name.
            conn = http.client.HTTPSConnection(
                self.host, self.port, timeout=self.connect_timeout, context=self.context
            )
        else:
            conn = http.client.HTTPConnection(
                self.host, self.port, timeout=self.connect_timeout
            )
        conn.connect()
        assert conn.sock is not None
        conn.sock.settimeout(self.read_timeout)
        return conn

    def _take(self) -> http.client.HTTPConnection | None:
        """An idle connection the upstream has not closed, if any."""
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                # Readable while idle: the upstream closed it (or sent what no
                # request asked for). Either way it is not reused.
                if (
                    conn.sock is not None
                    and not select.select([conn.sock], [], [], 0)[0]
                ):
                    return conn
                conn.close()
        return None

    def send(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Sends one request; the connection is the caller's until ``release``."""
        conn = self._take()
        reused = conn is not None
        while True:
            if conn is None:
                conn = self._connect()
            with self._lock:
                self._busy.add(conn)
                closed = self._closed
            try:
                if closed:
                    raise ConnectionAbortedError("the gateway is closing")
                conn.putrequest(method, target, skip_accept_encoding=True)
                for name, value in headers:
                    conn.putheader(name, value)
                if body or method == "POST":
                    conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body or None)
                return conn, conn.getresponse()
            except (ConnectionResetError, BrokenPipeError, http.client.BadStatusLine):
                self.release(conn, reuse=False)
                if not reused:
                    raise
                # The upstream closed the kept-alive connection as the request
                # went out (its idle timeout): one retry on a fresh connection,
                # as HTTP clients do.
                conn, reused = None, False
            except BaseException:
                self.release(conn, reuse=False)
                raise

    def release(self, conn: http.client.HTTPConnection, *, reuse: bool) -> None:
        with self._lock:
            self._busy.discard(conn)
            if (
                reuse
                and not self._closed
                and conn.sock is not None
                and len(self._idle) < IDLE_CONNECTIONS
            ):
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            busy = list(self._busy)
        for conn in idle:
            conn.close()
        # Unblocks a thread waiting on a slow upstream; it then ends its call.
        for conn in busy:
            if conn.sock is not None:
                with contextlib.suppress(OSError):
                    conn.sock.shutdown(socket.SHUT_RDWR)
