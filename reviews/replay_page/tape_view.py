"""A tape as the conversation it was: each call's messages and the answer,
tool calls apart (the page folds them). Chat and Anthropic calls read their
``messages``; Responses API calls (Codex's) their ``input`` items (messages,
function and custom tool calls and their outputs) and the answer's ``output``
items. Pure: plain dicts of text, escaped by the templates like every record
value."""

from __future__ import annotations

import json
from typing import Any

from replayhub.gateway.tape import Exchange
from replayhub.lib import boundedjson

# A message's text shown on a page is cut here (the tape keeps all of it).
TEXT_CHARS = 20_000
# Content parts that are text: Anthropic's and chat's, the Responses API's.
TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
# Responses API items that are a tool's call, and those that are its output.
CALLS = {"function_call": "arguments", "custom_tool_call": "input"}
OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})


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
        if kind in TEXT_PARTS and isinstance(block.get("text"), str):
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
    if isinstance(response, dict) and isinstance(response.get("output"), list):
        return _output(response["output"])
    if isinstance(response, dict) and isinstance(response.get("candidates"), list):
        first = next((c for c in response["candidates"] if isinstance(c, dict)), {})
        return _gemini(first.get("content") or {"role": "model"})
    if isinstance(response, dict) and isinstance(response.get("choices"), list):
        choices = [c for c in response["choices"] if isinstance(c, dict)]
        return _message(choices[0].get("message") if choices else {})
    if isinstance(response, dict) and "content" in response:
        return _message({"role": "assistant", "content": response["content"]})
    return {"role": "answer", "text": _json(response), "tools": []}


def _history(request: dict[str, Any]) -> list[Any]:
    """What a call resends of its conversation: chat and Anthropic
    ``messages``, or the Responses API's ``input`` (a string is one user
    message)."""
    messages = request.get("messages")
    if isinstance(messages, list):
        return messages
    contents = request.get("contents")
    if isinstance(contents, list):
        return [{"gemini": content} for content in contents]
    given = request.get("input")
    if isinstance(given, str):
        return [{"role": "user", "content": given}]
    return given if isinstance(given, list) else []


def _item(item: Any) -> dict[str, Any]:
    """One history entry: a message, or a Responses API item (a tool's call
    by the model, a tool's output, reasoning and the rest laid out)."""
    if isinstance(item, dict) and "gemini" in item and len(item) == 1:
        return _gemini(item["gemini"])
    if not isinstance(item, dict) or "role" in item or "type" not in item:
        return _message(item)
    kind = str(item.get("type", ""))
    if kind == "message":
        return _message(item)
    if kind in CALLS:
        return {"role": "assistant", "text": "", "tools": [_call(item)]}
    if kind in OUTPUTS:
        output = item.get("output")
        body = output if isinstance(output, str) else _json(output)
        title = f"tool output {item.get('call_id', '')}".strip()
        return {
            "role": "tool",
            "text": "",
            "tools": [{"title": title, "body": _cut(body)}],
        }
    return {"role": kind, "text": "", "tools": [{"title": kind, "body": _json(item)}]}


def _gemini(content: Any) -> dict[str, Any]:
    """A Gemini ``contents`` entry (or a candidate's content): its text parts,
    and its function calls and responses as tool parts."""
    if not isinstance(content, dict):
        return _message(content)
    texts: list[str] = []
    tools: list[dict[str, str]] = []
    for part in content.get("parts") or []:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str) and not part.get("thought"):
            texts.append(part["text"])
        elif isinstance(part.get("functionCall"), dict):
            name = str(part["functionCall"].get("name", ""))
            tools.append({"title": f"function call {name}", "body": _json(part)})
        elif isinstance(part.get("functionResponse"), dict):
            name = str(part["functionResponse"].get("name", ""))
            tools.append({"title": f"function response {name}", "body": _json(part)})
        else:
            tools.append({"title": next(iter(part), "part"), "body": _json(part)})
    role = str(content.get("role", ""))
    return {"role": role, "text": _cut("\n".join(texts)), "tools": tools}


def _call(item: dict[str, Any]) -> dict[str, str]:
    kind = str(item.get("type", ""))
    given = item.get(CALLS[kind])
    body = given if isinstance(given, str) else _json(given)
    words = kind.replace("_", " ")
    return {"title": f"{words} {item.get('name', '')}".strip(), "body": _cut(body)}


def _output(items: list[Any]) -> dict[str, Any]:
    """A Responses answer's output items as one assistant turn."""
    texts: list[str] = []
    tools: list[dict[str, str]] = []
    for item in items:
        laid = _item(item)
        if laid["text"]:
            texts.append(laid["text"])
        tools.extend(laid["tools"])
    return {"role": "assistant", "text": _cut("\n".join(texts)), "tools": tools}


def turns(exchanges: list[Exchange]) -> list[dict[str, Any]]:
    """One row per call: its number, what was asked (system, the messages
    new since the previous call) and the answer."""
    rows = []
    shown = 0
    for number, exchange in enumerate(exchanges, 1):
        request = exchange.request
        messages = _history(request)
        # A conversation resends its history: only what is new is shown.
        new = messages[shown:] if len(messages) >= shown else messages
        shown = len(messages)
        system, _ = _parts(request.get("system") or request.get("instructions"))
        if not system and isinstance(request.get("systemInstruction"), dict):
            system = _gemini(request["systemInstruction"])["text"]
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
                "messages": [_item(m) for m in new],
                "answer": _answer(exchange),
            }
        )
    return rows
