"""Rollout records built turn by turn, the way a verifiers rollout grows its
message graph: each turn's context reuses the nodes it shares with earlier
turns and adds the rest, then the model's reply as a sampled node."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from replayhub.rollouts.graph import leaves

FIXTURES = Path(__file__).resolve().parent / "rollouts" / "fixtures"
RECORDS = FIXTURES / "train_rollouts_invoicer.jsonl"
INDEX = FIXTURES / "index_invoicer.jsonl"

SYSTEM = {"role": "system", "content": "be helpful"}
TASK = {"role": "user", "content": "solve the task"}
RESTART = {"role": "user", "content": "Another model left a summary: progress so far"}


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str = "", *call_ids: str) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if call_ids:
        message["tool_calls"] = [
            {"id": c, "name": "run", "arguments": "{}"} for c in call_ids
        ]
    return message


def tool(call_id: str) -> dict:
    return {
        "role": "tool",
        "tool_call_id": call_id,
        "content": f"result of {call_id}",
        "name": "run",
    }


class Rollout:
    """A record under construction."""

    def __init__(
        self,
        trace_id: str = "a1b2c3d4e5f60718293a4b5c6d7e8f90",
        *,
        prompt: Any = "solve the task",
        system_prompt: str | None = None,
        name: str = "task-a",
        reward: float = 1.0,
        tokens: bool = False,
    ) -> None:
        self.id = trace_id
        self.prompt = prompt
        self.system_prompt = system_prompt
        self.name = name
        self.reward = reward
        self.tokens = tokens
        self.nodes: list[dict[str, Any]] = []
        self.info: dict[str, Any] = {}

    def turn(self, context: list[dict], reply: dict) -> Rollout:
        parent = None
        for message in context:
            parent = self._node(parent, message, sampled=False)
        self._append(parent, reply, sampled=True)
        return self

    def unsampled(self, context: list[dict]) -> Rollout:
        """Context with no reply (a conversation cut before the model spoke)."""
        parent = None
        for message in context:
            parent = self._node(parent, message, sampled=False)
        return self

    def index_of(self, message: dict) -> int:
        return next(i for i, n in enumerate(self.nodes) if n["message"] == message)

    def _node(self, parent: int | None, message: dict, *, sampled: bool) -> int:
        for i, node in enumerate(self.nodes):
            if node["parent"] == parent and node["message"] == message:
                return i
        return self._append(parent, message, sampled=sampled)

    def _append(self, parent: int | None, message: dict, *, sampled: bool) -> int:
        size = len(json.dumps(message))
        self.nodes.append(
            {
                "parent": parent,
                "message": copy.deepcopy(message),
                "sampled": sampled,
                "token_ids": list(range(size // 3)) if self.tokens else [],
                "mask": [],
                "logprobs": [],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5}
                if sampled
                else None,
            }
        )
        return len(self.nodes) - 1

    def record(self, *, version: int | None = None) -> dict[str, Any]:
        task = {
            "idx": 3,
            "name": self.name,
            "prompt": self.prompt,
            "system_prompt": self.system_prompt,
        }
        if version is None:
            return {
                "id": self.id,
                "task": task,
                "nodes": self.nodes,
                "rewards": {"passed": self.reward},
                "metrics": {},
                "info": self.info,
                "is_completed": True,
                "stop_condition": "done",
                "errors": [],
                "timing": {"start": 1767225600.0},
            }
        nodes = [{k: v for k, v in node.items() if k != "usage"} for node in self.nodes]
        calls = [
            {"node": i, "model": "m-1", "usage": node["usage"]}
            for i, node in enumerate(self.nodes)
            if node["sampled"]
        ]
        return {
            "version": version,
            "id": self.id,
            "task": {"type": "Task", "data": task, "key": "k", "hash": "h"},
            "agent": {"config": {}},
            "nodes": nodes,
            "calls": calls,
            "rewards": {"passed": {"score": self.reward, "weight": 1.0}},
            "info": self.info,
            "is_completed": True,
            "ok": True,
            "stop_condition": "done",
            "timing": {"start": 1767225600.0},
        }


def compacted(trace_id: str = "c0ffee00c0ffee00c0ffee00c0ffee00", **kw) -> Rollout:
    """A tool-using branch ending in a handoff summary, then a second branch
    re-rooted at the shared system node with the summary as a fresh user turn."""
    r = Rollout(trace_id, **kw)
    a1 = assistant("", "c1")
    r.turn([SYSTEM, TASK], a1)
    r.turn(
        [SYSTEM, TASK, a1, tool("c1"), user("checkpoint: summarise")],
        assistant("handoff"),
    )
    a3 = assistant("", "c2")
    r.turn([SYSTEM, RESTART], a3)
    r.turn([SYSTEM, RESTART, a3, tool("c2")], assistant("final answer"))
    return r


def multi_tool(trace_id: str = "7007007007007007a007007007007007", **kw) -> Rollout:
    """One branch with three complete tool runs, then a final answer."""
    r = Rollout(trace_id, **kw)
    context: list[dict] = [SYSTEM, TASK]
    for call_id in ("c1", "c2", "c3"):
        reply = assistant("", call_id)
        r.turn(context, reply)
        context = [*context, reply, tool(call_id)]
    r.turn(context, assistant("final answer"))
    return r


def line(record: dict) -> bytes:
    return json.dumps(record).encode() + b"\n"


def index_row(record: dict, offset: int, length: int, **extra) -> dict:
    version = record.get("version")
    task = record["task"]["data"] if version else record["task"]
    rewards = record["rewards"]
    reward = (
        sum(r["score"] * r["weight"] for r in rewards.values())
        if version
        else sum(rewards.values())
    )

    class _N:
        def __init__(self, parent):
            self.parent = parent

    branches = len(leaves([_N(n["parent"]) for n in record["nodes"]]))
    return {
        "trace": record["id"],
        "task_name": task["name"],
        "reward": reward,
        "branches": branches,
        "offset": offset,
        "len": length,
        **extra,
    }


def write_records(
    directory: Path, records: list[dict], *, env: str = "env", index: bool = True
) -> Path:
    """``train_rollouts_<env>.jsonl`` and, with ``index``, its index."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"train_rollouts_{env}.jsonl"
    rows, data, offset = [], b"", 0
    for record in records:
        encoded = line(record)
        rows.append(index_row(record, offset, len(encoded)))
        data += encoded
        offset += len(encoded)
    path.write_bytes(data)
    if index:
        (directory / f"index_{env}.jsonl").write_bytes(b"".join(map(line, rows)))
    return path
