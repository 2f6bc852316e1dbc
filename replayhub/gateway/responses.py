"""The OpenAI Responses API (``/responses``, Codex's wire) on a tape, as pure
functions: a stream's events rebuilt into the response object the API would
have answered without streaming (``rebuild``), and a response object written
back as the ``response.*`` server-sent events an agent reads (``events``).

A streamed answer ends in ``response.completed`` (or ``.incomplete`` /
``.failed``), which carries the whole response: that is the answer. A stream
cut before it is rebuilt from the output items its ``response.output_item.done``
events carried, in output order. Everything here is untrusted (the model and
the agent wrote it): it is only copied and re-encoded, never interpreted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from replayhub.lib import jsonvalues

ENDPOINT = "/responses"
# The events whose ``response`` is the finished answer.
FINAL_EVENTS = frozenset(
    {"response.completed", "response.incomplete", "response.failed"}
)


def is_stream(events: list[dict[str, Any]]) -> bool:
    """Whether parsed stream events are the Responses API's."""
    return any(str(e.get("type", "")).startswith("response.") for e in events)


def rebuild(events: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The response object a Responses stream's events add up to; ``None``
    when they hold none."""
    started: dict[str, Any] | None = None
    items: dict[int, Any] = {}
    for event in events:
        kind = event.get("type")
        response = event.get("response")
        if jsonvalues.text(kind) in FINAL_EVENTS and isinstance(response, dict):
            return dict(response)
        if kind in ("response.created", "response.in_progress") and isinstance(
            response, dict
        ):
            started = dict(response)
        elif kind == "response.output_item.done" and isinstance(
            event.get("item"), dict
        ):
            index = event.get("output_index")
            at = index if isinstance(index, int) and index >= 0 else len(items)
            items[at] = event["item"]
    if started is None and not items:
        return None
    rebuilt = dict(started or {"object": "response"})
    rebuilt["output"] = [items[i] for i in sorted(items)]
    return rebuilt


def _sse(data: dict[str, Any]) -> bytes:
    text = json.dumps(data, ensure_ascii=False)
    return f"event: {data['type']}\ndata: {text}\n\n".encode("utf-8", "surrogatepass")


def events(response: dict[str, Any]) -> list[bytes]:
    """``response`` as the server-sent events of a streamed answer, in the
    order the API sends them, each with its ``sequence_number``."""
    out: list[bytes] = []

    def send(kind: str, **fields: Any) -> None:
        out.append(_sse({"type": kind, "sequence_number": len(out), **fields}))

    output = [
        i for i in jsonvalues.items(response.get("output")) if isinstance(i, dict)
    ]
    shell = {**response, "status": "in_progress", "output": []}
    send("response.created", response=shell)
    send("response.in_progress", response=shell)
    for index, item in enumerate(output):
        _item_events(send, index, item)
    final = {**response, "output": output}
    final.setdefault("status", "completed")
    send(_final_event(final), response=final)
    return out


def _final_event(response: dict[str, Any]) -> str:
    status = response.get("status")
    if status == "incomplete":
        return "response.incomplete"
    if status == "failed":
        return "response.failed"
    return "response.completed"


def _item_events(send: Any, index: int, item: dict[str, Any]) -> None:
    """One output item's events: added, its own deltas, done."""
    kind = item.get("type")
    where = {"item_id": item.get("id", ""), "output_index": index}
    added = dict(item)
    if kind == "message":
        added["content"] = []
    elif kind == "function_call":
        added["arguments"] = ""
    elif kind == "custom_tool_call":
        added["input"] = ""
    send("response.output_item.added", output_index=index, item=added)
    if kind == "message":
        for number, part in enumerate(jsonvalues.items(item.get("content"))):
            if not isinstance(part, dict):
                continue
            at = {**where, "content_index": number}
            empty = {**part, "text": ""} if "text" in part else dict(part)
            send("response.content_part.added", **at, part=empty)
            if part.get("type") == "output_text":
                text = str(part.get("text", ""))
                send("response.output_text.delta", **at, delta=text)
                send("response.output_text.done", **at, text=text)
            send("response.content_part.done", **at, part=part)
    elif kind == "function_call":
        arguments = str(item.get("arguments", ""))
        send("response.function_call_arguments.delta", **where, delta=arguments)
        send("response.function_call_arguments.done", **where, arguments=arguments)
    elif kind == "custom_tool_call":
        given = str(item.get("input", ""))
        send("response.custom_tool_call_input.delta", **where, delta=given)
        send("response.custom_tool_call_input.done", **where, input=given)
    send("response.output_item.done", output_index=index, item=item)
