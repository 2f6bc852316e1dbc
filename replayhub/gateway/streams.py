"""The two chat wires' streams on a tape, as pure functions: Anthropic's
Messages events and OpenAI's chat-completion chunks rebuilt into the message
the API would have answered without streaming, and a message written back as
those events. (The Responses API's are in ``responses``.)"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from replayhub.lib import boundedjson
from replayhub.lib.jsonvalues import fields, items


def _int(value: object, default: int) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return default


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    text = json.dumps(data, ensure_ascii=False)
    return f"{head}data: {text}\n\n".encode("utf-8", "surrogatepass")


def anthropic_message(events: list[dict[str, Any]]) -> dict[str, Any] | None:
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
            block, delta = content[index], fields(event.get("delta"))
            for name, key in (
                ("text", "text"),
                ("thinking", "thinking"),
                ("signature", "signature"),
            ):
                if isinstance(delta.get(key), str):
                    kept = block.get(name)
                    block[name] = (kept if isinstance(kept, str) else "") + delta[key]
            if isinstance(delta.get("partial_json"), str):
                partial[index] = partial.get(index, "") + delta["partial_json"]
        elif kind == "content_block_stop" and index in partial:
            try:
                content[index]["input"] = boundedjson.loads(partial.pop(index) or "{}")
            except boundedjson.Refused:
                content[index]["input"] = {}
        elif kind == "message_delta":
            changed = event.get("delta")
            if isinstance(changed, dict):
                message.update(changed)
            if isinstance(event.get("usage"), dict):
                message["usage"] = {**fields(message.get("usage")), **event["usage"]}
    return message


def openai_completion(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not events:
        return None
    first = events[0]
    choices: dict[int, dict[str, Any]] = {}
    usage = None
    for event in events:
        if isinstance(event.get("usage"), dict):
            usage = event["usage"]
        for choice in items(event.get("choices")):
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
            _merge_delta(into["message"], fields(choice.get("delta")))
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
    for call in items(delta.get("tool_calls")):
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
        function = fields(call.get("function"))
        for key in ("name", "arguments"):
            if isinstance(function.get(key), str):
                into["function"][key] += function[key]


def anthropic_events(message: dict[str, Any]) -> list[bytes]:
    usage = dict(fields(message.get("usage")))
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 0},
    }
    events = [_sse("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(items(message.get("content"))):
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


def openai_events(completion: dict[str, Any]) -> list[bytes]:
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
    for choice in items(completion.get("choices")):
        if not isinstance(choice, dict):
            continue
        index = _int(choice.get("index"), 0)
        message = fields(choice.get("message"))
        events.append(
            chunk(index, {"role": message.get("role", "assistant"), "content": ""})
        )
        if message.get("content"):
            events.append(chunk(index, {"content": message["content"]}))
        if message.get("refusal"):
            events.append(chunk(index, {"refusal": message["refusal"]}))
        for number, call in enumerate(items(message.get("tool_calls"))):
            if isinstance(call, dict):
                events.append(chunk(index, {"tool_calls": [{**call, "index": number}]}))
        events.append(chunk(index, {}, choice.get("finish_reason") or "stop"))
    if isinstance(completion.get("usage"), dict):
        events.append(_sse(None, {**head, "choices": [], "usage": completion["usage"]}))
    events.append(b"data: [DONE]\n\n")
    return events
