"""One verifiers rollout record (a ``Trace.to_record()`` JSONL line), read into
a :class:`Trace` of plain values. Pure: bytes and dicts in, a Trace or a
:class:`ShapeError` naming the field out.

Two shapes are read, told apart by the top-level ``version`` key:

- legacy (no ``version``): ``task`` holds ``idx``, ``name``, ``prompt``,
  ``system_prompt`` and taskset extras; ``rewards`` maps names to weighted
  numbers; each node may carry its call's ``usage``.
- ``version: 1``: ``task`` is ``{type, data, key, hash}`` with the task's
  fields under ``data``; ``rewards`` maps names to ``{score, weight}`` (or
  null); usage is in ``calls[]``.

``docs/formats.md`` describes the format for producers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from replayhub.ingest.native import RecordError, json_type, parse_line
from replayhub.lib import boundedjson

ROLES = ("system", "user", "assistant", "tool")
VERSIONS = (1,)
ID_LIMIT = 255
# Where a record marks itself as the output of a ReplayHub replay: ``info``
# (or the top level, or an index row) holds this key with an object naming
# the replay and its seed. Such a record never seeds again.
REPLAY_MARK = "replayhub"
SNAPSHOTS = "snapshots"


class ShapeError(ValueError):
    """Why a line is not a rollout record this reader understands."""


@dataclass(slots=True)
class Node:
    parent: int | None
    # The chat message: role, content, and tool_calls / tool_call_id / name
    # where present; keys whose value is null are left out, content never.
    message: dict[str, Any]
    sampled: bool
    # How many token ids the record carries for the node (0: none recorded).
    tokens: int

    @property
    def role(self) -> str:
        return self.message["role"]


@dataclass(slots=True)
class Trace:
    id: str
    version: int | None
    task_name: str | None
    task_idx: int | None
    # The task's prompt as recorded: a string, a message list, or None (the
    # conversation was opened by the user side, not by the task).
    prompt: str | list[Any] | None
    system_prompt: str | None
    nodes: list[Node]
    reward: float
    snapshots: dict[int, str] = field(default_factory=dict)
    replay_mark: dict[str, Any] | None = None
    usage: dict[str, int] = field(default_factory=dict)
    stop_condition: str | None = None
    is_completed: bool | None = None


def parse_record(data: bytes, *, terminated: bool = True) -> tuple[Trace, Any]:
    """Parse one line into its Trace and the JSON value it was read from.

    orjson reads a record (strict JSON: no NaN or Infinity), within
    ``boundedjson``'s bounds; what it refuses as JSON goes to the native
    reader, which words the error or reads what orjson cannot (an integer past
    64 bits). A repeated key keeps its last value.
    """
    try:
        value = boundedjson.loads(data, lenient=False)
    except boundedjson.Refused as refused:
        if refused.bound:
            raise ShapeError(str(refused)) from None
        try:
            value = parse_line(data, terminated=terminated)
        except RecordError as error:
            raise ShapeError(str(error)) from None
    return read_trace(value), value


def read_trace(value: Any) -> Trace:
    """The Trace of a parsed record; a ShapeError names the first field wrong."""
    if not isinstance(value, dict):
        raise ShapeError(f"a record is a JSON object, not {json_type(value)}")
    version = value.get("version")
    if "version" in value and (type(version) is not int or version not in VERSIONS):
        raise ShapeError(
            f"version: {version!r} is not a record shape this reader knows "
            f"(it reads the legacy shape and version {', '.join(map(str, VERSIONS))})"
        )
    trace_id = value.get("id")
    if not isinstance(trace_id, str) or not trace_id.strip():
        raise ShapeError("id: the trace id is missing or not a string")
    if len(trace_id) > ID_LIMIT or any(ord(c) < 32 or ord(c) == 127 for c in trace_id):
        raise ShapeError(f"id: at most {ID_LIMIT} characters and no control characters")
    task = value.get("task")
    if not isinstance(task, dict):
        raise ShapeError("task: missing or not an object")
    fields: Any
    if version is None:
        fields = task
        where = "task"
    else:
        if not isinstance(task.get("type"), str):
            raise ShapeError("task.type: missing or not a string")
        fields = task.get("data")
        if not isinstance(fields, dict):
            raise ShapeError("task.data: missing or not an object")
        where = "task.data"
    name = _optional(fields, "name", str, where)
    idx = fields.get("idx")
    if idx is not None and type(idx) is not int:
        raise ShapeError(f"{where}.idx: not an integer")
    prompt = fields.get("prompt")
    if prompt is not None and not isinstance(prompt, str | list):
        raise ShapeError(f"{where}.prompt: a string, a message list or null")
    system_prompt = _optional(fields, "system_prompt", str, where)
    nodes = _nodes(value.get("nodes"))
    info = value.get("info", {})
    if info is None:
        info = {}
    if not isinstance(info, dict):
        raise ShapeError("info: not an object")
    mark = info.get(REPLAY_MARK, value.get(REPLAY_MARK))
    if mark is not None and not isinstance(mark, dict):
        raise ShapeError(f"info.{REPLAY_MARK}: not an object")
    stop = value.get("stop_condition")
    completed = value.get("is_completed")
    return Trace(
        id=trace_id,
        version=version,
        task_name=name,
        task_idx=idx,
        prompt=prompt,
        system_prompt=system_prompt,
        nodes=nodes,
        reward=_reward(value.get("rewards"), legacy=version is None),
        snapshots=_snapshots(info.get(SNAPSHOTS), len(nodes)),
        replay_mark=mark,
        usage=_usage(value, nodes_usage=version is None),
        stop_condition=stop if isinstance(stop, str) else None,
        is_completed=completed if isinstance(completed, bool) else None,
    )


def _optional(fields: dict, key: str, kind: type, where: str) -> Any:
    value = fields.get(key)
    if value is not None and not isinstance(value, kind):
        raise ShapeError(f"{where}.{key}: not a {kind.__name__}")
    return value


def _nodes(value: Any) -> list[Node]:
    if not isinstance(value, list):
        raise ShapeError("nodes: missing or not a list")
    nodes = []
    for i, node in enumerate(value):
        where = f"nodes[{i}]"
        if not isinstance(node, dict):
            raise ShapeError(f"{where}: not an object")
        parent = node.get("parent")
        # Nodes are appended as the conversation grows: a parent comes first,
        # which also rules out cycles.
        if parent is not None and (type(parent) is not int or not 0 <= parent < i):
            raise ShapeError(
                f"{where}.parent: {parent!r} is not the index of an earlier node"
            )
        sampled = node.get("sampled", False)
        if type(sampled) is not bool:
            raise ShapeError(f"{where}.sampled: not true or false")
        token_ids = node.get("token_ids") or ()
        if not isinstance(token_ids, list | tuple):
            raise ShapeError(f"{where}.token_ids: not a list")
        nodes.append(
            Node(parent, _message(node.get("message"), where), sampled, len(token_ids))
        )
    return nodes


def _message(value: Any, where: str) -> dict[str, Any]:
    where = f"{where}.message"
    if not isinstance(value, dict):
        raise ShapeError(f"{where}: missing or not an object")
    role = value.get("role")
    if role not in ROLES:
        raise ShapeError(f"{where}.role: {role!r} is not one of {', '.join(ROLES)}")
    content = value.get("content")
    if content is not None and not isinstance(content, str | list):
        raise ShapeError(f"{where}.content: a string, a list of parts or null")
    message = {k: v for k, v in value.items() if v is not None}
    message["content"] = content
    calls = value.get("tool_calls")
    if calls is not None:
        if role != "assistant" or not isinstance(calls, list):
            raise ShapeError(f"{where}.tool_calls: a list, on assistant messages")
        message["tool_calls"] = [
            _tool_call(call, f"{where}.tool_calls[{n}]") for n, call in enumerate(calls)
        ]
        if not message["tool_calls"]:
            del message["tool_calls"]
    if role == "tool" and not isinstance(value.get("tool_call_id"), str):
        raise ShapeError(f"{where}.tool_call_id: a tool message names its call")
    return message


def _tool_call(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ShapeError(f"{where}: not an object")
    # The chat-completions wire form nests name and arguments in "function".
    inner = value["function"] if isinstance(value.get("function"), dict) else value
    call = {}
    for key, source in (("id", value), ("name", inner), ("arguments", inner)):
        text = source.get(key)
        if not isinstance(text, str):
            raise ShapeError(f"{where}.{key}: missing or not a string")
        call[key] = text
    return call


def _reward(value: Any, *, legacy: bool) -> float:
    """The sum of the weighted rewards."""
    if value is None:
        return 0.0
    if not isinstance(value, dict):
        raise ShapeError("rewards: not an object")
    total = 0.0
    for name, reward in value.items():
        if legacy:
            total += _number(reward, f"rewards.{name}")
        elif reward is not None:
            if not isinstance(reward, dict):
                raise ShapeError(f"rewards.{name}: not {{score, weight}} or null")
            weight = reward.get("weight", 1.0)
            total += _number(reward.get("score"), f"rewards.{name}.score") * _number(
                weight, f"rewards.{name}.weight"
            )
    if not math.isfinite(total):
        raise ShapeError("rewards: the sum is not a finite number")
    return total


def _number(value: Any, where: str) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):
        raise ShapeError(f"{where}: not a finite number")
    return float(value)


def _snapshots(value: Any, count: int) -> dict[int, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ShapeError(f"info.{SNAPSHOTS}: not an object of node index to ref")
    refs = {}
    for key, ref in value.items():
        if not (isinstance(key, str) and key.isdigit() and int(key) < count):
            raise ShapeError(f"info.{SNAPSHOTS}: {key!r} is not a node index")
        if not isinstance(ref, str) or not ref:
            raise ShapeError(f"info.{SNAPSHOTS}.{key}: not a snapshot ref")
        refs[int(key)] = ref
    return refs


def _usage(value: dict, *, nodes_usage: bool) -> dict[str, int]:
    """Input and output tokens summed over the model calls, and the turns."""
    if nodes_usage:
        found = [n.get("usage") for n in value["nodes"] if isinstance(n, dict)]
    else:
        calls = value.get("calls")
        found = [c.get("usage") for c in calls or () if isinstance(c, dict)]
    usages = [u for u in found if isinstance(u, dict)]
    turns = sum(1 for n in value["nodes"] if isinstance(n, dict) and n.get("sampled"))
    return {
        "input_tokens": sum(_count(u.get("prompt_tokens")) for u in usages),
        "output_tokens": sum(_count(u.get("completion_tokens")) for u in usages),
        "turns": turns,
    }


def _count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


def content_text(content: Any) -> str:
    """The text of a message's content: the string, or its text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text") or ""
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""
