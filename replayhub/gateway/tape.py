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
from dataclasses import dataclass, field
from typing import Any

from replayhub.gateway import wire
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
STREAMABLE = {wire.ANTHROPIC: "/v1/messages", wire.OPENAI: "/chat/completions"}
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
        return _anthropic_message(datas)
    return _openai_completion(datas)


def _anthropic_message(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    message: dict[str, Any] | None = None
    partial: dict[int, str] = {}
    for event in events:
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = {**event["message"], "content": []}
        if message is None:
            continue
        content: list[Any] = message["content"]
        index = _int(event.get("index"), len(content))
        if kind == "content_block_start" and isinstance(
            event.get("content_block"), dict
        ):
            content.append(dict(event["content_block"]))
        elif kind == "content_block_delta" and 0 <= index < len(content):
            block, delta = content[index], event.get("delta") or {}
            for name, key in (
                ("text", "text"),
                ("thinking", "thinking"),
                ("signature", "signature"),
            ):
                if isinstance(delta.get(key), str):
                    block[name] = block.get(name, "") + delta[key]
            if isinstance(delta.get("partial_json"), str):
                partial[index] = partial.get(index, "") + delta["partial_json"]
        elif kind == "content_block_stop" and index in partial:
            try:
                content[index]["input"] = boundedjson.loads(partial.pop(index) or "{}")
            except boundedjson.Refused:
                content[index]["input"] = {}
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, dict):
                message.update(delta)
            if isinstance(event.get("usage"), dict):
                message["usage"] = {**(message.get("usage") or {}), **event["usage"]}
    return message


def _openai_completion(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not events:
        return None
    first = events[0]
    choices: dict[int, dict[str, Any]] = {}
    usage = None
    for event in events:
        if isinstance(event.get("usage"), dict):
            usage = event["usage"]
        for choice in event.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            index = _int(choice.get("index"), 0)
            into = choices.setdefault(
                index,
                {
                    "index": index,
                    "message": {"role": "assistant"},
                    "finish_reason": None,
                },
            )
            if choice.get("finish_reason"):
                into["finish_reason"] = choice["finish_reason"]
            _merge_delta(into["message"], choice.get("delta") or {})
    completion: dict[str, Any] = {
        "id": first.get("id", ""),
        "object": "chat.completion",
        "created": first.get("created", 0),
        "model": first.get("model", ""),
        "choices": [choices[i] for i in sorted(choices)],
    }
    if usage is not None:
        completion["usage"] = usage
    return completion


def _merge_delta(message: dict[str, Any], delta: Mapping[str, Any]) -> None:
    for key in ("role",):
        if isinstance(delta.get(key), str):
            message[key] = delta[key]
    for key in ("content", "refusal"):
        if isinstance(delta.get(key), str):
            message[key] = (message.get(key) or "") + delta[key]
    for call in delta.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        calls = message.setdefault("tool_calls", [])
        index = _int(call.get("index"), len(calls))
        while len(calls) <= index:
            calls.append(
                {
                    "id": "",
                    "type": "function",
                    "function": {"name": "", "arguments": ""},
                }
            )
        into = calls[index]
        if isinstance(call.get("id"), str):
            into["id"] = call["id"]
        function = call.get("function") or {}
        for key in ("name", "arguments"):
            if isinstance(function.get(key), str):
                into["function"][key] += function[key]


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
    tape: Sequence[Exchange], index: int, actual: dict[str, Any], *, stream: bool
) -> Divergence | None:
    """Whether request ``index`` of a replay, normalised, may be answered from
    exchange ``index`` of ``tape`` (as a stream, when ``stream``); the
    divergence when it may not."""
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
    if stream and actual.get("endpoint") != STREAMABLE.get(recorded.kind):
        return Divergence(
            index, "unservable", f"call {n} asks for a stream the tape cannot write"
        )
    return None


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


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


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
        return "text/event-stream; charset=utf-8", _anthropic_events(message)
    return "text/event-stream; charset=utf-8", _openai_events(message)


def _anthropic_events(message: dict[str, Any]) -> list[bytes]:
    usage = dict(message.get("usage") or {})
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 0},
    }
    events = [_sse("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message.get("content") or []):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        opening = dict(block)
        delta: dict[str, Any] | None = None
        if kind == "text":
            opening["text"] = ""
            delta = {"type": "text_delta", "text": block.get("text", "")}
        elif kind in ("tool_use", "server_tool_use"):
            opening["input"] = {}
            delta = {
                "type": "input_json_delta",
                "partial_json": json.dumps(block.get("input", {}), ensure_ascii=False),
            }
        elif kind == "thinking":
            opening["thinking"], opening["signature"] = "", ""
            delta = {"type": "thinking_delta", "thinking": block.get("thinking", "")}
        events.append(
            _sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": opening,
                },
            )
        )
        if delta is not None:
            events.append(
                _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        if kind == "thinking" and block.get("signature"):
            signature = {"type": "signature_delta", "signature": block["signature"]}
            events.append(
                _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": signature},
                )
            )
        events.append(
            _sse("content_block_stop", {"type": "content_block_stop", "index": index})
        )
    events.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": message.get("stop_reason"),
                    "stop_sequence": message.get("stop_sequence"),
                },
                "usage": usage,
            },
        )
    )
    events.append(_sse("message_stop", {"type": "message_stop"}))
    return events


def _openai_events(completion: dict[str, Any]) -> list[bytes]:
    head = {
        "id": completion.get("id", ""),
        "object": "chat.completion.chunk",
        "created": completion.get("created", 0),
        "model": completion.get("model", ""),
    }

    def chunk(index: int, delta: dict[str, Any], finish: Any = None) -> bytes:
        choice = {"index": index, "delta": delta, "finish_reason": finish}
        return _sse(None, {**head, "choices": [choice], "usage": None})

    events = []
    for choice in completion.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        index = _int(choice.get("index"), 0)
        message = choice.get("message") or {}
        events.append(
            chunk(index, {"role": message.get("role", "assistant"), "content": ""})
        )
        if message.get("content"):
            events.append(chunk(index, {"content": message["content"]}))
        if message.get("refusal"):
            events.append(chunk(index, {"refusal": message["refusal"]}))
        for number, call in enumerate(message.get("tool_calls") or []):
            if isinstance(call, dict):
                events.append(chunk(index, {"tool_calls": [{**call, "index": number}]}))
        events.append(chunk(index, {}, choice.get("finish_reason") or "stop"))
    if isinstance(completion.get("usage"), dict):
        events.append(_sse(None, {**head, "choices": [], "usage": completion["usage"]}))
    events.append(b"data: [DONE]\n\n")
    return events


# -- storing -----------------------------------------------------------------


def pack(exchanges: Sequence[Exchange]) -> bytes:
    """The exchanges as zlib-compressed JSON."""
    return zlib.compress(canonical([e.to_dict() for e in exchanges]), 6)


def unpack(data: bytes, limit: int = MAX_UNPACKED_BYTES) -> list[Exchange]:
    """What ``pack`` made, inflated to ``limit`` bytes at most; a ValueError
    (``boundedjson.Refused``) for one that cannot be read, stored before the
    bounds existed."""
    inflater = zlib.decompressobj()
    raw = inflater.decompress(data, limit)
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
