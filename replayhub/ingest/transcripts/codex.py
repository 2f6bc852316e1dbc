"""Codex CLI rollout files (``~/.codex/sessions/YYYY/MM/DD/rollout-….jsonl``).

Each line is ``{"timestamp", "type", "payload"}``. ``session_meta`` opens the
file: the session ``id``, its ``timestamp``, the ``cwd`` and, when the cwd was a
git checkout, ``git`` (``commit_hash``, ``branch``, ``repository_url``).
``turn_context`` gives each turn's ``model`` (and ``effort``).
``response_item`` lines are the Responses API items: ``message`` (role and
content), ``reasoning``, ``function_call`` / ``function_call_output``,
``custom_tool_call``, ``local_shell_call``. ``event_msg`` lines are UI events,
of which ``token_count`` carries ``info.total_token_usage`` and
``info.last_token_usage``, and ``user_message`` the person's text.
``compacted`` lines hold a compaction's summary.

Older files open with the session meta as a bare object (``id``,
``timestamp``, ``instructions``, ``git``) followed by bare response items and
``{"record_type": "state"}`` lines; those are read too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from replayhub.ingest.native import RecordLine
from replayhub.ingest.transcripts.shapes import (
    LineError,
    Parsed,
    RecordDraft,
    Search,
    block_text,
    count,
    iso,
    json_objects,
    moment,
)

FORMAT = "codex"
_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
# Inputs Codex adds to the conversation itself, not the person's words.
_CONTEXT_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
)
# Response item kinds the model produced (the rest are inputs to it).
_OUTPUTS = {
    "reasoning",
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "web_search_call",
}
LINE_TYPES = {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}


def parse(lines: Iterable[RecordLine], *, name: str = "") -> Iterator[Parsed]:
    """The one session of a rollout file."""
    kept: list[dict[str, Any]] = []
    meta: dict[str, Any] | None = None
    first = 0
    models: list[tuple[str, str]] = []
    items: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    times = []
    for item in json_objects(lines):
        if isinstance(item, LineError):
            yield item
            continue
        number, value = item
        first = first or number
        kept.append(value)
        kind, payload = _unwrap(value, legacy_meta=meta is None and len(kept) == 1)
        if (t := moment(value.get("timestamp"))) is not None:
            times.append(t)
        if kind is None:
            yield LineError(number, "not a rollout line (no type and payload)")
            continue
        if kind == "session_meta":
            if meta is None:
                meta = payload
        elif kind == "turn_context":
            model = payload.get("model")
            if isinstance(model, str) and model:
                effort = payload.get("effort")
                models.append((model, effort if isinstance(effort, str) else ""))
        elif kind == "response_item":
            items.append((payload, None))
        elif kind == "event_msg" and payload.get("type") == "token_count":
            items.append(({}, payload))
        elif kind == "event_msg" and payload.get("type") == "user_message":
            items.append(({"type": "user_message", **payload}, None))
    if not kept:
        return
    if meta is None or not isinstance(meta.get("id"), str) or not meta["id"]:
        yield LineError(first, "the rollout has no session_meta line with an id")
        return
    yield _session(first, meta, models, items, kept, times)


def _unwrap(
    value: dict[str, Any], *, legacy_meta: bool
) -> tuple[str | None, dict[str, Any]]:
    kind = value.get("type")
    payload = value.get("payload")
    if kind in LINE_TYPES and isinstance(payload, dict):
        return kind, payload
    if legacy_meta and "id" in value and "payload" not in value:
        return "session_meta", value
    if value.get("record_type") == "state":
        return "state", value
    if isinstance(kind, str) and "payload" not in value:
        return "response_item", value
    return None, value


def _session(
    first: int,
    meta: dict[str, Any],
    models: list[tuple[str, str]],
    items: list[tuple[dict[str, Any], dict[str, Any] | None]],
    kept: list[dict[str, Any]],
    times: list,
) -> Parsed:
    session = meta["id"]
    prompt = _prompt(items)
    if not prompt:
        return LineError(
            first, f"session {session}: no user message to take the prompt from"
        )
    started = moment(meta.get("timestamp")) or (min(times) if times else None)
    if started is None:
        return LineError(first, f"session {session}: no timestamp with a zone")
    entries, output = _tape(items, models)
    totals: dict[str, int] = {}
    for _, event in items:
        info = event.get("info") if event else None
        if isinstance(info, dict) and isinstance(info.get("total_token_usage"), dict):
            totals = {k: count(v) for k, v in info["total_token_usage"].items()}
    usage = {
        "input_tokens": totals.get("input_tokens", 0),
        "output_tokens": totals.get("output_tokens", 0),
        "turns": len(entries),
    }
    for extra in ("cached_input_tokens", "reasoning_output_tokens"):
        if extra in totals:
            usage[extra] = totals[extra]
    record: dict[str, Any] = {
        "external_id": session,
        "prompt": prompt,
        "started_at": iso(started),
        "provider": "openai",
        "usage": usage,
        "transcript": {"format": FORMAT, "lines": kept},
        "tape": entries,
    }
    if models:
        record["model"] = models[-1][0]
        if models[-1][1]:
            record["effort"] = models[-1][1]
    if output:
        record["output"] = output
    if isinstance(meta.get("cwd"), str):
        record["cwd"] = meta["cwd"]
    git: dict[str, Any] = meta["git"] if isinstance(meta.get("git"), dict) else {}
    commit = git.get("commit_hash")
    named = git.get("branch")
    branch: str = named if isinstance(named, str) else ""
    draft = RecordDraft(first, record)
    if isinstance(commit, str) and _SHA.fullmatch(commit):
        record["base_sha"] = commit
    if branch:
        record["original_branch"] = branch
    record["surroundings"] = _surroundings(meta, branch)
    draft.search = Search(
        branch=branch,
        start=started,
        end=max(times) if times else started,
        find_base="base_sha" not in record,
        find_original=True,
    )
    return draft


def _prompt(items: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> str:
    for item, _ in items:
        message = item.get("message")
        kind = item.get("type")
        if kind == "user_message" and isinstance(message, str) and message.strip():
            return message
    for item, _ in items:
        if item.get("type") == "message" and item.get("role") == "user":
            text = block_text(item.get("content"))
            if text.strip() and not text.lstrip().startswith(_CONTEXT_PREFIXES):
                return text
    return ""


def _tape(
    items: list[tuple[dict[str, Any], dict[str, Any] | None]],
    models: list[tuple[str, str]],
) -> tuple[list[dict[str, Any]], str]:
    """The model calls in the recorder's tape shape (``request.input`` is what
    was added since the call before, ``request_is_delta``), and the last
    assistant text."""
    model = models[-1][0] if models else None
    entries: list[dict[str, Any]] = []
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    output = ""

    def close(usage: dict[str, Any] | None) -> None:
        nonlocal inputs, outputs
        if not outputs:
            return
        usage = usage or {}
        entries.append(
            {
                "provider_kind": "openai",
                "method": "POST",
                "path": "/v1/responses",
                "request": {"model": model, "input": inputs},
                "request_is_delta": True,
                "status": 200,
                "stream": False,
                "response": {"object": "response", "model": model, "output": outputs},
                "model": model,
                "usage": {
                    "input_tokens": count(usage.get("input_tokens")),
                    "output_tokens": count(usage.get("output_tokens")),
                },
                "billed": True,
                "from_transcript": True,
            }
        )
        inputs, outputs = [], []

    for item, event in items:
        if event is not None:
            info = event.get("info")
            last = info.get("last_token_usage") if isinstance(info, dict) else None
            close(last if isinstance(last, dict) else None)
            continue
        kind = item.get("type")
        if kind == "user_message":
            continue
        produced = kind in _OUTPUTS or (
            kind == "message" and item.get("role") == "assistant"
        )
        if produced:
            outputs.append(item)
            if kind == "message":
                text = block_text(item.get("content"))
                output = text or output
        else:
            close(None)
            inputs.append(item)
    close(None)
    return entries, output


def _surroundings(meta: dict[str, Any], branch: str) -> dict[str, Any]:
    """What Codex saw of where it ran, as the record's ``surroundings``: the
    session's working directory, branch and CLI version."""
    found: dict[str, Any] = {"agent": {"name": "codex"}}
    if isinstance(cwd := meta.get("cwd"), str) and cwd:
        found["cwd"] = cwd
    if branch:
        found["branch"] = branch
    if isinstance(version := meta.get("cli_version"), str) and version:
        found["agent"]["version"] = version[:64]
    return found
