"""Chat messages of a rollout, normalised: for comparing completions and showing them.

A completion is what a model (and the tools it called) added after a seed: a
list of messages in the OpenAI chat shape the ``verifiers`` library records, or
a bare string (one assistant message). Every message is reduced to the same
plain shape whatever the producer wrote, so that two completions compare equal
exactly when they say the same thing: the same roles, the same text, the same
tool calls with the same arguments. Tool-call ids are not compared (a producer
draws them at random), and arguments are compared as the JSON they encode.

Pure functions over plain data; nothing here imports Django.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from replayhub.ingest.native import json_type
from replayhub.lib import boundedjson
from replayhub.texttier.similarity import jaccard

ROLES = frozenset({"system", "user", "assistant", "tool"})
# More messages than this in one completion is not a completion a verifier
# judged but a flood; it is refused rather than compared or stored.
MAX_MESSAGES = 2000


class MalformedCompletion(ValueError):
    """A completion that is not a string or a list of chat messages; the message
    says where, in one line."""


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str

    def canonical_arguments(self) -> str:
        """The arguments as the JSON they encode, key order and spacing aside;
        the raw text when it is not JSON."""
        try:
            value = boundedjson.loads(self.arguments)
        except boundedjson.Refused:
            return self.arguments.strip()
        return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Message:
    role: str
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""

    def key(self) -> tuple:
        """What two messages must share to be the same message."""
        calls = tuple((c.name, c.canonical_arguments()) for c in self.tool_calls)
        return (self.role, self.content.strip(), calls)

    def text(self) -> str:
        """The words of the message: its content, tool names and arguments."""
        parts = [self.content]
        for call in self.tool_calls:
            parts += [call.name, call.arguments]
        return "\n".join(part for part in parts if part)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments}
                for c in self.tool_calls
            ]
        if self.tool_call_id:
            data["tool_call_id"] = self.tool_call_id
        if self.name:
            data["name"] = self.name
        return data


def normalise(completion: object) -> tuple[Message, ...]:
    """``completion`` (a string, or a list of message objects) as messages.

    Raises ``MalformedCompletion`` naming the first thing that is not a
    message: an unknown role, content that is not text, a tool call without a
    name, more than ``MAX_MESSAGES`` messages.
    """
    if isinstance(completion, str):
        return (Message(role="assistant", content=completion),)
    if not isinstance(completion, list):
        raise MalformedCompletion(
            f"the completion is {json_type(completion)}, "
            "not a string or a list of messages"
        )
    if len(completion) > MAX_MESSAGES:
        raise MalformedCompletion(
            f"the completion has {len(completion):,} messages, over the "
            f"{MAX_MESSAGES:,} accepted"
        )
    return tuple(_message(item, index) for index, item in enumerate(completion))


def same(one: Sequence[Message], other: Sequence[Message]) -> bool:
    """Whether two completions say the same thing (see the module docstring)."""
    return [m.key() for m in one] == [m.key() for m in other]


def text(messages: Sequence[Message]) -> str:
    """The words of ``messages``, one message a paragraph."""
    return "\n\n".join(message.text() for message in messages)


def similarity(one: Sequence[Message], other: Sequence[Message]) -> float:
    """Token-level Jaccard similarity of two completions (the text tier's token
    rule: ``texttier.similarity``), rounded to 4 places."""
    return round(jaccard(text(one), text(other)), 4)


def _message(item: object, index: int) -> Message:
    where = f"message {index + 1}"
    if not isinstance(item, dict):
        raise MalformedCompletion(f"{where} is {json_type(item)}, not an object")
    role = item.get("role")
    if role not in ROLES:
        raise MalformedCompletion(f"{where} has no known role ({_short(role)})")
    return Message(
        role=role,
        content=_content(item.get("content"), where),
        tool_calls=_tool_calls(item.get("tool_calls"), where),
        tool_call_id=_optional_text(
            item.get("tool_call_id"), f"{where}'s tool_call_id"
        ),
        name=_optional_text(item.get("name"), f"{where}'s name"),
    )


def _content(value: object, where: str) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, list):
        # Content parts ({"type": "text", "text": ...}); a part that is not
        # text (an image) is named, not dropped silently.
        texts = []
        for part in value:
            if not isinstance(part, dict):
                raise MalformedCompletion(
                    f"{where} has a content part that is not an object"
                )
            text = part.get("text")
            if isinstance(text, str):
                texts.append(text)
            else:
                texts.append(f"[{_short(part.get('type'))}]")
        return "\n".join(texts)
    raise MalformedCompletion(f"{where}'s content is {json_type(value)}, not text")


def _tool_calls(value: object, where: str) -> tuple[ToolCall, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise MalformedCompletion(
            f"{where}'s tool_calls is {json_type(value)}, not a list"
        )
    calls = []
    for number, call in enumerate(value, 1):
        label = f"{where}'s tool call {number}"
        if not isinstance(call, dict):
            raise MalformedCompletion(f"{label} is {json_type(call)}, not an object")
        # verifiers writes {id, name, arguments}; the OpenAI wire shape nests
        # name and arguments under "function".
        function = call.get("function")
        source = function if isinstance(function, dict) else call
        name = source.get("name")
        if not isinstance(name, str) or not name:
            raise MalformedCompletion(f"{label} has no name")
        arguments = source.get("arguments", "")
        if isinstance(arguments, dict | list):
            arguments = json.dumps(arguments, sort_keys=True)
        elif arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):
            raise MalformedCompletion(f"{label}'s arguments are {json_type(arguments)}")
        calls.append(
            ToolCall(
                id=_optional_text(call.get("id"), f"{label}'s id"),
                name=name,
                arguments=arguments,
            )
        )
    return tuple(calls)


def _optional_text(value: object, what: str) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    raise MalformedCompletion(f"{what} is {json_type(value)}, not text")


def _short(value: object) -> str:
    """An untrusted value named in a message: printable, at most 40 characters."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = "".join(ch if ch.isprintable() else "?" for ch in text[:40])
    return repr(text)
