"""A rollout replay's output as a verifiers record, marked as ReplayHub's own.

The record has the legacy ``Trace.to_record()`` shape a training pipeline
reads: the seed as the task's prompt and as the first nodes (not sampled), the
replay's completion after them (the assistant messages sampled), the
verifier's reward as the one reward, and ``info.replayhub``: the mark by which
ingest knows it for a replay's output and never imports it as a rollout (see
``rollouts.trace.REPLAY_MARK``). Pure: plain data in, a dict out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from replayhub.rollouts.trace import REPLAY_MARK


def output_record(
    *,
    replay_id: int,
    trace_id: str,
    task_name: str,
    seed: Sequence[dict],
    completion: Sequence[dict],
    reward: float | None,
    mark: dict,
) -> dict[str, Any]:
    """The record of one replay's output (``completion`` as stored)."""
    messages = [*(_message(m) for m in seed), *(_message(m) for m in completion)]
    nodes = [
        {
            "parent": index - 1 if index else None,
            "message": message,
            "sampled": index >= len(seed) and message["role"] == "assistant",
        }
        for index, message in enumerate(messages)
    ]
    return {
        "id": f"{trace_id}.replay-{replay_id}",
        "task": {
            "name": task_name or None,
            "prompt": [_message(m) for m in seed],
            "system_prompt": None,
        },
        "nodes": nodes,
        "rewards": {} if reward is None else {"replayhub_verifier": reward},
        "metrics": {},
        "info": {REPLAY_MARK: mark},
        "is_completed": reward is not None,
        "stop_condition": "done" if reward is not None else "error",
        "errors": [],
    }


def record_line(record: dict[str, Any]) -> bytes:
    """One JSONL line (newline included)."""
    return json.dumps(record, ensure_ascii=False).encode() + b"\n"


def _message(message: dict) -> dict[str, Any]:
    """A chat message with only the keys a record's message carries."""
    role = message.get("role")
    out: dict[str, Any] = {"role": role, "content": message.get("content")}
    calls = message.get("tool_calls")
    if role == "assistant" and isinstance(calls, list) and calls:
        out["tool_calls"] = [
            {
                "id": str(call.get("id") or ""),
                "name": str(call.get("name") or ""),
                "arguments": str(call.get("arguments") or ""),
            }
            for call in calls
            if isinstance(call, dict)
        ]
    if role == "tool":
        out["tool_call_id"] = str(message.get("tool_call_id") or "")
    if isinstance(message.get("name"), str):
        out["name"] = message["name"]
    return out
