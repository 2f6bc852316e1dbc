"""Tapes: a run's model exchanges in order, as pure functions.

A *tape* is the list of a run's model calls: for each, the request the agent
sent, normalised so that two runs' requests can be compared (``normalise``),
and the answer it got as one message (a stream's events reassembled,
``reassemble``). A tape replay serves call k from exchange k when the agent's
request matches it (``serve``: the message written back in the wire format
the agent asked for, JSON or server-sent events) and, when it does not,
names the first differing request with a unified diff (``request_diff``).

Everything on a tape is untrusted (the agent and the model wrote it): it is
only ever parsed as JSON, bounded (``lib.boundedjson``: text past the bounds
is kept as text), walked without recursion, and written back to the agent
that asked. Nothing here does I/O or imports Django.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from replayhub.gateway import gemini, responses, streams, tape_rules, wire
from replayhub.gateway.tape_rules import Rule
from replayhub.lib import boundedjson

# Parts of a request that differ between two runs of the same conversation
# without changing what the model is asked: the stream flag and its options
# (the answer is the same message either way), ids and metadata a client adds.
VOLATILE_KEYS = frozenset(
    {
        "stream",
        "stream_options",
        "metadata",
        "user",
        "store",
        "service_tier",
        "prompt_cache_key",
        "safety_identifier",
        "request_id",
    }
)
# Prompt-cache markers, wherever they sit (system blocks, messages, tools).
CACHE_MARKERS = frozenset({"cache_control"})
# The endpoints whose streams ``serve`` can write from a message.
STREAMABLE = {
    wire.ANTHROPIC: frozenset({"/v1/messages"}),
    wire.OPENAI: frozenset({"/chat/completions", responses.ENDPOINT}),
}
# A diff shown on a page is cut to this many characters.
DIFF_CHARS = 64 * 1024
# A packed tape is never inflated past this many bytes.
MAX_UNPACKED_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Exchange:
    """One model call: its normalised request, the answer's message (``None``
    when it was left out), its usage and status, and whether it streamed.

    ``served`` is set on a tape replay's own tape: the answer came from the
    tape it replayed, not from a model.
    """

    request: dict[str, Any]
    response: Any
    status: int = 200
    streamed: bool = False
    usage: dict[str, int] = field(default_factory=dict)
    model: str = ""
    truncated: bool = False
    served: bool = False

    @property
    def kind(self) -> str:
        return str(self.request.get("kind", ""))

    @property
    def endpoint(self) -> str:
        return str(self.request.get("endpoint", ""))

    def to_dict(self) -> dict[str, Any]:
        return {
            "request": self.request,
            "response": self.response,
            "status": self.status,
            "streamed": self.streamed,
            "usage": self.usage,
            "model": self.model,
            "truncated": self.truncated,
            "served": self.served,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Exchange:
        request = data.get("request")
        usage = data.get("usage")
        return cls(
            request=dict(request) if isinstance(request, Mapping) else {},
            response=data.get("response"),
            status=_int(data.get("status"), 0),
            streamed=data.get("streamed") is True,
            usage=_usage(usage if isinstance(usage, Mapping) else {}),
            model=str(data.get("model") or "")[:200],
            truncated=data.get("truncated") is True,
            served=data.get("served") is True,
        )

    def digest(self) -> str:
        """sha256 of the exchange's canonical JSON."""
        return hashlib.sha256(canonical(self.to_dict())).hexdigest()


def canonical(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8", "surrogatepass")


def _int(value: object, default: int) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return default


def _usage(usage: Mapping[str, Any]) -> dict[str, int]:
    return {
        key: value
        for key in ("input_tokens", "output_tokens")
        if isinstance(value := usage.get(key), int)
        and not isinstance(value, bool)
        and value >= 0
    }


def _clean(value: Any) -> Any:
    """``value`` without prompt-cache markers, at any depth.

    Copied with an explicit stack, not by recursion: a tape from a record or
    an old store may nest deeper than Python's stack allows.
    """
    if not isinstance(value, dict | list):
        return value
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        if isinstance(source, dict):
            pairs: Iterable[tuple[Any, Any]] = (
                (k, v) for k, v in source.items() if k not in CACHE_MARKERS
            )
        else:
            pairs = enumerate(source)
        for key, item in pairs:
            if isinstance(item, dict | list):
                copy: Any = {} if isinstance(item, dict) else []
                stack.append((item, copy))
                item = copy
            if isinstance(target, dict):
                target[key] = item
            else:
                target.append(item)
    return root


def _blocks(content: Any) -> Any:
    """Anthropic content as blocks: a plain string is one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content


def normalise(kind: str, endpoint: str, body: Any) -> dict[str, Any]:
    """The request as compared: its kind and endpoint, then every member of
    the body but the volatile ones, with no cache markers; anthropic's
    string shorthands (system, a message's content) as the blocks they mean.
    A body that is not a JSON object is kept as it is, under ``body``."""
    out: dict[str, Any] = {"kind": kind, "endpoint": endpoint}
    if not isinstance(body, dict):
        if body not in (None, "", b""):
            out["body"] = body if isinstance(body, str | int | float | list) else ""
        return out
    for key, value in body.items():
        if key in VOLATILE_KEYS:
            continue
        out[key] = _clean(value)
    if kind == wire.ANTHROPIC:
        if "system" in out:
            out["system"] = _blocks(out["system"])
        if isinstance(out.get("messages"), list):
            out["messages"] = [
                {**m, "content": _blocks(m["content"])}
                if isinstance(m, dict) and "content" in m
                else m
                for m in out["messages"]
            ]
    return out


def normalise_bytes(kind: str, endpoint: str, body: bytes) -> dict[str, Any]:
    """``normalise`` of a body as it came over the wire; one that is not JSON,
    or JSON past the bounds, is kept as its text."""
    try:
        data = boundedjson.loads(body) if body else None
    except boundedjson.Refused:
        data = body.decode("utf-8", "replace")
    return normalise(kind, endpoint, data)


# -- answers ---------------------------------------------------------------


def split_events(data: bytes) -> list[str]:
    """A server-sent event stream's events, each its lines joined by newlines."""
    text = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    return [event for event in text.split("\n\n") if event.strip()]


def _event_data(event: str) -> Any:
    lines = [
        line[5:].removeprefix(" ")
        for line in event.split("\n")
        if line.startswith("data:")
    ]
    if not lines:
        return None
    try:
        return boundedjson.loads("\n".join(lines))
    except boundedjson.Refused:
        return None


def reassemble(kind: str, events: Iterable[str]) -> dict[str, Any] | None:
    """The message a stream's events add up to, as the API would have
    answered it without streaming; ``None`` when the events hold none."""
    datas = [d for d in (_event_data(e) for e in events) if isinstance(d, dict)]
    if kind == wire.ANTHROPIC:
        return streams.anthropic_message(datas)
    if kind == wire.GEMINI:
        return gemini.rebuild(datas)
    if responses.is_stream(datas):
        return responses.rebuild(datas)
    return streams.openai_completion(datas)


def response_of(kind: str, body: Any, *, streamed: bool) -> Any:
    """The answer as a message: a stream's events (raw bytes or a list of
    event texts) reassembled, a JSON body parsed."""
    if streamed:
        if isinstance(body, bytes | bytearray):
            events: list[str] = split_events(bytes(body))
        elif isinstance(body, list):
            events = [e for e in body if isinstance(e, str)]
        else:
            return None
        return reassemble(kind, events)
    if isinstance(body, bytes | bytearray):
        try:
            return boundedjson.loads(body)
        except boundedjson.Refused:
            return bytes(body).decode("utf-8", "replace")
    return body


def from_record(entry: Any) -> Exchange | None:
    """One exchange of a run record's ``tape`` (``replayhub-record``'s shape),
    normalised as a replay's own tape is; ``None`` for an entry of no shape."""
    if not isinstance(entry, dict):
        return None
    kind = entry.get("provider_kind")
    if kind not in wire.KINDS:
        return None
    path = str(entry.get("path") or "").partition("?")[0]
    endpoint = wire.endpoint(kind, path)
    streamed = entry.get("stream") is True
    truncated = entry.get("truncated") is True
    request = entry.get("request")
    normalised = normalise(kind, endpoint, request)
    if request is None and truncated:
        normalised["left_out"] = True
    usage = entry.get("usage")
    return Exchange(
        request=normalised,
        response=response_of(kind, entry.get("response"), streamed=streamed),
        status=_int(entry.get("status"), 0),
        streamed=streamed,
        usage=_usage(usage if isinstance(usage, dict) else {}),
        model=str(entry.get("model") or "")[:200],
        truncated=truncated,
    )


def from_record_tape(tape: Any) -> list[Exchange]:
    """A run record's ``tape`` as exchanges (entries of no shape left out)."""
    if not isinstance(tape, list):
        return []
    return [e for e in (from_record(entry) for entry in tape) if e is not None]


# -- matching ----------------------------------------------------------------


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def request_diff(recorded: Mapping[str, Any], actual: Mapping[str, Any], n: int) -> str:
    """A unified diff of call ``n``'s recorded and actual normalised requests,
    pretty-printed JSON, cut to ``DIFF_CHARS``."""
    lines = difflib.unified_diff(
        pretty(recorded).splitlines(keepends=True),
        pretty(actual).splitlines(keepends=True),
        fromfile=f"recorded call {n}",
        tofile=f"replay call {n}",
    )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if len(text) > DIFF_CHARS:
        text = text[:DIFF_CHARS] + "\n… (the diff is cut here)\n"
    return text


@dataclass(frozen=True)
class Divergence:
    """Where a replay left its tape: call ``index`` (0-based), why, and the
    diff of the requests when both exist."""

    index: int
    why: str  # "differs", "more", "fewer", "unservable"
    detail: str
    diff: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "call": self.index + 1,
            "why": self.why,
            "detail": self.detail,
            "diff": self.diff,
        }


def compare(
    tape: Sequence[Exchange],
    index: int,
    actual: dict[str, Any],
    *,
    stream: bool,
    rules: Sequence[Rule] = (),
) -> Divergence | None:
    """Whether request ``index`` of a replay, normalised, may be answered from
    exchange ``index`` of ``tape`` (as a stream, when ``stream``); the
    divergence when it may not. ``match`` says which rules it took."""
    return match(tape, index, actual, stream=stream, rules=rules)[0]


def match(
    tape: Sequence[Exchange],
    index: int,
    actual: dict[str, Any],
    *,
    stream: bool,
    rules: Sequence[Rule] = (),
) -> tuple[Divergence | None, list[str]]:
    """``compare``, and the names of the rules that changed something in
    either request: the wire's own (``tape_rules.WIRE``), then ``rules`` (the
    agent's and the replay's), each applied to both the recorded and the
    actual request. Nothing else is set aside."""
    applied: list[str] = []
    if index < len(tape) and not tape[index].request.get("left_out"):
        recorded = tape[index]
        declared = (*tape_rules.for_wire(recorded.kind, recorded.endpoint), *rules)
        seen, on_tape = tape_rules.normalise_with(declared, recorded.request)
        asked, by_agent = tape_rules.normalise_with(declared, actual)
        applied = [r.name for r in declared if r.name in {*on_tape, *by_agent}]
        tape = [*tape[:index], replace(recorded, request=seen)]
        actual = asked
    return _compare(tape, index, actual, stream=stream), applied


def _compare(
    tape: Sequence[Exchange], index: int, actual: dict[str, Any], *, stream: bool
) -> Divergence | None:
    n = index + 1
    if index >= len(tape):
        return Divergence(
            index,
            "more",
            f"the agent made call {n}, past the {len(tape)} calls on the tape",
        )
    recorded = tape[index]
    if recorded.request.get("left_out"):
        return Divergence(
            index, "unservable", f"call {n}'s request was left out of the tape"
        )
    if recorded.request != actual:
        return Divergence(
            index,
            "differs",
            f"call {n}'s request differs from the tape's",
            request_diff(recorded.request, actual, n),
        )
    if recorded.response is None or not 200 <= recorded.status < 300:
        return Divergence(
            index,
            "unservable",
            f"call {n}'s answer is not on the tape "
            + (
                "(it was left out)"
                if recorded.response is None
                else f"(the provider answered HTTP {recorded.status})"
            ),
        )
    if stream and not streamable(recorded.kind, str(actual.get("endpoint", ""))):
        return Divergence(
            index, "unservable", f"call {n} asks for a stream the tape cannot write"
        )
    return None


def streamable(kind: str, endpoint: str) -> bool:
    """Whether ``serve`` can write a stream for a call to ``endpoint``."""
    if kind == wire.GEMINI:
        return gemini.streams(endpoint)
    return endpoint in STREAMABLE.get(kind, ())


def fewer(tape: Sequence[Exchange], calls: int) -> Divergence | None:
    """The divergence of an agent that ended after ``calls`` of the tape's."""
    if calls >= len(tape):
        return None
    return Divergence(
        calls,
        "fewer",
        f"the agent ended after {calls} of the tape's {len(tape)} calls",
    )


# -- writing an answer back ------------------------------------------------


def serve(exchange: Exchange, *, stream: bool) -> tuple[str, list[bytes]]:
    """The recorded answer as the agent asked for it: the content type and the
    body's pieces (one JSON document, or a stream's events)."""
    kind, message = exchange.kind, exchange.response
    if not stream:
        body = (
            message
            if isinstance(message, str)
            else json.dumps(message, ensure_ascii=False)
        )
        return "application/json", [body.encode("utf-8", "surrogatepass")]
    if not isinstance(message, dict):
        message = {}
    if kind == wire.ANTHROPIC:
        return "text/event-stream; charset=utf-8", streams.anthropic_events(message)
    if kind == wire.GEMINI:
        return "text/event-stream", gemini.events(message)
    if exchange.endpoint == responses.ENDPOINT:
        return "text/event-stream; charset=utf-8", responses.events(message)
    return "text/event-stream; charset=utf-8", streams.openai_events(message)


# -- storing -----------------------------------------------------------------


def pack(exchanges: Sequence[Exchange]) -> bytes:
    """The exchanges as zlib-compressed JSON."""
    return zlib.compress(canonical([e.to_dict() for e in exchanges]), 6)


def unpack(data: bytes, limit: int = MAX_UNPACKED_BYTES) -> list[Exchange]:
    """What ``pack`` made, inflated to ``limit`` bytes at most; a ValueError
    (``boundedjson.Refused``) for one that cannot be read, stored before the
    bounds existed."""
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(data, limit)
    except zlib.error as error:
        raise ValueError(f"the tape is not zlib data: {error}") from None
    if inflater.unconsumed_tail:
        raise ValueError(f"the tape inflates past {limit} bytes")
    items = (
        boundedjson.loads(raw, max_bytes=limit, max_depth=boundedjson.STORED_MAX_DEPTH)
        if raw
        else []
    )
    items = items if isinstance(items, list) else []
    return [Exchange.from_dict(i) for i in items if isinstance(i, dict)]


def capped(exchange: Exchange, limit: int) -> Exchange:
    """``exchange`` within ``limit`` bytes of JSON: its answer left out first,
    then its request (its kind, endpoint and model kept), ``truncated`` then."""
    if len(canonical(exchange.to_dict())) <= limit:
        return exchange
    lighter = Exchange(**{**_fields(exchange), "response": None, "truncated": True})
    if len(canonical(lighter.to_dict())) <= limit:
        return lighter
    request = {
        key: exchange.request[key]
        for key in ("kind", "endpoint", "model")
        if isinstance(exchange.request.get(key), str)
    }
    return Exchange(**{**_fields(lighter), "request": {**request, "left_out": True}})


def _fields(exchange: Exchange) -> dict[str, Any]:
    return {
        "request": exchange.request,
        "response": exchange.response,
        "status": exchange.status,
        "streamed": exchange.streamed,
        "usage": exchange.usage,
        "model": exchange.model,
        "truncated": exchange.truncated,
        "served": exchange.served,
    }
