"""Forwarding one admitted call upstream, its answer streamed back scrubbed.

``server`` decides whether a call goes up; this module takes it from there:
the request goes to the provider with the real key, the answer comes back to
the agent piece by piece as it arrives (decoded when the upstream compressed
it, scrubbed of the key, framed chunked), and the call is metered, taped and
recorded once the answer has ended. An agent that hangs up does not end the
call: the upstream bills what it generates, so its answer is still read and
metered to its end, within bounds.

The agent's side is the gateway's request handler and the gateway's side its
``ModelGateway``, each seen through the few members used here (``Agent``,
``Gateway``).
"""

from __future__ import annotations

import contextlib
import http.client
import time
import zlib
from typing import TYPE_CHECKING, Protocol

from replayhub.gateway import wire
from replayhub.gateway.redact import DeltaGuard, Redactor

if TYPE_CHECKING:
    from email.message import Message
    from io import BufferedIOBase

    from replayhub.gateway.calls import Draft, MeteredCall
    from replayhub.gateway.playback import Capture, TapeRecorder
    from replayhub.gateway.providers import ConnectionPool, Upstream

CHUNK_BYTES = 64 * 1024
# A compressed answer is decoded up to this size.
MAX_DECODED_BYTES = 256 * 1024 * 1024
# After the agent hangs up, the upstream's answer is still read (and metered)
# up to this much and this long.
DRAIN_UPSTREAM_BYTES = 64 * 1024 * 1024
DRAIN_UPSTREAM_SECONDS = 120.0


class Agent(Protocol):
    """The agent's side of a call: the gateway's request handler."""

    close_connection: bool

    @property
    def command(self) -> str: ...
    @property
    def request_version(self) -> str: ...
    @property
    def headers(self) -> Message: ...
    @property
    def wfile(self) -> BufferedIOBase: ...
    def send_response_only(self, code: int, message: str | None = None) -> None: ...
    def send_header(self, keyword: str, value: str) -> None: ...
    def end_headers(self) -> None: ...
    def answer(
        self, status: int, body: bytes, headers: list[tuple[str, str]]
    ) -> None: ...


class Gateway(Protocol):
    """The gateway's side of a call: what records, tapes and scrubs it."""

    @property
    def recorder(self) -> TapeRecorder | None: ...
    def scrub(self, text: str) -> str: ...
    def _record(self, draft: Draft) -> MeteredCall: ...
    def _notify(self, call: MeteredCall) -> None: ...


def forward(
    agent: Agent,
    gateway: Gateway,
    pool: ConnectionPool,
    draft: Draft,
    upstream: Upstream,
    target: str,
    request: wire.Request,
) -> None:
    """Sends the admitted call to ``target`` on ``upstream`` and relays its
    answer to the agent; the call is recorded whatever happens."""
    relay = _Relay(agent, gateway, pool, draft, upstream, request)
    if relay.open(target):
        relay.send_head()
        relay.relay_body()


def _decoder(coding: str) -> zlib._Decompress | None:
    """The decoder for an answer's Content-Encoding, ``None`` when it needs
    none; ValueError for an encoding the gateway cannot read."""
    if coding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if coding == "deflate":
        return zlib.decompressobj()
    if coding not in ("", "identity"):
        raise ValueError(coding)
    return None


class _Relay:
    """One call on its way up and its answer on its way back."""

    conn: http.client.HTTPConnection
    response: http.client.HTTPResponse
    decoder: zlib._Decompress | None
    meter: wire.UsageMeter
    capture: Capture | None
    redactor: Redactor
    guard: DeltaGuard | None

    def __init__(
        self,
        agent: Agent,
        gateway: Gateway,
        pool: ConnectionPool,
        draft: Draft,
        upstream: Upstream,
        request: wire.Request,
    ) -> None:
        self.agent = agent
        self.gateway = gateway
        self.pool = pool
        self.draft = draft
        self.upstream = upstream
        self.request = request
        self.decoded = 0
        self.chunked = False
        # When the agent hung up (time.monotonic()), and how much of the
        # answer was read since.
        self.gone_at: float | None = None
        self.unread = 0

    def open(self, target: str) -> bool:
        """Sends the request up and readies the answer's relay; ``False`` when
        the call was answered with a failure instead."""
        upstream, draft = self.upstream, self.draft
        headers = wire.upstream_headers(
            upstream.kind, self.agent.headers.items(), upstream.key
        )
        try:
            self.conn, self.response = self.pool.send(
                self.agent.command, target, headers, self.request.body
            )
        except TimeoutError as exc:
            self.fail(504, "the provider did not answer in time", repr(exc))
            return False
        except (OSError, http.client.HTTPException) as exc:
            self.fail(502, "the provider is unreachable", repr(exc))
            return False
        response = self.response
        draft.status = draft.http_status = response.status
        streaming = wire.is_event_stream(response.getheader("Content-Type"))
        self.meter = wire.UsageMeter(upstream.kind, streaming=streaming)
        # The key is scrubbed from what the agent reads, so the agent must read
        # what was scrubbed: a compressed body (sent although identity was
        # asked for) is decoded first, and one the gateway cannot decode is
        # not passed on.
        coding = (response.getheader("Content-Encoding") or "").strip().lower()
        try:
            self.decoder = _decoder(coding)
        except ValueError:
            response.close()
            self.pool.release(self.conn, reuse=False)
            self.fail(
                502,
                "the provider answered in an encoding the gateway cannot read",
                coding[:40],
            )
            return False
        self.capture = None
        if self.gateway.recorder is not None:
            self.capture = self.gateway.recorder.start(
                upstream.kind, draft.endpoint, self.request.body, served=False
            )
            self.capture.event_stream = streaming
        self.redactor = Redactor(upstream.key.encode())
        self.guard = DeltaGuard(upstream.key.encode()) if streaming else None
        return True

    def fail(self, status: int, message: str, detail: str) -> None:
        """Answers for an upstream that gave no response."""
        draft = self.draft
        draft.status = draft.http_status = status
        draft.error = f"{message} ({detail})"
        call = self.gateway._record(draft)
        body = wire.error_body(draft.kind, status, message)
        self.agent.answer(status, body, [("Content-Type", "application/json")])
        self.gateway._notify(call)

    def send_head(self) -> None:
        """Sends the upstream's status and headers with the gateway's own
        framing; an agent already gone is noted, not an error.

        The body's length is never the upstream's: scrubbing (and decoding)
        changes it, so it goes chunked (or to the connection's end).
        """
        agent, response = self.agent, self.response
        agent.send_response_only(response.status, response.reason)
        for name, value in wire.response_headers(response.getheaders()):
            if self.decoder is not None and name.lower() == "content-encoding":
                continue
            agent.send_header(name, self.gateway.scrub(value))
        if response.status in (204, 304) or agent.command == "HEAD":
            pass
        elif agent.request_version == "HTTP/1.1":
            agent.send_header("Transfer-Encoding", "chunked")
            self.chunked = True
        else:
            agent.close_connection = True
        if agent.close_connection:
            agent.send_header("Connection", "close")
        try:
            agent.end_headers()
        except OSError:
            self.gone_at = time.monotonic()

    def relay_body(self) -> None:
        """Passes each piece on as soon as it arrives (once scrubbed); the last
        is held until the call is recorded, so ``calls`` has the call once the
        agent has the whole response."""
        response = self.response
        while True:
            try:
                data = response.read1(CHUNK_BYTES)
            except (OSError, http.client.HTTPException) as exc:
                self.end(f"the provider's response broke off ({exc!r})")
                return
            if not data and response.length:
                self.end("the provider's response broke off (it ended early)")
                return
            if data and self.draft.first_byte is None and self.request.stream:
                self.draft.first_byte = time.perf_counter()
            # http.client's read1 leaves a response with a length open at its
            # end: a length of 0 is the end.
            if not data or response.isclosed() or response.length == 0:
                break
            try:
                out = self.scrubbed(data)
            except (zlib.error, ValueError) as exc:
                self.end(f"the provider's answer could not be decoded ({exc})")
                return
            if not self.pass_on(data, out):
                return
        self.finish(data)

    def pass_on(self, data: bytes, out: bytes) -> bool:
        """Writes ``out`` to the agent, or, the agent gone, counts ``data``
        against the bounds of reading on; ``False`` once the call has ended."""
        if self.gone_at is None:
            try:
                self.agent.wfile.write(self.frame(out))
            except OSError:
                self.gone_at = time.monotonic()
            return True
        self.unread += len(data)
        if (
            self.unread > DRAIN_UPSTREAM_BYTES
            or time.monotonic() - self.gone_at > DRAIN_UPSTREAM_SECONDS
        ):
            self.end("the agent disconnected; the rest of the answer was not read")
            return False
        return True

    def finish(self, data: bytes) -> None:
        """Relays the last piece ``data`` once the call is recorded."""
        try:
            last = self.frame(self.scrubbed(data, last=True))
        except (zlib.error, ValueError) as exc:
            self.end(f"the provider's answer could not be decoded ({exc})")
            return
        if self.gone_at is not None:
            self.end("the agent disconnected")
            return
        call = self.end()
        with contextlib.suppress(OSError):
            self.agent.wfile.write(last + (b"0\r\n\r\n" if self.chunked else b""))
        self.gateway._notify(call)

    def scrubbed(self, data: bytes, last: bool = False) -> bytes:
        """``data`` as the agent gets it: decoded, then scrubbed (and metered
        and taped on the way)."""
        decoder = self.decoder
        if decoder is not None:
            data = decoder.decompress(data) + (decoder.flush() if last else b"")
            self.decoded += len(data)
            if self.decoded > MAX_DECODED_BYTES:
                raise ValueError("the decoded answer is too large")
        self.meter.feed(data)
        out = self.redactor.feed(data) + (self.redactor.flush() if last else b"")
        if self.guard is not None:
            out = self.guard.feed(out) + (self.guard.flush() if last else b"")
        if self.capture is not None:
            self.capture.feed(out)
        return out

    def frame(self, data: bytes) -> bytes:
        """``data`` as one chunk when the body goes chunked."""
        return b"%x\r\n%b\r\n" % (len(data), data) if self.chunked and data else data

    def end(self, error: str = "") -> MeteredCall:
        """Meters and records the call and gives the upstream connection back;
        a call ended by ``error`` ends the agent's connection too."""
        draft, upstream, response = self.draft, self.upstream, self.response
        recorder = self.gateway.recorder
        draft.usage = usage = self.meter.finish()
        model = usage.model if usage.model in upstream.prices else self.request.model
        draft.cost_usd = wire.cost(upstream.prices, model, usage)
        draft.error = error or usage.error
        response.close()
        self.pool.release(self.conn, reuse=not error and not response.will_close)
        if self.capture is not None and recorder is not None and not error:
            recorder.end(self.capture, status=response.status, usage=usage)
        call = self.gateway._record(draft)
        if error:
            # The agent's response cannot end well: its connection ends.
            self.agent.close_connection = True
            self.gateway._notify(call)
        return call
