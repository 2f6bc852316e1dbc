"""A local stand-in for the paid model APIs: both wire formats on 127.0.0.1.

It is no model: the demo serves it (``manage.py demo_model``) so that a
newcomer sees a replay reach "its model" through the gateway, and the tests
speak to it in place of a paid API.

Answers are deterministic: the reply echoes the last user message, a token is
a word (input: every word of the system prompt and the messages; output: the
reply's), and usage comes where the real APIs put it — in the JSON body, in
``message_start``/``message_delta`` for anthropic streams, and in a last
``"choices": []`` chunk for openai streams that ask for it. Anything but the
real key sent the API's own way gets a 401 (unless ``key`` is empty: a
local server that takes none); anthropic takes it in ``x-api-key`` or, as its
current Python SDK sends an API key, ``Authorization: Bearer``.

Knobs (attributes, set between calls): ``first_byte_delay`` (seconds before
the status line), ``event_delay`` (between stream events), ``hold`` (an event
a stream waits on after its first event), ``answer_model`` (answer as another
model), ``cached_tokens`` (input tokens reported as read from cache),
``leak_key`` (put the key it received in the reply, as a careless upstream
might; ``leak_as`` says how: ``"plain"``, ``"base64"``, ``"json"`` (its first
characters JSON-escaped in the body's bytes), ``"percent"`` (percent-encoded),
``"split"`` (a stream's deltas carry it a few characters each), ``"gzip"``
(the whole body gzip-compressed, although identity was asked for) or ``"br"``
(the same bytes labelled with an encoding the gateway does not read)),
``drop_idle`` (close each connection after its response without saying so, as
a server whose keep-alive timeout ran out does), ``failures``
(HTTP statuses answered, in the API's error shape, to the next completion
requests, one each, before answering normally; a 429 says ``Retry-After: 0``),
``replies`` (texts the next completions answer with, one each, instead of the
echo), ``bill_output_tokens`` (the output tokens a completion's usage reports,
as a long generation would), ``cut_after`` (a stream ends after this many
events, its connection closed without its usage, as an upstream that fails
mid-answer does).

``calls`` counts every request it received, kept (``received``) or not: a
tape replay asserts it stays where it was.
"""

from __future__ import annotations

import base64
import gzip
import json
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# Random per run, so finding it in an output proves a leak, not a coincidence.
REAL_KEY = "sk-real-" + secrets.token_hex(16)


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        return values[0] if values else None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            block.get("text", "") for block in content if isinstance(block, dict)
        )
    return ""


def _words(text: str) -> int:
    return len(text.split())


class StandInProvider:
    """Both APIs on one server: ``/v1/messages`` (+ ``count_tokens``),
    ``/v1/chat/completions`` and ``/v1/models`` (shaped by the auth header)."""

    def __init__(self, key: str, port: int = 0) -> None:
        self.key = key
        self.received: list[Received] = []
        self.calls = 0
        self.first_byte_delay = 0.0
        self.event_delay = 0.0
        self.hold: threading.Event | None = None
        self.answer_model: str | None = None
        self.cached_tokens = 0
        self.leak_key = False
        self.leak_as = "plain"
        self.drop_idle = False
        self.record = True
        self.failures: list[int] = []
        self.replies: list[str] = []
        self.bill_output_tokens: int | None = None
        self.cut_after: int | None = None
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.daemon_threads = True
        self._server.fake = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            daemon=True,
        )

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> StandInProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.hold is not None:
            self.hold.set()
        self._server.shutdown()
        self._server.server_close()


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client (the gateway) that hung up mid-stream, on purpose


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # As real API servers do: small stream events go out at once.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def fake(self) -> StandInProvider:
        return self.server.fake  # type: ignore[attr-defined]

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        fake = self.fake
        self.close_connection = fake.drop_idle
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        fake.calls += 1
        if fake.record:
            fake.received.append(
                Received(self.command, self.path, list(self.headers.items()), body)
            )
        if fake.first_byte_delay:
            time.sleep(fake.first_byte_delay)
        route = (self.command, self.path.partition("?")[0])
        anthropic = route[1].startswith("/v1/messages") or "x-api-key" in self.headers
        if not fake.key:
            pass  # a local server that takes no key
        elif anthropic and fake.key not in (
            self.headers.get("x-api-key"),
            (self.headers.get("Authorization") or "").removeprefix("Bearer "),
        ):
            return self._json(401, _anthropic_error("invalid x-api-key"))
        elif (
            not anthropic and self.headers.get("Authorization") != f"Bearer {fake.key}"
        ):
            return self._json(401, {"error": {"message": "Incorrect API key"}})
        request = json.loads(body) if body else {}
        completion = route in (
            ("POST", "/v1/messages"),
            ("POST", "/v1/chat/completions"),
        )
        if completion and fake.failures:
            return self._failure(fake.failures.pop(0), anthropic)
        if route == ("POST", "/v1/messages"):
            self._messages(request)
        elif route == ("POST", "/v1/messages/count_tokens"):
            self._json(200, {"input_tokens": _prompt_words(request)})
        elif route == ("POST", "/v1/chat/completions"):
            self._chat(request)
        elif route == ("GET", "/v1/models"):
            self._json(200, {"data": [{"id": "echo-1", "type": "model"}]})
        else:
            self._json(404, {"error": {"message": f"no route {route}"}})

    def _failure(self, status: int, anthropic: bool) -> None:
        message = "rate limited" if status == 429 else "the server failed"
        if anthropic:
            data: dict[str, Any] = {
                "type": "error",
                "error": {"type": "api_error", "message": message},
            }
        else:
            data = {"error": {"message": message, "type": "server_error"}}
        body = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if status == 429:
            self.send_header("Retry-After", "0")
        self.end_headers()
        self.wfile.write(body)

    def _reply(self, messages: list[Any]) -> str:
        if self.fake.replies:
            reply = self.fake.replies.pop(0)
        else:
            users = [
                m for m in messages if isinstance(m, dict) and m.get("role") == "user"
            ]
            reply = _text(users[-1].get("content")) if users else ""
        if self.fake.leak_key:
            key = self.fake.key
            if self.fake.leak_as == "base64":
                key = base64.b64encode(key.encode()).decode()
            reply += f" (your key was {key})"
        return reply

    def _leaky(self, body: bytes) -> bytes:
        """The body's bytes with the key written the way ``leak_as`` says."""
        fake, key = self.fake, self.fake.key.encode()
        if not fake.leak_key or not key:
            return body
        if fake.leak_as == "json":
            escaped = b"".join(b"\\u%04x" % c for c in key[:3])
            return body.replace(key, escaped + key[3:])
        if fake.leak_as == "percent":
            return body.replace(key, b"".join(b"%%%02X" % c for c in key))
        return body

    def _json(self, status: int, data: Any) -> None:
        body = self._leaky(json.dumps(data).encode())
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if self.fake.leak_key and self.fake.leak_as in ("gzip", "br"):
            body = gzip.compress(body)
            self.send_header("Content-Encoding", self.fake.leak_as)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, events: list[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i, event in enumerate(events):
            if i == self.fake.cut_after:
                self.close_connection = True
                return
            if i == 1 and self.fake.hold is not None:
                self.fake.hold.wait(10)
            elif i and self.fake.event_delay:
                time.sleep(self.fake.event_delay)
            event = self._leaky(event)
            self.wfile.write(b"%x\r\n%b\r\n" % (len(event), event))
        self.wfile.write(b"0\r\n\r\n")

    def _messages(self, request: dict[str, Any]) -> None:
        fake = self.fake
        model = fake.answer_model or request.get("model", "")
        reply = self._reply(request.get("messages", []))
        prompt = _prompt_words(request)
        cached = min(fake.cached_tokens, prompt)
        output = fake.bill_output_tokens or _words(reply)
        usage = {
            "input_tokens": prompt - cached,
            "output_tokens": output,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": 0,
        }
        if not request.get("stream"):
            return self._json(
                200,
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [{"type": "text", "text": reply}],
                    "stop_reason": "end_turn",
                    "usage": usage,
                },
            )
        start: dict[str, Any] = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "usage": {**usage, "output_tokens": 1},
        }
        events = [
            _sse("message_start", {"type": "message_start", "message": start}),
            _sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            _sse("ping", {"type": "ping"}),
        ]
        for word in _pieces(reply, fake.leak_as == "split"):
            delta = {"type": "text_delta", "text": word}
            events.append(
                _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": delta},
                )
            )
        events += [
            _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": output},
                },
            ),
            _sse("message_stop", {"type": "message_stop"}),
        ]
        self._stream(events)

    def _chat(self, request: dict[str, Any]) -> None:
        fake = self.fake
        model = fake.answer_model or request.get("model", "")
        reply = self._reply(request.get("messages", []))
        prompt = _prompt_words(request)
        output = fake.bill_output_tokens or _words(reply)
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": output,
            "total_tokens": prompt + output,
            "prompt_tokens_details": {"cached_tokens": min(fake.cached_tokens, prompt)},
        }
        if not request.get("stream"):
            return self._json(
                200,
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": reply},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                },
            )
        with_usage = (request.get("stream_options") or {}).get("include_usage")

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            data: dict[str, Any] = {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            if with_usage:
                data["usage"] = None
            return _sse(None, data)

        events = [chunk({"role": "assistant", "content": ""})]
        events += [
            chunk({"content": word}) for word in _pieces(reply, fake.leak_as == "split")
        ]
        events.append(chunk({}, "stop"))
        if with_usage:
            events.append(
                _sse(
                    None,
                    {
                        "id": "chatcmpl-1",
                        "object": "chat.completion.chunk",
                        "model": model,
                        "choices": [],
                        "usage": usage,
                    },
                )
            )
        events.append(b"data: [DONE]\n\n")
        self._stream(events)


def _pieces(reply: str, small: bool) -> list[str]:
    """A reply's stream deltas: a word each, or a few characters each."""
    if small:
        return [reply[i : i + 4] for i in range(0, len(reply), 4)]
    return [word + " " for word in reply.split()]


def _prompt_words(request: dict[str, Any]) -> int:
    words = _words(_text(request.get("system")))
    for message in request.get("messages", []):
        if isinstance(message, dict):
            words += _words(_text(message.get("content")))
    return words


def _anthropic_error(message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": "authentication_error", "message": message},
    }


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()
