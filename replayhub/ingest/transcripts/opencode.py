"""OpenCode sessions, as ``opencode export <sessionID>`` writes them.

OpenCode 1.18 keeps its sessions in a SQLite database under
``~/.local/share/opencode``; ``opencode export`` prints one session as one
JSON document (pretty-printed, the progress line on standard error):

- ``info``: the session: ``id`` (``ses_…``), ``projectID`` (the repository's
  first commit), ``directory`` (the working directory), ``title``,
  ``version`` (OpenCode's), ``model`` (``id``, ``providerID``), ``cost``,
  ``tokens`` and ``time`` (``created``, ``updated``: milliseconds since the
  epoch);
- ``messages``: each an ``info`` (``id``, ``role`` ``user`` or
  ``assistant``, ``time``; a user message names the ``model`` it asked for,
  an assistant message its ``providerID``, ``modelID``, ``path.cwd``,
  ``tokens``, ``cost``, ``finish`` and any ``error``) and its ``parts``.

A part is ``text`` (``synthetic`` when OpenCode wrote it), ``reasoning``,
``tool`` (``tool``, ``callID``, ``state``: ``status`` pending, running,
completed or error, ``input``, ``output`` or ``error``), ``step-start``,
``step-finish`` (one model call: ``tokens`` — ``input`` without the cache,
``output``, ``reasoning``, ``cache.read``, ``cache.write`` — and ``cost``),
``file``, ``snapshot``, ``patch``, ``agent``, ``subtask``, ``retry`` or
``compaction``. A message of another role, or a part of another type, is kept
in the transcript, counted by type (``RecordDraft.unread`` and one note) and
not read; it is never a line error.

Older versions kept a session as JSON files under ``storage/`` instead (its
info, each message and each part apart); a session's file imported from there
is joined into the same document first (:mod:`opencode_storage`).

One session a file. The prompt is the first user text OpenCode did not write
itself. Usage sums the step-finish parts (an assistant message with none
counts its own totals). The export names no branch and no commit: the base
and the original are looked for from the session's times.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from replayhub.ingest.lines import RecordLine
from replayhub.ingest.transcripts.documents import dig, document_or_refusal
from replayhub.ingest.transcripts.shapes import (
    LineError,
    Parsed,
    RecordDraft,
    Search,
    cost_usd,
    count,
    count_unread,
    first_line,
    iso,
    shown,
    unread_note,
)
from replayhub.ingest.transcripts.turns import (
    ASSISTANT,
    COMPACTION,
    REASONING,
    SYSTEM,
    USER,
    Call,
    Turn,
)

FORMAT = "opencode"
ROLES = {"user", "assistant"}
PART_TYPES = {
    "text",
    "reasoning",
    "tool",
    "step-start",
    "step-finish",
    "file",
    "snapshot",
    "patch",
    "agent",
    "subtask",
    "retry",
    "compaction",
}
# Part and message types shown as they are in the note.
_NAME = re.compile(r"[a-zA-Z0-9_.:-]{1,40}")
# Milliseconds since the epoch a time may be: 2000 to 2200.
_EARLIEST, _LATEST = 946_684_800_000, 7_258_118_400_000
# The step-finish token keys, by the usage key each is summed into.
_TOKENS = {
    "input_tokens": ("input",),
    "output_tokens": ("output",),
    "reasoning_output_tokens": ("reasoning",),
    "cache_read_input_tokens": ("cache", "read"),
    "cache_creation_input_tokens": ("cache", "write"),
}


def _not_an_export(value: Any) -> str:
    """Why a document is not an export, naming OpenCode's own storage files
    (``storage/session/…``, ``message/…``, ``part/…``): they hold a session
    in pieces, which a session's file imported from its storage folder joins
    (:mod:`opencode_storage`)."""
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        if "projectID" in value:
            piece, session = "the info", value["id"]
        elif "role" in value:
            piece, session = "a message", value.get("sessionID")
        elif "messageID" in value:
            piece, session = "a message part", value.get("sessionID")
        else:
            piece, session = "", None
        if piece and isinstance(session, str) and session:
            named = shown(session, 40)
            if piece == "the info":
                # Outside a storage folder: its messages are not beside it.
                return (
                    f"an OpenCode storage file (the info of session {named}) away "
                    "from its storage folder: import it from there, or what "
                    "`opencode export <session id>` prints"
                )
            return (
                f"an OpenCode storage file ({piece} of session {named}): import "
                "its session's file (storage/session/<project>/<session id>.json), "
                "which brings its messages and parts"
            )
    return "not an OpenCode export: no session info with an id"


def parse(
    lines: Iterable[RecordLine], *, name: str = "", limit: int
) -> Iterator[Parsed]:
    """The one session of an export."""
    found = yield from document_or_refusal(lines, limit, what="the OpenCode export")
    if found is None:
        return
    _, value = found
    info = value.get("info") if isinstance(value, dict) else None
    if not isinstance(info, dict) or not _text(info.get("id")).strip():
        yield LineError(1, _not_an_export(value))
        return
    external = info["id"]
    unread: Counter[str] = Counter()
    messages = _messages(value.get("messages"), unread)
    prompt = next(
        (text for m in messages if m.role == "user" and (text := m.text()).strip()),
        "",
    )
    if not prompt:
        yield LineError(
            1, f"session {shown(external)}: no user message to take the prompt from"
        )
        return
    record: dict[str, Any] = {
        "external_id": external,
        "prompt": prompt,
        "usage": _usage(messages),
        "transcript": {"format": FORMAT, "document": value},
    }
    provider, model = _model(info, messages)
    if provider:
        record["provider"] = provider[:100]
    if model:
        record["model"] = model
    output = next(
        (t for m in reversed(messages) if m.role == "assistant" and (t := m.text())),
        "",
    )
    if output:
        record["output"] = output
    title = info.get("title")
    record["title"] = first_line(title if isinstance(title, str) else "", 500)
    if not record["title"]:
        record["title"] = first_line(prompt)
    record["surroundings"] = _surroundings(info, messages)
    if "cwd" in record["surroundings"]:
        record["cwd"] = record["surroundings"]["cwd"]
    draft = RecordDraft(1, record)
    _times(draft, info, messages)
    if unread:
        draft.unread = dict(unread)
        draft.notes.append(unread_note(unread, "item"))
    yield draft


class _Message:
    """One message of the export: its info and its parts (dicts only)."""

    def __init__(self, info: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        self.info = info
        self.role = info.get("role")
        self.parts = parts

    def text(self) -> str:
        """Its text parts OpenCode did not write itself, joined."""
        return "\n".join(
            part["text"]
            for part in self.parts
            if part.get("type") == "text"
            and isinstance(part.get("text"), str)
            and part.get("synthetic") is not True
            and part.get("ignored") is not True
        ).strip()


def _messages(given: Any, unread: Counter[str]) -> list[_Message]:
    found = []
    for item in given if isinstance(given, list) else []:
        info = item.get("info") if isinstance(item, dict) else None
        if not isinstance(info, dict):
            count_unread(unread, "without-info", "message ", names=_NAME)
            continue
        role = info.get("role")
        if not isinstance(role, str) or role not in ROLES:
            count_unread(unread, info.get("role"), "message ", names=_NAME)
            continue
        parts = item.get("parts")
        kept = []
        for part in parts if isinstance(parts, list) else []:
            kind = part.get("type") if isinstance(part, dict) else None
            if isinstance(kind, str) and kind in PART_TYPES:
                kept.append(part)
            else:
                count_unread(unread, kind, "part ", names=_NAME)
        found.append(_Message(info, kept))
    return found


def _usage(messages: list[_Message]) -> dict[str, Any]:
    """Token totals and cost over the model calls: each step-finish part is
    one call (``turns``); an assistant message with none counts its own."""
    usage: dict[str, Any] = dict.fromkeys(_TOKENS, 0)
    turns = 0
    costs: list[float] = []
    for message in messages:
        if message.role != "assistant":
            continue
        steps = [p for p in message.parts if p.get("type") == "step-finish"]
        if not steps and isinstance(message.info.get("tokens"), dict):
            steps = [message.info]
        for step in steps:
            turns += 1
            tokens = step.get("tokens")
            for key, path in _TOKENS.items():
                usage[key] += count(dig(tokens, *path))
            if (cost := cost_usd(step.get("cost"))) is not None:
                costs.append(float(cost))
    usage["turns"] = turns
    if costs:
        usage["cost_usd"] = sum(costs)
    return usage


def _model(info: dict[str, Any], messages: list[_Message]) -> tuple[str, str]:
    """The provider and the model of the last answer, else the ones the
    session or its first request names."""
    for message in reversed(messages):
        provider, model = message.info.get("providerID"), message.info.get("modelID")
        if message.role == "assistant" and isinstance(model, str) and model:
            return (provider if isinstance(provider, str) else ""), model
    for provider, model in [
        (dig(info, "model", "providerID"), dig(info, "model", "id")),
        *(
            (dig(m.info, "model", "providerID"), dig(m.info, "model", "modelID"))
            for m in messages
        ),
    ]:
        if isinstance(model, str) and model:
            return (provider if isinstance(provider, str) else ""), model
    return "", ""


def _surroundings(info: dict[str, Any], messages: list[_Message]) -> dict[str, Any]:
    found: dict[str, Any] = {"agent": {"name": "opencode"}}
    version = info.get("version")
    if isinstance(version, str) and version:
        found["agent"]["version"] = version[:64]
    cwds = [info.get("directory")] + [dig(m.info, "path", "cwd") for m in messages]
    cwd = next((c for c in cwds if isinstance(c, str) and c.startswith("/")), None)
    if cwd:
        found["cwd"] = cwd
    return found


def _moment(value: Any) -> datetime | None:
    """A time in milliseconds since the epoch, within reason, else None."""
    if type(value) is not int or not _EARLIEST <= value <= _LATEST:
        return None
    return datetime.fromtimestamp(value / 1000, UTC)


def _times(draft: RecordDraft, info: dict[str, Any], messages: list[_Message]) -> None:
    """``started_at`` from the session's creation (else its first message),
    and the search for the base and the original over the session's span."""
    times = [
        t
        for m in messages
        for key in ("created", "completed")
        if (t := _moment(dig(m.info, "time", key)))
    ]
    started = _moment(dig(info, "time", "created")) or min(times, default=None)
    if started is None:
        draft.notes.append(
            "the export records no times: the run has no start time of its own"
        )
        draft.search.time_from_base = True
        return
    ended = _moment(dig(info, "time", "updated"))
    draft.record["started_at"] = iso(started)
    draft.search = Search(
        start=started,
        end=max([started, *times, *([ended] if ended else [])]),
        find_base=True,
        find_original=True,
    )


# The stored export as conversation turns -------------------------------------


def turns(transcript: dict[str, Any]) -> list[Turn]:
    """The messages in order: what the person asked (and what OpenCode added
    to it), the model's reasoning, and each model call's text with the tool
    calls it made, each with the output or error its state holds."""
    document = transcript.get("document")
    given = document.get("messages") if isinstance(document, dict) else None
    found: list[Turn] = []
    for message in _messages(given, Counter()):
        if message.role == "user":
            found.extend(_user_turns(message))
            continue
        turn = Turn(ASSISTANT)
        for part in message.parts:
            kind = part.get("type")
            if kind == "step-start" and (turn.text or turn.calls):
                found.append(turn)
                turn = Turn(ASSISTANT)
            elif kind == "reasoning" and isinstance(part.get("text"), str):
                found.append(Turn(REASONING, part["text"]))
            elif kind == "text" and isinstance(part.get("text"), str):
                turn.text = "\n".join(t for t in (turn.text, part["text"]) if t)
            elif kind == "tool":
                turn.calls.append(_call(part))
            elif kind == "compaction":
                found.append(Turn(COMPACTION, note="compacted"))
            elif kind == "subtask":
                found.append(Turn(SYSTEM, _text(part.get("prompt")), note="subtask"))
        found.append(turn)
        error = message.info.get("error")
        if isinstance(error, dict):
            said = dig(error, "data", "message")
            found.append(
                Turn(SYSTEM, _text(said) or _text(error.get("name")), note="error")
            )
    return [t for t in found if t.text.strip() or t.calls or t.note]


def _user_turns(message: _Message) -> list[Turn]:
    found = [Turn(USER, message.text())]
    for part in message.parts:
        if part.get("type") == "text" and part.get("synthetic") is True:
            found.append(
                Turn(SYSTEM, _text(part.get("text")), note="added by OpenCode")
            )
        elif part.get("type") == "file":
            name = _text(part.get("filename")) or _text(part.get("url"))
            found.append(Turn(SYSTEM, name, note="file attached"))
        elif part.get("type") == "compaction":
            found.append(Turn(COMPACTION, note="compacted"))
    return found


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _call(part: dict[str, Any]) -> Call:
    state = part.get("state")
    state = state if isinstance(state, dict) else {}
    status = state.get("status")
    if status == "completed":
        result: str | None = _result(state.get("output"))
    elif status == "error":
        result = _result(state.get("error"))
    else:
        result = None
    return Call(
        name=_text(part.get("tool")) or "?",
        input=json.dumps(state.get("input"), indent=2, ensure_ascii=False),
        id=_text(part.get("callID")),
        result=result,
        error=status == "error",
    )


def _result(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)
