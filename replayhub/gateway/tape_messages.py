"""A tape's messages read as plain ones, whatever the wire wrote: what a
request sends (its system prompt apart, then its conversation) and what the
answer said, as :class:`Said`: a role, text, reasoning, the tool calls made
(id, name, arguments as sent) and the tool results given (the id and name of
the call answered, the result's text). Anthropic and OpenAI chat messages,
the Responses API's items and Gemini's contents are read alike, so that
whatever walks a tape as a conversation (the ATIF export) knows one shape.

Pure, like the tape: untrusted data in, plain strings and the arguments'
JSON values out, nothing rendered.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from replayhub.lib import jsonvalues

# Content parts that are text: Anthropic's and chat's, the Responses API's.
TEXT_PARTS = frozenset({"text", "input_text", "output_text"})


@dataclass
class Said:
    """One message of a tape, whatever its wire shape."""

    role: str
    text: str = ""
    reasoning: str = ""
    # (id, name, arguments) and (id, name, content).
    calls: tuple[tuple[str, str, Any], ...] = ()
    results: tuple[tuple[str, str, str], ...] = ()


def answer(response: Any) -> Said:
    """What an exchange's answer said: a Responses ``output``, Gemini's first
    candidate, chat's first choice, or an Anthropic message."""
    if not isinstance(response, dict):
        return Said("assistant", response if isinstance(response, str) else "")
    if isinstance(response.get("output"), list):
        return _merge([_item(i) for i in response["output"]])
    if isinstance(response.get("candidates"), list):
        first = next((c for c in response["candidates"] if isinstance(c, dict)), {})
        return _gemini(first.get("content"))
    if isinstance(response.get("choices"), list):
        choice = next((c for c in response["choices"] if isinstance(c, dict)), {})
        message = choice.get("message")
        return _message(message) if isinstance(message, dict) else Said("assistant")
    return _message({"role": "assistant", "content": response.get("content")})


def _merge(parts: list[Said]) -> Said:
    return Said(
        "assistant",
        "\n".join(p.text for p in parts if p.text),
        "\n\n".join(p.reasoning for p in parts if p.reasoning),
        tuple(c for p in parts for c in p.calls),
        tuple(r for p in parts for r in p.results),
    )


def system(request: dict[str, Any]) -> str:
    """The system prompt a request names apart from its messages."""
    given = request.get("system") or request.get("instructions")
    if given:
        return given if isinstance(given, str) else _text(given)
    instruction = request.get("systemInstruction")
    return _gemini(instruction).text if isinstance(instruction, dict) else ""


def history(request: dict[str, Any]) -> list[Said]:
    """The conversation a request sends: chat and Anthropic ``messages``,
    Gemini ``contents``, the Responses API's ``input``."""
    if isinstance(request.get("messages"), list):
        return [_message(m) for m in request["messages"]]
    if isinstance(request.get("contents"), list):
        return [_gemini(c) for c in request["contents"]]
    given = request.get("input")
    if isinstance(given, str):
        return [Said("user", given)]
    return [_item(i) for i in given] if isinstance(given, list) else []


def _message(message: Any) -> Said:
    """An Anthropic or chat message: text, thinking, tool calls and results."""
    if not isinstance(message, dict):
        return Said("user", message if isinstance(message, str) else "")
    role = str(message.get("role") or "")
    content = message.get("content")
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[tuple[str, str, Any]] = []
    results: list[tuple[str, str, str]] = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            texts.append(block)
            continue
        if not isinstance(block, dict):
            continue
        kind = _str(block.get("type"))
        if kind in TEXT_PARTS and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            thoughts.append(block["thinking"])
        elif kind == "tool_use":
            calls.append(
                (_str(block.get("id")), _str(block.get("name")), block.get("input"))
            )
        elif kind == "tool_result":
            results.append(
                (_str(block.get("tool_use_id")), "", _content(block.get("content")))
            )
    for call in jsonvalues.items(message.get("tool_calls")):
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            calls.append(
                (
                    _str(call.get("id")),
                    _str(function.get("name")),
                    function.get("arguments"),
                )
            )
    if isinstance(message.get("reasoning_content"), str):
        thoughts.append(message["reasoning_content"])
    text = "\n".join(texts)
    if role == "tool":
        results.append(
            (_str(message.get("tool_call_id")), _str(message.get("name")), text)
        )
        text = ""
    return Said(role, text, "\n\n".join(thoughts), tuple(calls), tuple(results))


def _item(item: Any) -> Said:
    """A Responses API item: a message, a call, a call's output, reasoning."""
    if not isinstance(item, dict) or "role" in item or "type" not in item:
        return _message(item)
    kind = item.get("type")
    if kind in ("function_call", "custom_tool_call"):
        given = item.get("arguments" if kind == "function_call" else "input")
        call = (_str(item.get("call_id")), _str(item.get("name")), given)
        return Said("assistant", calls=(call,))
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = _content(item.get("output"))
        return Said("tool", results=((_str(item.get("call_id")), "", output),))
    if kind == "reasoning":
        summary = item.get("summary")
        parts = summary if isinstance(summary, list) else []
        return Said(
            "assistant",
            reasoning=_text(
                [
                    {"type": "text", "text": p.get("text")}
                    for p in parts
                    if isinstance(p, dict)
                ]
            ),
        )
    return Said(str(item.get("role") or ""))


def _gemini(content: Any) -> Said:
    """A Gemini content: text and thought parts, function calls and
    responses (their ``id`` where the API gave one)."""
    if not isinstance(content, dict):
        return Said("user")
    role = "assistant" if content.get("role") == "model" else "user"
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[tuple[str, str, Any]] = []
    results: list[tuple[str, str, str]] = []
    for part in jsonvalues.items(content.get("parts")):
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            (thoughts if part.get("thought") else texts).append(part["text"])
        elif isinstance(called := part.get("functionCall"), dict):
            calls.append(
                (_str(called.get("id")), _str(called.get("name")), called.get("args"))
            )
        elif isinstance(answered := part.get("functionResponse"), dict):
            results.append(
                (
                    _str(answered.get("id")),
                    _str(answered.get("name")),
                    _content(answered.get("response")),
                )
            )
    return Said(
        role, "\n".join(texts), "\n\n".join(thoughts), tuple(calls), tuple(results)
    )


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _content(content: Any) -> str:
    """A tool result: text, text blocks, or anything else as JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and (text := _text(content)):
        return text
    if content is None:
        return ""
    return json.dumps(content, ensure_ascii=False, default=str)


def _text(content: Any) -> str:
    """The text parts of a message's content, joined by newlines."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, str):
            parts.append(block)
        elif (
            isinstance(block, dict)
            and _str(block.get("type", "text")) in TEXT_PARTS
            and isinstance(block.get("text"), str)
        ):
            parts.append(block["text"])
    return "\n".join(parts)
