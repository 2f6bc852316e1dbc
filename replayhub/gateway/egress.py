"""The egress proxy: the allowlisted way from a sandbox to other hosts.

An HTTP proxy on a unix socket, relayed into the sandbox (see
:mod:`replayhub.sandbox.network`) and named there by ``HTTPS_PROXY`` and
``HTTP_PROXY``. It understands two requests:

* ``CONNECT host:port``: the bytes are tunnelled as they are, TLS included;
  nothing is intercepted or decrypted.
* absolute-form plain HTTP (``GET http://host:port/path``): forwarded in
  origin form with the ``Proxy-*`` and hop-by-hop headers dropped and
  ``Connection: close`` asked for, so one connection carries one request.

The target is checked against the allowlist (:mod:`replayhub.gateway.allow`)
on the name the client asked for; an allowed name is then resolved on the
worker, and reached even when it resolves to a private or loopback address,
because an admin listed it. A refusal is a ``403`` whose body is one line
saying why. Every attempt, allowed or denied, connected or not, becomes an
:class:`EgressAttempt` in :attr:`EgressProxy.attempts` and is passed to
``on_attempt``; a client that connects and sends nothing has attempted
nothing.

Bounds: a request head larger than ``max_header_bytes`` or slower than
``header_timeout`` is refused; at most ``max_tunnels`` upstream connections
are open at once (more get a ``503``); at most ``max_clients`` client
connections are served at once (more wait in the listen backlog); a
connection with no byte moving for ``idle_timeout`` seconds is closed.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import stat
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from replayhub.gateway.allow import (
    Host,
    first_match,
    parse_allowlist,
    parse_target,
    split_authority,
)
from replayhub.sandbox.relay import splice

logger = logging.getLogger(__name__)

OUTCOMES = ("ok", "denied", "unreachable", "error")
_HOST_CHARS = 255
_PHRASES = {
    200: "Connection established",
    400: "Bad Request",
    403: "Forbidden",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
}
# Dropped from a forwarded request: they concern the hop to the proxy, or
# (Host) are rewritten from the URL.
_DROPPED_HEADERS = frozenset({"connection", "keep-alive", "upgrade", "host"})
_BODY_HEADERS = frozenset({"content-length", "transfer-encoding"})


@dataclass(frozen=True)
class ConnectAttempt:
    """One connection the sandbox asked the proxy for.

    ``outcome``: "ok" (connected; the bytes were relayed until either side
    ended), "denied" (not on the allowlist, or a host that is no valid name),
    "unreachable" (allowed, but resolving or connecting failed) or "error"
    (a malformed or oversized request, or no tunnel free). ``bytes_up`` were
    sent to the remote host, ``bytes_down`` received from it. ``detail`` is the
    one-line reason given to the client ("" when connected).
    """

    host: str
    port: int
    phase: str
    allowed: bool
    outcome: str
    bytes_up: int
    bytes_down: int
    started_at: datetime
    duration_ms: float
    method: str = ""
    detail: str = ""


@dataclass
class _Draft:
    """An attempt while it is being served."""

    phase: str
    host: str = ""
    port: int = 0
    allowed: bool = False
    outcome: str = "error"
    bytes_up: int = 0
    bytes_down: int = 0
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    method: str = ""
    detail: str = ""


class _Refusal(Exception):
    def __init__(self, status: int, outcome: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.outcome = outcome
        self.detail = detail


class EgressProxy:
    """An allowlisting HTTP proxy on ``socket_path`` (mode 0o666), as a context.

    ``allow`` is parsed at once (a bad entry raises ValueError). ``phase`` is
    read at the start of each attempt and may be reassigned between phases of
    a replay. ``on_attempt`` runs on a proxy thread, once per attempt; what it
    raises is logged and ignored.
    """

    def __init__(
        self,
        socket_path: Path | str,
        allow: Sequence[str],
        phase: str,
        on_attempt: Callable[[ConnectAttempt], object] | None = None,
        *,
        max_header_bytes: int = 16 * 1024,
        max_tunnels: int = 32,
        max_clients: int = 64,
        header_timeout: float = 30.0,
        idle_timeout: float = 300.0,
        connect_timeout: float = 10.0,
        max_kept: int = 200,
    ) -> None:
        if isinstance(allow, str):
            raise TypeError("allow is a sequence of host:port patterns, not a str")
        self.socket_path = Path(socket_path)
        self.rules = parse_allowlist(allow)
        self.phase = phase
        self.on_attempt = on_attempt
        self.max_header_bytes = max_header_bytes
        self.header_timeout = header_timeout
        self.idle_timeout = idle_timeout
        self.connect_timeout = connect_timeout
        self._tunnels = threading.BoundedSemaphore(max_tunnels)
        self._clients = threading.BoundedSemaphore(max_clients)
        self._lock = threading.Lock()
        self._attempts: list[ConnectAttempt] = []
        self.max_kept = max_kept
        self._counts = AttemptCounts()
        self._open: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._closing = threading.Event()
        self._listener: socket.socket | None = None
        self._inode = 0
        self._acceptor: threading.Thread | None = None

    @property
    def attempts(self) -> list[ConnectAttempt]:
        """The first ``max_kept`` attempts, in the order they ended (a copy):
        an agent asking for connections in a loop must not fill the worker's
        memory, nor the replay's page. ``counts`` counts them all."""
        with self._lock:
            return list(self._attempts)

    @property
    def counts(self) -> AttemptCounts:
        """Every attempt, counted by phase, host, port and outcome (a copy)."""
        with self._lock:
            return self._counts.copy()

    # -- lifecycle -----------------------------------------------------------

    def __enter__(self) -> EgressProxy:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> None:
        path = self.socket_path
        if len(os.fsencode(path)) > 107:
            raise ValueError(f"{path} is too long for a unix socket path")
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISSOCK(path.lstat().st_mode):
                raise FileExistsError(f"{path} exists and is not a socket")
            path.unlink()  # a socket left by a worker that died
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(path))
            # The sandbox runs as another uid; connecting needs write access.
            path.chmod(0o666)
            self._inode = path.lstat().st_ino
            listener.listen(128)
            # accept() wakes up now and then to notice close().
            listener.settimeout(0.2)
        except BaseException:
            listener.close()
            raise
        self._listener = listener
        self._acceptor = threading.Thread(
            target=self._accept_loop, name=f"egress {path.name}", daemon=True
        )
        self._acceptor.start()

    def close(self, timeout: float = 5.0) -> None:
        """Stop accepting, cut every open connection, remove the socket."""
        self._closing.set()
        if self._acceptor is not None:
            self._acceptor.join(timeout)
        if self._listener is not None:
            self._listener.close()
            with contextlib.suppress(OSError):
                if self.socket_path.lstat().st_ino == self._inode:
                    self.socket_path.unlink()
        with self._lock:
            open_sockets = list(self._open)
            threads = list(self._threads)
        for sock in open_sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._closing.is_set():
            if not self._clients.acquire(timeout=0.2):
                continue
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                self._clients.release()
                continue
            except OSError:
                self._clients.release()
                time.sleep(0.05)  # out of file descriptors: let some close
                continue
            thread = threading.Thread(
                target=self._serve_client, args=(client,), daemon=True
            )
            with self._lock:
                self._threads.add(thread)
            try:
                thread.start()
            except RuntimeError:
                logger.warning("egress proxy: no thread for a new client")
                with self._lock:
                    self._threads.discard(thread)
                client.close()
                self._clients.release()
                time.sleep(0.05)

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.add(sock)
        if self._closing.is_set():
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    # -- one client ----------------------------------------------------------

    def _serve_client(self, client: socket.socket) -> None:
        started = time.monotonic()
        attempt = _Draft(phase=self.phase)
        upstream: socket.socket | None = None
        tunnel = False
        try:
            self._track(client)
            head, extra = self._read_head(client)
            if head is None:
                return  # connected and hung up: nothing was attempted
            method, host, port, forward = self._parse(head, attempt)
            self._admit(attempt, host, port)
            tunnel = self._tunnels.acquire(blocking=False)
            if not tunnel:
                raise _Refusal(503, "error", "too many open connections")
            upstream = self._connect(host, port)
            self._track(upstream)
            if method == "CONNECT":
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                first = extra
            else:
                first = forward + extra
            if first:
                upstream.sendall(first)
            up, down = splice(
                client,
                upstream,
                idle_timeout=self.idle_timeout,
                close_on_b_eof=method != "CONNECT",
            )
            attempt.outcome = "ok"
            attempt.bytes_up, attempt.bytes_down = len(first) + up, down
        except _Refusal as refusal:
            attempt.outcome, attempt.detail = refusal.outcome, refusal.detail
            _respond(client, refusal.status, refusal.detail)
        except OSError as error:
            if upstream is not None and self._closing.is_set():
                # Connected, then cut by the proxy's own close (the replay's
                # end): the attempt reached its host.
                attempt.outcome = "ok"
            else:
                attempt.outcome = "error"
                attempt.detail = f"connection failed: {error.strerror or error}"
        except Exception:
            # Recorded all the same: an attempt must never go missing.
            logger.exception("egress proxy failed serving %s", attempt.host)
            attempt.outcome, attempt.detail = "error", "proxy failure"
            _respond(client, 502, attempt.detail)
        finally:
            if tunnel:
                self._tunnels.release()
            with self._lock:
                for sock in (client, upstream):
                    if sock is not None:
                        sock.close()
                        self._open.discard(sock)
                self._threads.discard(threading.current_thread())
            self._clients.release()
        if attempt.method or attempt.host or attempt.detail:
            self._record(attempt, started)

    def _read_head(self, client: socket.socket) -> tuple[bytes | None, bytes]:
        """The request head (without the blank line) and the bytes after it."""
        client.settimeout(self.header_timeout)
        buffer = b""
        deadline = time.monotonic() + self.header_timeout
        while b"\r\n\r\n" not in buffer:
            if len(buffer) > self.max_header_bytes:
                raise _Refusal(431, "error", "request header too large")
            client.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = client.recv(8192)
            except TimeoutError:
                if not buffer:
                    return None, b""
                raise _Refusal(
                    408, "error", "request header not sent in time"
                ) from None
            if not data:
                if not buffer:
                    return None, b""
                raise _Refusal(400, "error", "connection closed inside the header")
            buffer += data
        head, _, extra = buffer.partition(b"\r\n\r\n")
        if len(head) > self.max_header_bytes:
            raise _Refusal(431, "error", "request header too large")
        # Blocking sends from here on (the answer, the 200) are bounded too.
        client.settimeout(self.idle_timeout)
        return head, extra

    def _parse(self, head: bytes, attempt: _Draft) -> tuple[str, Host, int, bytes]:
        """(method, host, port, head to forward upstream) from a request head."""
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise _Refusal(400, "error", "not an HTTP/1 request line")
        method, target, version = parts
        attempt.method = method[:16]
        path = ""
        if method == "CONNECT":
            authority, default_port = target, None
        elif target[:7].lower() == "http://":
            rest = target[7:].partition("#")[0]
            cut = min((i for i in map(rest.find, "/?") if i >= 0), default=len(rest))
            authority, path, default_port = rest[:cut], rest[cut:], 80
            if not path.startswith("/"):
                path = "/" + path
        elif target[:8].lower() == "https://":
            raise _Refusal(400, "error", "https URLs go through CONNECT")
        else:
            raise _Refusal(400, "error", "not a proxy request (absolute URL needed)")
        _note_target(attempt, authority)
        try:
            host, port = parse_target(authority, default_port)
        except ValueError as error:
            raise _Refusal(403, "denied", f"egress refused: {error}") from None
        attempt.host, attempt.port = host.name[:_HOST_CHARS], port
        if method == "CONNECT":
            return method, host, port, b""
        return (
            method,
            host,
            port,
            _forward_head(method, path, version, lines[1:], authority),
        )

    def _admit(self, attempt: _Draft, host: Host, port: int) -> None:
        if first_match(self.rules, host, port) is None:
            raise _Refusal(
                403,
                "denied",
                f"egress to {host}:{port} is not allowed in the {attempt.phase} phase",
            )
        attempt.allowed = True

    def _connect(self, host: Host, port: int) -> socket.socket:
        # Resolved here, on the worker, only after the name was allowed.
        name = str(host.address) if host.address is not None else host.name
        try:
            addresses = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
        except socket.gaierror as error:
            raise _Refusal(
                502, "unreachable", f"{host} does not resolve: {error.strerror}"
            ) from None
        reason = "no address"
        for family, kind, proto, _, address in addresses:
            upstream = socket.socket(family, kind, proto)
            try:
                upstream.settimeout(self.connect_timeout)
                upstream.connect(address)
                if upstream.getsockname() == upstream.getpeername():
                    # A closed port on this host can be picked as the
                    # connection's own source port: TCP then connects the
                    # socket to itself and the client would read its own bytes.
                    raise ConnectionRefusedError(
                        errno.ECONNREFUSED, "Connection refused"
                    )
            except OSError as error:
                upstream.close()
                reason = error.strerror or type(error).__name__
                continue
            upstream.settimeout(self.idle_timeout)
            return upstream
        raise _Refusal(
            502, "unreachable", f"could not connect to {host}:{port}: {reason}"
        )

    def _record(self, draft: _Draft, started: float) -> None:
        attempt = ConnectAttempt(
            duration_ms=(time.monotonic() - started) * 1000, **asdict(draft)
        )
        with self._lock:
            if len(self._attempts) < self.max_kept:
                self._attempts.append(attempt)
            self._counts.add(attempt)
        logger.info(
            "egress %s %s:%s %s",
            attempt.phase,
            attempt.host,
            attempt.port,
            attempt.outcome,
        )
        if self.on_attempt is not None:
            try:
                self.on_attempt(attempt)
            except Exception:
                logger.exception("on_attempt failed for %s", attempt)


class AttemptCounts:
    """Connection attempts counted by (phase, host, port, allowed, outcome),
    for at most ``MAX_KEYS`` distinct keys; the rest count under one key per
    phase and outcome whose host is ``OTHER_HOSTS``."""

    MAX_KEYS = 1000
    OTHER_HOSTS = "(other hosts)"

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str, int, bool, str], int] = {}

    def add(self, attempt: ConnectAttempt, n: int = 1) -> None:
        key = (
            attempt.phase,
            attempt.host,
            attempt.port,
            attempt.allowed,
            attempt.outcome,
        )
        self._add(key, n)

    def _add(self, key: tuple[str, str, int, bool, str], n: int) -> None:
        if key not in self._counts and len(self._counts) >= self.MAX_KEYS:
            key = (key[0], self.OTHER_HOSTS, 0, key[3], key[4])
        self._counts[key] = self._counts.get(key, 0) + n

    def merge(self, other: AttemptCounts) -> None:
        for key, n in other._counts.items():
            self._add(key, n)

    def copy(self) -> AttemptCounts:
        twin = AttemptCounts()
        twin._counts = dict(self._counts)
        return twin

    @property
    def total(self) -> int:
        return sum(self._counts.values())

    def rows(self) -> list[dict]:
        """The counts as plain rows, most attempts first."""
        ordered = sorted(self._counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return [
            {
                "phase": phase,
                "host": host,
                "port": port,
                "allowed": allowed,
                "outcome": outcome,
                "count": count,
            }
            for (phase, host, port, allowed, outcome), count in ordered
        ]


def _note_target(attempt: _Draft, authority: str) -> None:
    """Record what a refused target looked like, as far as it can be read."""
    try:
        host, port = split_authority(authority, 0)
    except ValueError:
        host, colon, port = authority.rpartition(":")
        if not colon or not port.isdigit():
            host, port = authority, ""
    attempt.host = host[:_HOST_CHARS]
    if port.isdigit() and int(port) < 65536:
        attempt.port = int(port)


def _forward_head(
    method: str, path: str, version: str, header_lines: list[str], authority: str
) -> bytes:
    """The request head sent upstream, in origin form.

    Host is the URL's authority, whatever the client sent (RFC 9112, 3.2.2):
    the connection goes where the URL says, and so does the request. Headers
    the client names in Connection are dropped, except the ones that delimit
    the body, which is relayed as it comes.
    """
    named_hop: set[str] = set()
    kept: list[tuple[str, str]] = []
    for line in header_lines:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or line[:1] in " \t":
            raise _Refusal(400, "error", "malformed header line")
        lowered = name.lower()
        if lowered == "connection":
            named_hop |= {token.strip().lower() for token in value.split(",")}
        if lowered.startswith("proxy-") or lowered in _DROPPED_HEADERS:
            continue
        kept.append((name, value.strip()))
    named_hop -= _BODY_HEADERS
    lines = [f"{method} {path} {version}", f"Host: {authority}"]
    lines += [f"{n}: {v}" for n, v in kept if n.lower() not in named_hop]
    lines += ["Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1")


def _respond(client: socket.socket, status: int, detail: str) -> None:
    body = (detail.replace("\r", " ").replace("\n", " ") + "\n").encode()
    head = (
        f"HTTP/1.1 {status} {_PHRASES.get(status, 'Error')}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    with contextlib.suppress(OSError):
        client.settimeout(5)
        client.sendall(head.encode() + body)
