"""Claude Code session files (``~/.claude/projects/<dir>/<session>.jsonl``).

Each line is one JSON object. ``user`` and ``assistant`` lines carry the
session (``sessionId``), the line's ``uuid`` and ``parentUuid``, a
``timestamp``, the working directory (``cwd``), the checked-out branch
(``gitBranch``) and the API ``message``; an assistant message's ``model`` and
``usage`` are the API's. A long answer is written as several lines sharing
one ``message.id``, each with one content block and the same usage: it counts
once. ``summary`` lines (a ``summary`` and the ``leafUuid`` it ends at) title
a session; a compaction writes a ``system`` line (``compact_boundary``) and a
user line with ``isCompactSummary``. Lines of other types are kept as they are.
Lines of no session that are not messages are left out: the CLI's backups of
the files it edits (``file-history-snapshot``) silently, any other type
counted by type (``RecordDraft.unread`` and one note).

A file may hold several sessions. A resumed session's file (named after the
new session) starts with the lines of the session it resumed, under that
session's id: those lines are its history, kept in its transcript, not a run
of their own here (their own file imports them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from replayhub.ingest.lines import RecordLine
from replayhub.ingest.transcripts.shapes import (
    LineError,
    Parsed,
    RecordDraft,
    Search,
    block_text,
    count,
    count_unread,
    first_line,
    iso,
    json_lines,
    moment,
    unread_note,
)
from replayhub.lib import jsonvalues

FORMAT = "claude-code"
# Assistant lines Claude Code makes up itself (an interrupted request).
SYNTHETIC = "<synthetic>"
# Line types that are a session's messages: without a sessionId, an error.
_MESSAGES = {"user", "assistant", "system"}
# Lines of no session the CLI writes beside the messages, known and not read:
# its backups of the files it edits.
_BESIDE = {"file-history-snapshot"}


def parse(lines: Iterable[RecordLine], *, name: str = "") -> Iterator[Parsed]:
    """The sessions of one file; ``name`` is the file's name (its stem is the
    session a resumed file continues)."""
    order: list[str] = []
    # Each line under its session until the file ends, as its bytes when
    # orjson reads them again as the line checked (see ``json_lines``):
    # (line, uuid, bytes or the object).
    sessions: dict[str, list[tuple[int, Any, bytes | dict[str, Any]]]] = {}
    summaries: list[tuple[int, dict[str, Any]]] = []
    # Lines of no session that are not messages, of types not known here,
    # counted by type.
    unread: Counter[str] = Counter()
    for item in json_lines(lines):
        if isinstance(item, LineError):
            yield item
            continue
        number, value, data = item
        kind = value.get("type")
        # Any JSON value: only a string is a type this reader knows.
        known = jsonvalues.text(kind)
        session = value.get("sessionId")
        if known == "summary" and not session:
            summaries.append((number, value))
            continue
        if (not isinstance(session, str) or not session) and known not in _MESSAGES:
            if known not in _BESIDE:
                count_unread(unread, kind)
            continue
        if not isinstance(session, str) or not session:
            yield LineError(number, "a session line without a sessionId")
            continue
        if session not in sessions:
            order.append(session)
            sessions[session] = []
        kept = value if data is None else data
        sessions[session].append((number, jsonvalues.text(value.get("uuid")), kept))
    stem = name.rsplit("/", 1)[-1].removesuffix(".jsonl")
    if stem in sessions and len(order) > 1:
        # A resumed session: every other session in the file is its history.
        history = [entry for sid in order if sid != stem for entry in sessions[sid]]
        groups = [(stem, sessions[stem], sorted(history, key=lambda e: e[0]))]
    else:
        groups = [(sid, sessions[sid], []) for sid in order]
    # Each summary line under the message it follows, so a file of many
    # sessions finds each one's summaries without reading all of them again.
    by_leaf: dict[object, list[tuple[int, dict[str, Any]]]] = {}
    for number, value in summaries:
        if isinstance(value.get("summary"), str):
            leaf = jsonvalues.text(value.get("leafUuid"))
            by_leaf.setdefault(leaf, []).append((number, value))
    for session, own, history in groups:
        uuids = {uuid for _, uuid, _ in own}
        mine = sorted(
            (entry for uuid in uuids for entry in by_leaf.get(uuid, ())),
            key=lambda entry: entry[0],
        )
        parsed = _session(
            session, _read(own), _read(history), [value for _, value in mine]
        )
        if isinstance(parsed, RecordDraft) and unread:
            # Said once, on the file's first session.
            parsed.unread, unread = dict(unread), Counter()
            parsed.notes.append(unread_note(parsed.unread))
        yield parsed


def _read(
    entries: list[tuple[int, Any, bytes | dict[str, Any]]],
) -> list[tuple[int, dict[str, Any]]]:
    """Kept lines as (line, object), their bytes read again."""
    return [
        (number, orjson.loads(kept) if isinstance(kept, bytes) else kept)
        for number, _, kept in entries
    ]


def _session(
    session: str,
    own: list[tuple[int, dict[str, Any]]],
    history: list[tuple[int, dict[str, Any]]],
    summaries: list[dict[str, Any]],
) -> Parsed:
    first = own[0][0]
    everything = sorted(history + own, key=lambda entry: entry[0])
    prompt = next(
        (text for _, value in everything if (text := _prompt_text(value))), None
    )
    if prompt is None:
        return LineError(
            first, f"session {session}: no user message to take the prompt from"
        )
    times = [t for _, value in own if (t := moment(value.get("timestamp")))]
    if not times:
        return LineError(
            first, f"session {session}: no line has a timestamp with a zone"
        )
    messages = _messages(own)
    usage, model, turns = _usage(messages)
    branch = next(
        (
            b
            for _, value in own
            if isinstance(b := value.get("gitBranch"), str) and b and b != "HEAD"
        ),
        "",
    )
    record: dict[str, Any] = {
        "external_id": session,
        "prompt": prompt,
        "started_at": iso(min(times)),
        "provider": "anthropic",
        "usage": {**usage, "turns": turns},
        "transcript": {
            "format": FORMAT,
            "lines": [value for _, value in everything] + summaries,
        },
        "tape": tape(own, history, messages),
    }
    if model:
        record["model"] = model
    if summaries:
        record["title"] = first_line(summaries[-1]["summary"], 500)
    if branch:
        record["original_branch"] = branch
    output = _output(messages)
    if output:
        record["output"] = output
    if history:
        record["resumed_from"] = sorted({value["sessionId"] for _, value in history})
    cwd = next((c for _, value in own if isinstance(c := value.get("cwd"), str)), "")
    if cwd:
        record["cwd"] = cwd
    record["surroundings"] = _surroundings(own)
    search = Search(
        branch=branch,
        start=min(times),
        end=max(times),
        find_base=True,
        find_original=True,
    )
    return RecordDraft(first, record, search)


def _surroundings(own: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    """What the agent saw of where it ran, as the record's ``surroundings``:
    the first working directory, branch (``HEAD``: detached) and version."""

    def first(key: str) -> str:
        found = (v for _, line in own if isinstance(v := line.get(key), str) and v)
        return next(found, "")

    found: dict[str, Any] = {"agent": {"name": "claude"}}
    if cwd := first("cwd"):
        found["cwd"] = cwd
    if branch := first("gitBranch"):
        found["branch"] = None if branch == "HEAD" else branch
    if version := first("version"):
        found["agent"]["version"] = version[:64]
    return found


def _prompt_text(value: dict[str, Any]) -> str:
    """The text of a line that is a person's request, else ""."""
    if value.get("type") != "user" or value.get("isSidechain"):
        return ""
    if value.get("isMeta") or value.get("isCompactSummary"):
        return ""
    message = value.get("message")
    if not isinstance(message, dict):
        return ""
    text = block_text(message.get("content"))
    return text if text.strip() else ""


def _messages(own: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The session's assistant messages, one per ``message.id`` (its lines'
    blocks joined, the last line's usage), in order."""
    found: dict[str, dict[str, Any]] = {}
    for _, value in own:
        message = value.get("message")
        if value.get("type") != "assistant" or not isinstance(message, dict):
            continue
        key = message.get("id")
        if not isinstance(key, str):
            key = f"line-{len(found)}"
        merged = found.get(key)
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        if merged is None:
            found[key] = {**message, "content": list(blocks)}
        else:
            merged["content"] += blocks
            if isinstance(message.get("usage"), dict):
                merged["usage"] = message["usage"]
            if message.get("stop_reason"):
                merged["stop_reason"] = message["stop_reason"]
    return list(found.values())


def _usage(messages: list[dict[str, Any]]) -> tuple[dict[str, int], str, int]:
    totals = {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    model = ""
    turns = 0
    for message in messages:
        if message.get("model") == SYNTHETIC:
            continue
        turns += 1
        if isinstance(message.get("model"), str):
            model = message["model"]
        usage = message.get("usage")
        if isinstance(usage, dict):
            for key in totals:
                totals[key] += count(usage.get(key))
    return totals, model, turns


def _output(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("model") == SYNTHETIC:
            continue
        text = block_text(message.get("content"))
        if text.strip():
            return text
    return ""


def tape(
    own: list[tuple[int, dict[str, Any]]],
    history: list[tuple[int, dict[str, Any]]],
    messages: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The session's model calls in the recorder's tape shape.

    The transcript keeps what the model answered, not each request whole, so
    a call's ``request.messages`` are the messages added since the call
    before it (``request_is_delta``); the conversation so far is the earlier
    entries' requests and responses in order. ``messages`` are
    :func:`_messages` of ``own``.
    """
    entries: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    by_id = {m["id"]: m for m in messages if isinstance(m.get("id"), str)}
    mine = {id(value) for _, value in own}
    done: set[str] = set()
    for _, value in sorted(history + own, key=lambda entry: entry[0]):
        message = value.get("message")
        if value.get("isSidechain") or not isinstance(message, dict):
            continue
        if value.get("type") == "user":
            pending.append({"role": "user", "content": message.get("content", "")})
            continue
        if value.get("type") != "assistant" or id(value) not in mine:
            if value.get("type") == "assistant":
                pending.append(
                    {"role": "assistant", "content": message.get("content", [])}
                )
            continue
        key = message.get("id")
        if not isinstance(key, str) or key in done or key not in by_id:
            continue
        done.add(key)
        answer = by_id[key]
        if answer.get("model") == SYNTHETIC:
            continue
        given = answer.get("usage")
        usage: dict[str, Any] = given if isinstance(given, dict) else {}
        entries.append(
            {
                "provider_kind": "anthropic",
                "method": "POST",
                "path": "/v1/messages",
                "request": {"model": answer.get("model"), "messages": pending},
                "request_is_delta": True,
                "status": 200,
                "stream": False,
                "response": {
                    "id": key,
                    "type": "message",
                    "role": "assistant",
                    "model": answer.get("model"),
                    "content": answer.get("content", []),
                    "stop_reason": answer.get("stop_reason"),
                    "usage": usage,
                },
                "model": answer.get("model"),
                "usage": {
                    "input_tokens": count(usage.get("input_tokens")),
                    "output_tokens": count(usage.get("output_tokens")),
                },
                "billed": True,
                "from_transcript": True,
            }
        )
        pending = []
    return entries
