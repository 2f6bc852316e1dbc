"""The per-replay model gateway: an HTTP endpoint on a unix socket.

A sandboxed agent reaches its model provider only through here. The gateway
routes ``/<provider name>/<path>`` to that provider, forwards only the API's
own endpoints (``wire.allowed``), checks the replay's placeholder key, swaps in
the real key, streams the response through as it arrives, meters each call
(tokens, cost, the model that answered) and refuses calls once a cap is
reached. Agents point their SDKs at it with::

    ANTHROPIC_BASE_URL=http://127.0.0.1:<port>/<name>
    OPENAI_BASE_URL=http://127.0.0.1:<port>/<name>/v1

(the port being the sandbox relay's; ``wire`` documents how paths join the
upstream base URL).

The real key is held in memory only: it is never logged, recorded or
answered, and the upstream's bytes are scrubbed of it on the way back. An
admitted call is ``forward``'s from there: it goes up, its answer comes back.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import os
import socket
import socketserver
import ssl
import stat
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from replayhub.gateway import tape, wire
from replayhub.gateway.calls import Caps, Draft, MeteredCall, Totals
from replayhub.gateway.forward import CHUNK_BYTES, forward
from replayhub.gateway.playback import TapePlayer, TapeRecorder
from replayhub.gateway.providers import ConnectionPool, Upstream
from replayhub.gateway.redact import scrub

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 32 * 1024 * 1024
# How long close() waits for the calls in flight (and their on_call) to end.
CLOSE_WAIT_SECONDS = 30.0
# A refused call's body is read and dropped up to this size.
DRAIN_BYTES = 256 * 1024 * 1024


class _Refusal(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class ModelGateway:
    """Serves one replay's model calls on ``socket_path`` while open.

    ``calls`` holds every call, refused ones too, by the time the agent's
    response ends. ``on_call`` gets each one after the response has ended, in
    the connection's thread (a slow callback delays only the next call on that
    connection), and has had every call once ``close`` returns; exceptions it
    raises are logged.

    ``connect_timeout`` bounds connecting to an upstream (TLS handshake
    included); ``read_timeout`` the longest the upstream may stay silent,
    before its response or between two pieces of it (a long generation that
    streams never hits it). A request body past ``max_body_bytes`` is refused
    with 413.

    Caps are checked before a call is forwarded, on what the forwarded calls
    measured: a call is refused (429) once the tokens or the cost reached their
    cap, or once ``max_requests`` calls were forwarded. A call admitted below a
    cap completes even if it takes the totals past it. Calls running at the
    same time are each admitted on the totals before them; the requests cap
    counts them as they are admitted, so it holds exactly. With a cost cap,
    tokens used on a model with no price make the cost unknown: the cost cap
    then refuses further calls (it cannot be enforced otherwise).

    ``recorder`` keeps every answered exchange (the replay's tape). With a
    ``player`` (a tape replay) a call is answered from the tape, nothing going
    up and nothing billed; a call the tape cannot answer is refused (409),
    or forwarded when the player goes on live.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str],
        providers: list[Upstream],
        placeholder: str,
        caps: Caps,
        on_call: Callable[[MeteredCall], object] | None = None,
        *,
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_kept: int = 200,
        recorder: TapeRecorder | None = None,
        player: TapePlayer | None = None,
    ) -> None:
        if not placeholder:
            raise ValueError("the placeholder key must not be empty")
        names = [upstream.name for upstream in providers]
        if len(set(names)) != len(names):
            raise ValueError("provider names must be unique")
        self.socket_path = os.fspath(socket_path)
        self.providers = {upstream.name: upstream for upstream in providers}
        self.placeholder = placeholder
        self.caps = caps
        self.on_call = on_call
        self.max_body_bytes = max_body_bytes
        self.recorder = recorder
        self.player = player
        self.cap_fired: str | None = None
        # When a cap first refused a call (time.monotonic()), for the phase
        # that stops the agent a grace period later.
        self.cap_fired_at: float | None = None
        # When a tape replay first refused a call the tape could not answer.
        self.tape_left_at: float | None = None
        context = None
        if any(urlsplit(u.base_url).scheme == "https" for u in providers):
            context = ssl.create_default_context()
        self._pools = {
            upstream.name: ConnectionPool(
                upstream,
                connect_timeout=connect_timeout,
                read_timeout=read_timeout,
                context=context,
            )
            for upstream in providers
        }
        self._secrets = [u.key.encode() for u in providers if u.key]
        self._lock = threading.Lock()
        self._calls: list[MeteredCall] = []
        # Refused calls past the first ``max_kept`` are only counted, by
        # provider and status: an agent retrying in a loop must not fill the
        # worker's memory.
        self.max_kept = max_kept
        self._refused_kept = 0
        self.refused_counts: dict[str, int] = {}
        self._totals = Totals()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ModelGateway:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def calls(self) -> list[MeteredCall]:
        with self._lock:
            return list(self._calls)

    @property
    def totals(self) -> Totals:
        with self._lock:
            return self._totals

    def start(self) -> None:
        """Creates the socket (mode 0o666) and serves it in a thread.

        The socket's directory must exist and belong to this process's user:
        it, not the socket's mode, decides who can reach the gateway.
        """
        directory = os.path.dirname(os.path.abspath(self.socket_path))
        info = os.stat(directory)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            raise PermissionError(f"{directory} is not a directory this user owns")
        if os.path.lexists(self.socket_path):
            raise FileExistsError(self.socket_path)
        if len(os.fsencode(self.socket_path)) > 107:
            raise ValueError(f"socket path too long for AF_UNIX: {self.socket_path}")
        self._server = _Server(self.socket_path, self)
        # The sandbox's user may differ from ours; the directory keeps others out.
        os.chmod(self.socket_path, 0o666)  # noqa: S103
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"model-gateway {self.socket_path}",
            daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        """Stops serving, ends the calls in flight and removes the socket."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.end_connections()
        for pool in self._pools.values():
            pool.close()
        if not server.wait_done(CLOSE_WAIT_SECONDS):
            logger.error("model gateway: calls still running after close")
        server.server_close()
        if self._thread is not None:
            self._thread.join()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)

    def scrub(self, text: str) -> str:
        """``text`` with every provider's key masked, in any of its forms."""
        data = text.encode("utf-8", "surrogateescape")
        for secret in self._secrets:
            data = scrub(data, secret)
        return data.decode("utf-8", "surrogateescape")

    def _admit(
        self, draft: Draft, upstream: Upstream, request: wire.Request
    ) -> str | None:
        """Why a cap refuses the call now, or ``None`` and the call admitted:
        counted, and its worst case held back until its usage is known."""
        worst = request.worst_case(upstream.kind)
        tokens = (worst.input_tokens or 0) + (worst.output_tokens or 0)
        cost = (
            wire.cost(upstream.prices, request.model, worst)
            if request.billed
            else Decimal(0)
        )
        with self._lock:
            totals, caps = self._totals, self.caps
            held_tokens = totals.tokens + totals.reserved_tokens
            held_cost = totals.cost_usd + totals.reserved_cost_usd
            fired = None
            if caps.max_tokens is not None and (
                held_tokens >= caps.max_tokens or held_tokens + tokens > caps.max_tokens
            ):
                fired = "tokens"
            elif caps.max_cost_usd is not None and (
                totals.unpriced
                or cost is None
                or held_cost >= caps.max_cost_usd
                or held_cost + cost > caps.max_cost_usd
            ):
                fired = "cost"
            elif caps.max_requests is not None and totals.requests >= caps.max_requests:
                fired = "requests"
            if fired:
                self.cap_fired = self.cap_fired or fired
                self.cap_fired_at = self.cap_fired_at or time.monotonic()
                spent = {
                    "tokens": f"{held_tokens} of {caps.max_tokens} tokens",
                    "cost": f"${held_cost} of ${caps.max_cost_usd}",
                    "requests": f"{totals.requests} of {caps.max_requests} calls",
                }[fired]
                return f"this replay's {fired} cap is reached ({spent} spent or held)"
            if request.billed:
                draft.worst, draft.reserved_tokens = worst, tokens
                draft.reserved_cost_usd = cost
            self._totals = replace(
                totals,
                requests=totals.requests + 1,
                reserved_tokens=totals.reserved_tokens + tokens,
                reserved_cost_usd=totals.reserved_cost_usd + (cost or 0),
            )
            return None

    def _record(self, draft: Draft) -> MeteredCall:
        usage, cost_usd, estimated = draft.charged()
        now = time.perf_counter()
        call = MeteredCall(
            provider=draft.provider,
            kind=draft.kind,
            endpoint=draft.endpoint,
            model_requested=draft.model_requested,
            model_answered=usage.model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_tokens=usage.cached_tokens,
            cost_usd=cost_usd,
            latency_ms=(now - draft.started) * 1000,
            first_byte_ms=(
                (draft.first_byte - draft.started) * 1000
                if draft.first_byte is not None
                else None
            ),
            status=draft.status,
            http_status=draft.http_status,
            error=self.scrub(draft.error)[:300],
            streamed=draft.streamed,
            started_at=draft.started_at,
            reserved_tokens=draft.reserved_tokens,
            reserved_cost_usd=draft.reserved_cost_usd,
            usage_estimated=estimated,
        )
        tokens = (usage.input_tokens or 0) + (usage.output_tokens or 0)
        with self._lock:
            if call.status != "refused":
                self._calls.append(call)
            else:
                key = f"{call.provider} {call.http_status}"
                self.refused_counts[key] = self.refused_counts.get(key, 0) + 1
                if self._refused_kept < self.max_kept:
                    self._refused_kept += 1
                    self._calls.append(call)
            if call.status != "refused":
                totals = self._totals
                self._totals = replace(
                    totals,
                    tokens=totals.tokens + tokens,
                    cost_usd=totals.cost_usd + (call.cost_usd or 0),
                    unpriced=totals.unpriced + (call.cost_usd is None and tokens > 0),
                    reserved_tokens=totals.reserved_tokens - draft.reserved_tokens,
                    reserved_cost_usd=totals.reserved_cost_usd
                    - (draft.reserved_cost_usd or 0),
                )
        level = (
            logging.INFO if call.error or call.status == "refused" else logging.DEBUG
        )
        logger.log(
            level,
            "model call %s %s %s: %s %s tokens in=%s out=%s %.1f ms %s",
            call.provider,
            call.endpoint,
            call.model_requested,
            call.status,
            call.http_status,
            call.input_tokens,
            call.output_tokens,
            call.latency_ms,
            call.error,
        )
        return call

    def _notify(self, call: MeteredCall) -> None:
        if self.on_call is None:
            return
        try:
            self.on_call(call)
        except Exception as exc:
            logger.error(
                "model gateway: on_call failed: %s", self.scrub(f"{type(exc)}: {exc}")
            )


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    block_on_close = False  # it would not wait for daemon threads anyway
    request_queue_size = 64

    def __init__(self, path: str, gateway: ModelGateway) -> None:
        self.gateway = gateway
        self._active: set[socket.socket] = set()
        self._running = 0
        self._changed = threading.Condition()
        super().__init__(path, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        # Counted before its thread starts, so neither end_connections() nor
        # wait_done() can miss a connection whose thread has not run yet.
        with self._changed:
            self._active.add(request)
            self._running += 1
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._done(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._done(request)

    def _done(self, request: Any) -> None:
        with self._changed:
            self._active.discard(request)
            self._running -= 1
            self._changed.notify_all()

    def wait_done(self, timeout: float) -> bool:
        """Waits for the connections' threads to end (and their on_call)."""
        with self._changed:
            return self._changed.wait_for(lambda: self._running == 0, timeout)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # the agent hung up
        # socketserver would print the traceback as is; a key in an exception's
        # text must not reach the log.
        logger.error(
            "model gateway: a connection failed: %s",
            self.gateway.scrub(traceback.format_exc()),
        )

    def end_connections(self) -> None:
        with self._changed:
            active = list(self._active)
        for sock in active:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Calls are logged once each, by the gateway."""

    def address_string(self) -> str:
        return "sandbox"

    def _handle(self) -> None:
        gateway = self.server.gateway
        started = time.perf_counter()
        path, mark, query = self.path.partition("?")
        route = path.removeprefix("/")
        name, slash, rest = route.partition("/")
        draft = Draft(
            provider=name[:64],
            endpoint=(slash + rest)[:200],
            started=started,
            started_at=datetime.now(UTC),
        )
        length = self.headers.get("Content-Length")
        self._body_unread = bool(
            self.headers.get("Transfer-Encoding") or (length and length != "0")
        )
        self._body_started = False
        kind = wire.agent_kind(self.headers)
        try:
            upstream = gateway.providers.get(name)
            if upstream is None:
                raise _Refusal(
                    404, f"the gateway has no provider named {draft.provider!r}"
                )
            kind = draft.kind = upstream.kind
            draft.endpoint = wire.endpoint(kind, draft.endpoint)
            if not wire.allowed(kind, self.command, slash + rest):
                raise _Refusal(
                    403, f"the gateway does not forward {self.command} {draft.endpoint}"
                )
            given = wire.placeholder(kind, self.headers.items())
            if given is None or not hmac.compare_digest(
                given.encode(), gateway.placeholder.encode()
            ):
                raise _Refusal(401, "the key is missing or is not this replay's key")
            request = wire.read_request(kind, slash + rest, self._read_body())
            if request.refused is not None:
                raise _Refusal(*request.refused)
            draft.model_requested = request.model
            draft.streamed = request.stream
            served = None
            if gateway.player is not None:
                played = gateway.player.take(
                    kind, draft.endpoint, request.body, stream=request.stream
                )
                if isinstance(played, tape.Divergence):
                    # No later call can be answered either: the run is ended
                    # after the grace a cap gets (an SDK would retry for minutes).
                    gateway.tape_left_at = gateway.tape_left_at or time.monotonic()
                    raise _Refusal(409, f"this is a tape replay: {played.detail}")
                # A served call spends nothing: only the requests cap counts it.
                served = played
                request = replace(request, billed=served is None and request.billed)
            refused = gateway._admit(draft, upstream, request)
            if refused:
                raise _Refusal(429, refused)
        except _Refusal as refusal:
            self._refuse(draft, kind, refusal)
            return
        if served is not None:
            self._play(draft, served, request)
            return
        target = wire.upstream_path(
            kind, upstream.base_url, slash + rest + mark + query
        )
        pool = gateway._pools[upstream.name]
        forward(self, gateway, pool, draft, upstream, target, request)

    # Every method comes here, to be refused in the API's shape if not allowed.
    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle

    def _read_body(self) -> bytes:
        return b"".join(self._body(self.server.gateway.max_body_bytes))

    def _drain(self) -> None:
        """Reads and drops a refused call's body: the agent sends it whole
        before it reads, and would otherwise meet a broken pipe, not the
        answer. A body too large to drop, or read in part, ends the
        connection instead."""
        if not self._body_unread:
            return
        if self._body_started:
            self.close_connection = True
            return
        try:
            for _ in self._body(DRAIN_BYTES):
                pass
        except (_Refusal, OSError):
            self.close_connection = True

    def _body(self, limit: int) -> Iterator[bytes]:
        """The request body in pieces, checked against ``limit``."""
        coding = self.headers.get("Transfer-Encoding")
        length = self.headers.get("Content-Length")
        if coding is not None:
            if length is not None or coding.strip().lower() != "chunked":
                raise _Refusal(400, "unsupported request framing")
            sizes = self._chunk_sizes()
        elif length is None:
            sizes = iter(())
        elif not length.isascii() or not length.isdigit():
            raise _Refusal(400, "malformed Content-Length")
        else:
            sizes = iter((int(length),))
        total = 0
        for size in sizes:
            total += size
            if total > limit:
                raise _Refusal(413, f"the request body is larger than {limit} bytes")
            self._body_started = True
            while size:
                piece = self.rfile.read(min(size, CHUNK_BYTES))
                if not piece:
                    raise _Refusal(400, "the request body ended early")
                size -= len(piece)
                yield piece
        self._body_unread = False

    def _chunk_sizes(self) -> Iterator[int]:
        """The sizes of a chunked body's chunks, read as its data is."""
        first = True
        while True:
            if not first:
                self.rfile.readline(3)  # the CRLF after a chunk's data
            first = False
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _Refusal(400, "malformed chunked request body") from None
            if size < 0:
                raise _Refusal(400, "malformed chunked request body")
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return
            yield size

    def answer(self, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
        self._drain()
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            with contextlib.suppress(OSError):
                self.wfile.write(body)

    def _refuse(self, draft: Draft, kind: str, refusal: _Refusal) -> None:
        gateway = self.server.gateway
        draft.status, draft.http_status = "refused", refusal.status
        draft.error = refusal.message
        call = gateway._record(draft)
        # Stainless SDKs (anthropic, openai) would retry a 429 otherwise: a
        # refusal stays one.
        self.answer(
            refusal.status,
            wire.error_body(kind, refusal.status, gateway.scrub(refusal.message)),
            [("Content-Type", "application/json"), ("x-should-retry", "false")],
        )
        gateway._notify(call)

    def _play(self, draft: Draft, played: tape.Exchange, request: wire.Request) -> None:
        """Answers from the tape, in the wire format the agent asked for."""
        gateway = self.server.gateway
        content_type, pieces = tape.serve(played, stream=request.stream)
        body = b"".join(pieces)
        draft.status = draft.http_status = played.status
        draft.usage = wire.Usage(0, 0, 0, 0, model=played.model or None, complete=True)
        draft.cost_usd = Decimal(0)
        if gateway.recorder is not None:
            gateway.recorder.keep_served(played, request.body, body, request.stream)
        call = gateway._record(draft)
        self.answer(played.status, body, [("Content-Type", content_type)])
        gateway._notify(call)
