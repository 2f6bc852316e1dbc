"""A tape as the conversation it was: each call's messages and the answer,
tool calls apart (the page folds them). Pure: plain dicts of text, escaped by
the templates like every record value."""

from __future__ import annotations

import json
from typing import Any

from replayhub.gateway.tape import Exchange
from replayhub.lib import boundedjson

# A message's text shown on a page is cut here (the tape keeps all of it).
TEXT_CHARS = 20_000


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + " …"


def _json(value: Any) -> str:
    # A tape from a record stored before the bounds existed may nest deeper
    # than laying it out could go.
    try:
        boundedjson.check_depth(value, boundedjson.STORED_MAX_DEPTH)
    except boundedjson.Refused as refused:
        return f"(not shown: {refused})"
    return _cut(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True))


def _parts(content: Any) -> tuple[str, list[dict[str, str]]]:
    """A message's text and its tool parts (calls, results, anything else)."""
    if isinstance(content, str):
        return content, []
    texts, tools = [], []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = str(block.get("type", ""))
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        else:
            name = block.get("name") or block.get("tool_use_id") or kind
            tools.append({"title": f"{kind} {name}".strip(), "body": _json(block)})
    return "\n".join(texts), tools


def _message(message: Any) -> dict[str, Any]:
    if not isinstance(message, dict):
        return {"role": "?", "text": _cut(str(message)), "tools": []}
    text, tools = _parts(message.get("content"))
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            name = (call.get("function") or {}).get("name", "")
            tools.append({"title": f"tool call {name}", "body": _json(call)})
    if message.get("role") == "tool":
        tools.append({"title": "tool result", "body": _cut(text)})
        text = ""
    return {"role": str(message.get("role", "")), "text": _cut(text), "tools": tools}


def _answer(exchange: Exchange) -> dict[str, Any]:
    response = exchange.response
    if response is None:
        return {"role": "assistant", "text": "", "tools": [], "left_out": True}
    if isinstance(response, dict) and isinstance(response.get("choices"), list):
        choices = [c for c in response["choices"] if isinstance(c, dict)]
        return _message(choices[0].get("message") if choices else {})
    if isinstance(response, dict) and "content" in response:
        return _message({"role": "assistant", "content": response["content"]})
    return {"role": "answer", "text": _json(response), "tools": []}


def turns(exchanges: list[Exchange]) -> list[dict[str, Any]]:
    """One row per call: its number, what was asked (system, the messages
    new since the previous call) and the answer."""
    rows = []
    shown = 0
    for number, exchange in enumerate(exchanges, 1):
        request = exchange.request
        messages = request.get("messages")
        messages = messages if isinstance(messages, list) else []
        # A conversation resends its history: only what is new is shown.
        new = messages[shown:] if len(messages) >= shown else messages
        shown = len(messages)
        system, _ = _parts(request.get("system"))
        rows.append(
            {
                "number": number,
                "kind": exchange.kind,
                "endpoint": exchange.endpoint,
                "model": exchange.model or str(request.get("model", "")),
                "served": exchange.served,
                "status": exchange.status,
                "usage": exchange.usage,
                "truncated": exchange.truncated,
                "system": _cut(system) if number == 1 else "",
                "messages": [_message(m) for m in new],
                "answer": _answer(exchange),
            }
        )
    return rows
