"""The model API wire formats the gateway speaks, as pure functions.

``anthropic`` is the Messages API; ``openai`` is the chat-completions/responses
family that vLLM, Ollama and llama.cpp's server also speak; ``gemini`` is
Gemini's ``generateContent`` (its own rules are in ``gemini``). Nothing here does
I/O: the server feeds these functions headers, bodies and the response bytes as
they pass.

Paths. An agent's path, after the ``/<provider name>`` prefix the gateway
routes on, is reduced to an *endpoint*: anthropic keeps the path whole
(``/v1/messages``); openai drops one leading ``/v1``, so an agent configured
with ``…/<name>/v1`` and one configured with ``…/<name>`` both call
``/chat/completions``. The upstream URL is then:

* anthropic: the base URL + the endpoint, with a ``/v1`` the base URL already
  ends in not repeated (``https://api.anthropic.com`` + ``/v1/messages``);
* openai: the base URL is the API root, version included, as ``OPENAI_BASE_URL``
  is (``https://api.openai.com/v1``, ``https://host/v1beta/openai``) + the
  endpoint; a base URL with no path at all gets ``/v1``, where vLLM, Ollama and
  llama.cpp serve it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from replayhub.gateway import gemini
from replayhub.lib import boundedjson

ANTHROPIC = "anthropic"
OPENAI = "openai"
GEMINI = gemini.KIND
KINDS = (ANTHROPIC, OPENAI, GEMINI)

ALLOWED: dict[str, frozenset[tuple[str, str]]] = {
    ANTHROPIC: frozenset(
        {
            ("POST", "/v1/messages"),
            ("POST", "/v1/messages/count_tokens"),
            ("GET", "/v1/models"),
        }
    ),
    OPENAI: frozenset(
        {
            ("POST", "/chat/completions"),
            ("POST", "/responses"),
            ("POST", "/completions"),
            ("POST", "/embeddings"),
            ("GET", "/models"),
        }
    ),
}
# The openai endpoints whose streams carry usage only when asked for it.
USAGE_ON_REQUEST = frozenset({"/chat/completions", "/completions"})
# The endpoints that spend tokens: a call to one is reserved before it goes up.
BILLED = {
    ANTHROPIC: frozenset({"/v1/messages"}),
    OPENAI: frozenset(
        {"/chat/completions", "/responses", "/completions", "/embeddings"}
    ),
}
# What a billed call that names no output limit is reserved for, by kind: an
# answer longer than that still ends the replay ``cap_fired`` if it takes the
# totals past a cap (``Totals.passed``).
DEFAULT_OUTPUT_BOUND = {ANTHROPIC: 4096, OPENAI: 4096, GEMINI: 8192}
# A request's input is reserved at one token per this many bytes of its body:
# fewer bytes a token than English text or code takes, so the JSON around the
# text keeps the estimate above what a tokenizer counts.
INPUT_BYTES_PER_TOKEN = 3

# RFC 9110 7.6.1 hop-by-hop headers, plus what the gateway sets itself.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
# Every header an SDK may carry a key in: the agent's placeholder never goes up.
AUTH_HEADERS = frozenset({"authorization", "x-api-key", "api-key", gemini.KEY_HEADER})
# Set by the gateway itself: the upstream's host, the body's length, identity.
OWN_HEADERS = frozenset({"host", "content-length", "expect", "accept-encoding"})
NOT_FORWARDED = HOP_BY_HOP | AUTH_HEADERS | OWN_HEADERS
# The header an API's own SDK sends its key in (openai's is a bearer token).
KEY_HEADERS = {ANTHROPIC: "x-api-key", GEMINI: gemini.KEY_HEADER}

MAX_EVENT_BYTES = 1024 * 1024
MAX_JSON_BYTES = 16 * 1024 * 1024
# A request body is read as JSON up to this size (the gateway's own body limit).
MAX_REQUEST_JSON_BYTES = 32 * 1024 * 1024


def endpoint(kind: str, path: str) -> str:
    """The API endpoint of ``path`` (after the provider prefix, no query)."""
    if kind == OPENAI and (path == "/v1" or path.startswith("/v1/")):
        return path[3:]
    return path


def allowed(kind: str, method: str, path: str) -> bool:
    """Whether ``method path`` (after the provider prefix) may be forwarded.

    Matching is exact: no trailing slash, no percent-encoding, no ``..``.
    """
    if kind == GEMINI:
        return gemini.allowed(method, path)
    return (method, endpoint(kind, path)) in ALLOWED.get(kind, frozenset())


def agent_kind(headers: Any) -> str:
    """The API shape to refuse a call in when its provider is unknown."""
    if headers.get("x-api-key") or headers.get("anthropic-version"):
        return ANTHROPIC
    if headers.get(gemini.KEY_HEADER):
        return GEMINI
    return OPENAI


def upstream_path(kind: str, base_url: str, path: str) -> str:
    """The request target on the upstream host for the agent's ``path``
    (after the provider prefix, query included); see the module docstring."""
    path, sep, query = path.partition("?")
    base = urlsplit(base_url).path.rstrip("/")
    api = endpoint(kind, path)
    if kind == GEMINI:
        return gemini.upstream_path(base, api) + sep + query
    if kind == OPENAI:
        base = base or "/v1"
    elif base.endswith("/v1") and api.startswith("/v1/"):
        base = base[:-3]
    return base + api + sep + query


def placeholder(kind: str, headers: Iterable[tuple[str, str]]) -> str | None:
    """The key the agent sent, the way its API sends one.

    anthropic: ``x-api-key``, or ``Authorization: Bearer`` (what SDKs send for
    an auth token); gemini: ``x-goog-api-key``; openai: ``Authorization:
    Bearer``.
    """
    bearer = api_key = None
    for name, value in headers:
        lower = name.lower()
        if lower == "authorization":
            scheme, _, token = value.strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                bearer = token.strip()
        elif lower == KEY_HEADERS.get(kind):
            api_key = value.strip()
    return api_key or bearer


def upstream_headers(
    kind: str, headers: Iterable[tuple[str, str]], key: str
) -> list[tuple[str, str]]:
    """The agent's headers as the upstream gets them.

    Hop-by-hop headers (and those ``Connection`` names), ``Host``,
    ``Content-Length``, ``Expect`` and every auth header are dropped;
    ``Accept-Encoding: identity`` keeps the response readable for metering;
    the real key goes in the API's own header (none when ``key`` is empty, for
    a local server that takes no key). ``anthropic-version`` and the rest pass.
    """
    headers = list(headers)
    named = {
        token.strip().lower()
        for name, value in headers
        if name.lower() == "connection"
        for token in value.split(",")
    }
    out = [
        (name, value)
        for name, value in headers
        if name.lower() not in NOT_FORWARDED and name.lower() not in named
    ]
    out.append(("Accept-Encoding", "identity"))
    if key and kind == ANTHROPIC:
        out.append(("x-api-key", key))
    elif key and kind == GEMINI:
        out.append((gemini.KEY_HEADER, key))
    elif key:
        out.append(("Authorization", f"Bearer {key}"))
    return out


def response_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The upstream's response headers the agent gets: framing is the
    gateway's own, so hop-by-hop and ``Content-Length`` are dropped."""
    headers = list(headers)
    named = {
        token.strip().lower()
        for name, value in headers
        if name.lower() == "connection"
        for token in value.split(",")
    }
    return [
        (name, value)
        for name, value in headers
        if name.lower() not in HOP_BY_HOP
        and name.lower() not in named
        and name.lower() != "content-length"
    ]


@dataclass(frozen=True)
class Request:
    """What the gateway reads from a request body, and the body it forwards."""

    model: str | None
    stream: bool
    body: bytes
    # The output limit the request names (max_tokens and its later names).
    max_output: int | None = None
    # Whether the endpoint spends tokens.
    billed: bool = False
    # Why the gateway does not forward the body, with the status to answer:
    # JSON too deep or too large for anything after the gateway to read.
    refused: tuple[int, str] | None = None

    def worst_case(self, kind: str) -> Usage:
        """The most this call may spend: its input estimated from the body's
        size, and its output limit (or the kind's default bound)."""
        if not self.billed:
            return Usage(input_tokens=0, output_tokens=0, complete=True)
        output = self.max_output
        if output is None:
            output = DEFAULT_OUTPUT_BOUND.get(kind, 4096)
        return Usage(
            input_tokens=-(-len(self.body) // INPUT_BYTES_PER_TOKEN),
            output_tokens=output,
            model=self.model,
            complete=True,
        )


def read_request(
    kind: str, path: str, body: bytes, *, max_bytes: int = MAX_REQUEST_JSON_BYTES
) -> Request:
    """The requested model and stream flag of ``body``; for an openai stream of
    chat or text completions, the body forwarded asks for usage.

    Adding ``stream_options.include_usage`` makes the upstream send one more
    chunk before ``[DONE]``: ``"choices": []`` with the usage. It is passed to
    the agent unchanged (OpenAI-compatible clients read it as the documented
    final chunk; the other chunks carry ``"usage": null``). A body that is not
    a JSON object is forwarded as it came; one whose JSON nests deeper than
    ``boundedjson.MAX_DEPTH`` (or is larger than ``max_bytes``) is not
    forwarded at all (``refused``): no real request nests that deep, and the
    tape, the pages and the stores after the gateway could not read it.
    """
    billed = (
        gemini.billed(path)
        if kind == GEMINI
        else endpoint(kind, path) in BILLED.get(kind, frozenset())
    )
    try:
        data = boundedjson.loads(body, max_bytes=max_bytes) if body else None
    except boundedjson.Refused as refused:
        if refused.bound:
            status = 413 if refused.bound == boundedjson.SIZE else 400
            why = f"the gateway does not forward this request: {refused}"
            return Request(None, False, body, billed=billed, refused=(status, why))
        data = None
    if not isinstance(data, dict):
        return Request(model=None, stream=False, body=body, billed=billed)
    if kind == GEMINI:
        # The model and the stream are the path's, not the body's.
        return Request(
            model=gemini.model_of(path),
            stream=gemini.streams(path),
            body=body,
            max_output=gemini.max_output(data),
            billed=billed,
        )
    model = data.get("model")
    model = model if isinstance(model, str) else None
    stream = data.get("stream") is True
    limits = [
        data.get(name)
        for name in ("max_tokens", "max_completion_tokens", "max_output_tokens")
    ]
    given = [n for n in limits if isinstance(n, int) and not isinstance(n, bool)]
    if kind == OPENAI and stream and endpoint(kind, path) in USAGE_ON_REQUEST:
        body = _ask_for_usage(data, body)
    return Request(
        model=model,
        stream=stream,
        body=body,
        max_output=max(max(given), 0) if given else None,
        billed=billed,
    )


def _ask_for_usage(data: dict[str, Any], body: bytes) -> bytes:
    options = data.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        return body
    if "stream_options" not in data:
        # Splicing the member in before the closing brace leaves the agent's
        # bytes as they were, and costs nothing on a large context.
        end = body.rstrip()
        if end.endswith(b"}"):
            return end[:-1] + b',"stream_options":{"include_usage":true}}'
    options = dict(options) if isinstance(options, dict) else {}
    options["include_usage"] = True
    return json.dumps(
        {**data, "stream_options": options}, ensure_ascii=False, separators=(",", ":")
    ).encode()


def is_event_stream(content_type: str | None) -> bool:
    media = (content_type or "").partition(";")[0].strip().lower()
    return media == "text/event-stream"


@dataclass(frozen=True)
class Usage:
    """What one call consumed. ``input_tokens`` counts every prompt token,
    cache reads and writes included; ``cached_tokens`` and
    ``cache_write_tokens`` are the parts of it read from and written to the
    provider's cache. ``None``: not reported. ``complete`` is false when a
    stream ended before its final usage, so the counts are lower bounds."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    model: str | None = None
    complete: bool = False
    error: str = ""


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def _anthropic_usage(usage: Mapping[str, Any]) -> dict[str, int]:
    read = _count(usage.get("cache_read_input_tokens"))
    write = _count(usage.get("cache_creation_input_tokens"))
    return {
        "input_tokens": _count(usage.get("input_tokens")) + read + write,
        "output_tokens": _count(usage.get("output_tokens")),
        "cached_tokens": read,
        "cache_write_tokens": write,
    }


def _openai_usage(usage: Mapping[str, Any]) -> dict[str, int]:
    # Chat and text completions and embeddings say prompt/completion; the
    # responses API says input/output.
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else 0
    return {
        "input_tokens": _count(usage.get("prompt_tokens", usage.get("input_tokens"))),
        "output_tokens": _count(
            usage.get("completion_tokens", usage.get("output_tokens"))
        ),
        "cached_tokens": _count(cached),
        "cache_write_tokens": 0,
    }


def _error_text(data: Mapping[str, Any]) -> str:
    error = data.get("error")
    if isinstance(error, dict):
        kind = error.get("type") or error.get("code") or "error"
        return f"{kind}: {error.get('message', '')}"[:200]
    if isinstance(error, str):
        return error[:200]
    return ""


class UsageMeter:
    """Reads one response's usage from its bytes as they pass.

    ``streaming``: the body is server-sent events, parsed incrementally; chunk
    boundaries may fall anywhere (mid-line, mid-CRLF, mid-UTF-8). Memory stays
    bounded: one event is kept up to ``max_event_bytes`` (a larger one is
    skipped and counted in ``skipped_events``). Otherwise the body is one JSON
    document, kept up to ``max_json_bytes`` and parsed by ``finish``. Junk is
    ignored, never raised.
    """

    def __init__(
        self,
        kind: str,
        *,
        streaming: bool,
        max_event_bytes: int = MAX_EVENT_BYTES,
        max_json_bytes: int = MAX_JSON_BYTES,
    ) -> None:
        self.kind = kind
        self.streaming = streaming
        self.max_event_bytes = max_event_bytes
        self.max_json_bytes = max_json_bytes
        self.skipped_events = 0
        self._usage: dict[str, Any] | None = None
        self._model: str | None = None
        self._complete = False
        self._error = ""
        self._body = bytearray()
        self._overflow = False
        # The SSE parser: the unfinished line, the event's data lines and size.
        self._line = bytearray()
        self._line_dropped = False
        self._data: list[bytes] = []
        self._size = 0
        self._event_dropped = False
        self._after_cr = False

    def feed(self, chunk: bytes) -> None:
        if not chunk or self._overflow:
            return
        if not self.streaming:
            if len(self._body) + len(chunk) > self.max_json_bytes:
                self._overflow = True
                self._body = bytearray()
            else:
                self._body += chunk
            return
        # A CR ending one chunk and an LF starting the next are one line end.
        if self._after_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._after_cr = chunk[-1:] == b"\r"
        chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._append_line(chunk[start:end])
            self._end_line()
            start = end + 1
        self._append_line(chunk[start:])

    def _append_line(self, part: bytes) -> None:
        if not part or self._line_dropped:
            return
        if (
            self._event_dropped
            or self._size + len(self._line) + len(part) > self.max_event_bytes
        ):
            # The line is not blank, so it does not end the event; it is not
            # kept, and neither is the rest of its event.
            self._line_dropped = self._event_dropped = True
            self._line.clear()
            self._data = []
            return
        self._line += part

    def _end_line(self) -> None:
        if self._line_dropped:
            self._line_dropped = False
            return
        if not self._line:
            if self._event_dropped:
                self.skipped_events += 1
            elif self._data:
                self._event(b"\n".join(self._data))
            self._data, self._size, self._event_dropped = [], 0, False
            return
        line = bytes(self._line)
        self._line.clear()
        self._size += len(line) + 1
        if line.startswith(b"data:"):
            value = line[5:]
            self._data.append(value[1:] if value[:1] == b" " else value)
        # Comments, event names, ids and retry hints carry nothing to meter:
        # every event's data names its own type.

    def _event(self, data: bytes) -> None:
        try:
            event = boundedjson.loads(
                data.decode("utf-8", "replace"), max_bytes=self.max_event_bytes
            )
        except ValueError:
            return  # [DONE], keep-alive text, junk, JSON past the bounds
        if not isinstance(event, dict):
            return
        if self.kind == ANTHROPIC:
            self._anthropic_event(event)
        elif self.kind == GEMINI:
            self._gemini_event(event)
        else:
            self._openai_event(event)

    def _anthropic_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = event["message"]
            self._take_model(message.get("model"))
            if isinstance(message.get("usage"), dict):
                self._usage = dict(message["usage"])
        elif kind == "message_delta" and isinstance(event.get("usage"), dict):
            # The delta's counts are cumulative and replace the start's; newer
            # API versions repeat the input counts in it too.
            given = {k: v for k, v in event["usage"].items() if isinstance(v, int)}
            self._usage = {**(self._usage or {}), **given}
            self._complete = True
        elif kind == "error":
            self._error = _error_text(event)

    def _openai_event(self, event: dict[str, Any]) -> None:
        # Responses API events wrap the response; completions chunks are flat.
        inner = event.get("response")
        source = inner if isinstance(inner, dict) else event
        self._take_model(source.get("model"))
        if isinstance(source.get("usage"), dict):
            self._usage = source["usage"]
            self._complete = True
        if error := _error_text(event):
            self._error = error

    def _gemini_event(self, event: dict[str, Any]) -> None:
        # Every chunk carries the usage so far; the last one's is the call's.
        self._take_model(event.get("modelVersion"))
        if isinstance(event.get("usageMetadata"), dict):
            self._usage = event["usageMetadata"]
            finished = any(
                isinstance(c, dict) and c.get("finishReason")
                for c in event.get("candidates") or []
            )
            self._complete = self._complete or finished
        if error := _error_text(event):
            self._error = error

    def _take_model(self, model: object) -> None:
        if isinstance(model, str) and model:
            self._model = model

    def finish(self) -> Usage:
        """The usage seen. Safe to call once the body has ended or broken off."""
        if not self.streaming and self._body:
            try:
                data = boundedjson.loads(self._body, max_bytes=self.max_json_bytes)
            except ValueError:
                data = None
            self._body = bytearray()
            if isinstance(data, dict) and self.kind == GEMINI:
                self._gemini_event(data)
                self._complete = self._usage is not None
            elif isinstance(data, dict):
                self._take_model(data.get("model"))
                self._error = _error_text(data)
                if isinstance(data.get("usage"), dict):
                    self._usage = data["usage"]
                    self._complete = True
        if self._usage is None:
            return Usage(model=self._model, error=self._error)
        read = {ANTHROPIC: _anthropic_usage, GEMINI: gemini.usage}.get(
            self.kind, _openai_usage
        )
        return Usage(
            **read(self._usage),
            model=self._model,
            complete=self._complete,
            error=self._error,
        )


MILLION = Decimal(1_000_000)


def cost(
    prices: Mapping[str, Mapping[str, Any]], model: str | None, usage: Usage
) -> Decimal | None:
    """USD for ``usage`` at ``prices[model]`` (USD per million tokens).

    ``cached`` (cache reads) and ``cache_write`` default to the input price.
    ``None`` — unknown, never zero — when the model has no price or the usage
    was not reported.
    """
    price = prices.get(model) if model else None
    if price is None or usage.input_tokens is None or usage.output_tokens is None:
        return None
    try:
        per_input = Decimal(str(price["input"]))
        per_output = Decimal(str(price["output"]))
        per_cached = Decimal(str(price.get("cached", per_input)))
        per_write = Decimal(str(price.get("cache_write", per_input)))
    except (KeyError, ArithmeticError, ValueError):
        return None
    cached = usage.cached_tokens or 0
    written = usage.cache_write_tokens or 0
    fresh = max(usage.input_tokens - cached - written, 0)
    total = (
        fresh * per_input
        + cached * per_cached
        + written * per_write
        + usage.output_tokens * per_output
    )
    return total / MILLION


_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
}
_OPENAI_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}


def error_body(kind: str, status: int, message: str) -> bytes:
    """An error in the API's own JSON shape, so the agent's SDK shows
    ``message``."""
    if kind == GEMINI:
        return gemini.error_body(status, message)
    if kind == ANTHROPIC:
        data: dict[str, Any] = {
            "type": "error",
            "error": {
                "type": _ANTHROPIC_ERRORS.get(status, "api_error"),
                "message": message,
            },
        }
    else:
        data = {
            "error": {
                "message": message,
                "type": _OPENAI_ERRORS.get(status, "server_error"),
                "param": None,
                "code": None,
            }
        }
    return json.dumps(data).encode()
