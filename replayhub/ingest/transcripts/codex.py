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

Newer CLIs add line types (0.171 writes ``world_state`` and
``token_usage_record``) and response item types. A line or item of a type not
read here is kept in the transcript, left out of the tape and counted by type
(``RecordDraft.unread``, and one import note); it is never a line error. Event
kinds other than ``token_count`` and ``user_message`` are UI events, known and
not needed.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from replayhub.ingest.lines import RecordLine
from replayhub.ingest.transcripts.shapes import (
    LineError,
    Parsed,
    RecordDraft,
    Search,
    block_text,
    count,
    count_unread,
    iso,
    json_objects,
    moment,
    unread_note,
)
from replayhub.lib import jsonvalues

FORMAT = "codex"
_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
# Inputs Codex adds to the conversation itself, not the person's words.
_CONTEXT_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
)
# Response item kinds the model produced.
_OUTPUTS = {
    "reasoning",
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "web_search_call",
    "tool_search_call",
    "image_generation_call",
}
# Response item kinds that are inputs to the model (an assistant message is
# an output), or history Codex keeps beside them.
_INPUTS = {
    "message",
    "function_call_output",
    "custom_tool_call_output",
    "tool_search_output",
    "agent_message",
    "additional_tools",
    "compaction",
    "compaction_summary",
    "context_compaction",
    "ghost_snapshot",
}
LINE_TYPES = {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
# Says "not read" apart from a real line type (no line type has a space).
_UNREAD = "unread line"


def parse(lines: Iterable[RecordLine], *, name: str = "") -> Iterator[Parsed]:
    """The one session of a rollout file."""
    kept: list[dict[str, Any]] = []
    meta: dict[str, Any] | None = None
    first = 0
    models: list[tuple[str, str]] = []
    items: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    times = []
    unread: Counter[str] = Counter()
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
        elif kind == _UNREAD:
            count_unread(unread, value.get("type"))
        elif kind == "session_meta":
            meta = payload if meta is None else meta
        elif kind == "turn_context":
            models.extend(_model(payload))
        elif kind == "response_item":
            if jsonvalues.text(payload.get("type")) in _OUTPUTS | _INPUTS:
                items.append((payload, None))
            else:
                count_unread(unread, payload.get("type"), "response_item ")
        elif kind == "event_msg" and payload.get("type") == "token_count":
            items.append(({}, payload))
        elif kind == "event_msg" and payload.get("type") == "user_message":
            items.append(({"type": "user_message", **payload}, None))
    if not kept:
        return
    if meta is None or not _session_id(meta):
        yield LineError(first, "the rollout has no session_meta line with an id")
        return
    parsed = _session(first, meta, models, items, kept, times)
    if isinstance(parsed, RecordDraft) and unread:
        parsed.unread = dict(unread)
        parsed.notes.append(unread_note(unread))
    yield parsed


def _session_id(meta: dict[str, Any]) -> str:
    for key in ("id", "session_id"):
        if isinstance(value := meta.get(key), str) and value:
            return value
    return ""


def _model(context: dict[str, Any]) -> list[tuple[str, str]]:
    """A turn's model and effort: ``effort``, or (0.171) the collaboration
    mode's ``reasoning_effort``."""
    model = context.get("model")
    if not isinstance(model, str) or not model:
        return []
    effort = context.get("effort")
    if effort is None:
        mode = context.get("collaboration_mode")
        settings = mode.get("settings") if isinstance(mode, dict) else None
        effort = (
            settings.get("reasoning_effort") if isinstance(settings, dict) else None
        )
    return [(model, effort if isinstance(effort, str) else "")]


def _unwrap(
    value: dict[str, Any], *, legacy_meta: bool
) -> tuple[str | None, dict[str, Any]]:
    kind = value.get("type")
    payload = value.get("payload")
    if jsonvalues.text(kind) in LINE_TYPES and isinstance(payload, dict):
        return kind, payload
    if legacy_meta and "id" in value and "payload" not in value:
        return "session_meta", value
    if value.get("record_type") == "state":
        return "state", value
    if isinstance(kind, str) and "payload" not in value:
        return "response_item", value
    if isinstance(kind, str) and kind and kind not in LINE_TYPES:
        return _UNREAD, value
    return None, value


def _session(
    first: int,
    meta: dict[str, Any],
    models: list[tuple[str, str]],
    items: list[tuple[dict[str, Any], dict[str, Any] | None]],
    kept: list[dict[str, Any]],
    times: list,
) -> Parsed:
    session = _session_id(meta)
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
    # A rollout with no token counts (older CLIs wrote none) says nothing of
    # its tokens rather than zero.
    usage: dict[str, int] = {"turns": len(entries)}
    for key in (
        "input_tokens",
        "output_tokens",
        "cached_input_tokens",
        "reasoning_output_tokens",
    ):
        if key in totals:
            usage[key] = totals[key]
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
    assistant text.

    A call is the run of items the model produced; its usage is the first
    ``token_count`` after them, whatever came between (Codex writes a tool's
    output before the event that counts the call that asked for it). A
    later ``token_count`` with no new output repeats the last one.
    """
    calls: list[_Call] = []
    inputs: list[dict[str, Any]] = []
    output = ""
    for item, event in items:
        if event is not None:
            info = event.get("info")
            last = info.get("last_token_usage") if isinstance(info, dict) else None
            if calls and calls[-1].usage is None and isinstance(last, dict):
                calls[-1].usage = last
            continue
        kind = item.get("type")
        if kind == "user_message":
            continue
        if kind in _OUTPUTS or (kind == "message" and item.get("role") == "assistant"):
            if not calls or inputs or calls[-1].usage is not None:
                calls.append(_Call(inputs))
                inputs = []
            calls[-1].outputs.append(item)
            if kind == "message":
                output = block_text(item.get("content")) or output
        else:
            inputs.append(item)
    model = models[-1][0] if models else None
    return [call.entry(model) for call in calls], output


class _Call:
    """One model call read back from the rollout."""

    def __init__(self, inputs: list[dict[str, Any]]) -> None:
        self.inputs = inputs
        self.outputs: list[dict[str, Any]] = []
        self.usage: dict[str, Any] | None = None

    def entry(self, model: str | None) -> dict[str, Any]:
        usage = self.usage or {}
        return {
            "provider_kind": "openai",
            "method": "POST",
            "path": "/v1/responses",
            "request": {"model": model, "input": self.inputs},
            "request_is_delta": True,
            "status": 200,
            "stream": False,
            "response": {"object": "response", "model": model, "output": self.outputs},
            "model": model,
            "usage": {
                "input_tokens": count(usage.get("input_tokens")),
                "output_tokens": count(usage.get("output_tokens")),
            },
            "billed": True,
            "from_transcript": True,
        }


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
