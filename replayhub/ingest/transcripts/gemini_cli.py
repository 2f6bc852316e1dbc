"""Gemini CLI chat recordings
(``~/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl``).

Gemini CLI 0.61 appends one JSON object per line and reads the file back by
replaying them in order (older versions wrote ``session-*.json``, the
whole record pretty-printed: read whole, as one metadata line holding its
``messages``):

- a metadata line (``sessionId``, ``projectHash``: the SHA-256 of the
  project root's path, ``startTime``, ``lastUpdated``, ``kind``, sometimes
  ``directories`` and ``summary``), merged into the session's metadata;
- ``{"$set": {...}}`` merges its keys into the metadata; a ``messages`` list
  in it replaces every message so far (the CLI's ``<session_context>``
  message arrives that way);
- a message line (``id``, ``timestamp``, ``type``: ``user``, ``gemini``,
  ``info``, ``warning`` or ``error``, ``content``) is appended, or replaces
  in place the message with the same ``id``: a model message is written once
  with its ``tokens`` and ``model`` and again when its ``toolCalls`` (each
  with its ``result``) are added;
- ``{"$rewindTo": "<id>"}`` drops that message and every later one.

One session per file. The prompt is the first user message that is not the
CLI's own context, a slash command or a help request, in the conversation as
it stands at the end (a request rewound and edited is the edited one; a file
whose every request was rewound takes the first it held). Usage sums every
model message the file ever held, rewound ones included: those calls were
made. The file names no branch and no commit; the working directory is the
workspace directory (from ``directories`` or the session context's list)
whose hash is the ``projectHash``, so a path is only taken when the file
vouches for it.

A line of another shape, or a message of another type, is kept in the
transcript, counted by type (``RecordDraft.unread`` and one note) and not
read; it is never a line error.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from replayhub.ingest.lines import RecordLine
from replayhub.ingest.transcripts.documents import document_or_refusal
from replayhub.ingest.transcripts.shapes import (
    LineError,
    Parsed,
    RecordDraft,
    Search,
    count,
    count_unread,
    first_line,
    iso,
    json_objects,
    moment,
    shown,
    unread_note,
)
from replayhub.ingest.transcripts.turns import (
    ASSISTANT,
    REASONING,
    SYSTEM,
    TOOL,
    USER,
    Call,
    Turn,
)

FORMAT = "gemini-cli"
MESSAGE_TYPES = {"user", "gemini", "info", "warning", "error"}
# User messages the CLI's session list does not take as the first request:
# its own context, slash commands and help requests.
_NOT_A_REQUEST = ("/", "?", "<session_context>", "<hook_context>")
_CONTEXT = ("<session_context>", "<hook_context>")
_WORKSPACE = "- **Workspace Directories:**"
# Line and message types shown as they are in the note.
_NAME = re.compile(r"[$a-zA-Z0-9_.:-]{1,40}")
# The session context lists a handful of directories; more are not read.
_DIRECTORIES = 32
# Token counts summed into the record's usage, by the file's key.
_TOKENS = {
    "input": "input_tokens",
    "output": "output_tokens",
    "cached": "cached_input_tokens",
    "thoughts": "reasoning_output_tokens",
    "tool": "tool_input_tokens",
}


@dataclass
class _Session:
    """The file replayed as the CLI replays it."""

    meta: dict[str, Any] = field(default_factory=dict)
    # The conversation as it stands at the end, by message id, in order.
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Every message the file held, its last version, in first-seen order.
    seen: dict[str, dict[str, Any]] = field(default_factory=dict)
    times: list[datetime] = field(default_factory=list)
    unread: Counter[str] = field(default_factory=Counter)

    def apply(self, value: dict[str, Any]) -> None:
        """One line, read in the order the CLI reads it."""
        rewind, changes = value.get("$rewindTo"), value.get("$set")
        if isinstance(rewind, str):
            self.rewind(rewind)
        elif isinstance(value.get("id"), str):
            self.add(value)
        elif isinstance(changes, dict):
            if isinstance(changes.get("messages"), list):
                self.messages = {}
                for message in changes["messages"]:
                    if isinstance(message, dict) and isinstance(message.get("id"), str):
                        self.add(message)
            self.merge(changes)
        elif isinstance(value.get("sessionId"), str) and isinstance(
            value.get("projectHash"), str
        ):
            listed = value.get("messages")
            for message in listed if isinstance(listed, list) else []:
                if isinstance(message, dict) and isinstance(message.get("id"), str):
                    self.add(message)
            self.merge(value)
        else:
            self.skip(value.get("type") if "type" in value else next(iter(value), ""))

    def add(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if not isinstance(kind, str) or kind not in MESSAGE_TYPES:
            self.skip(kind, "message ")
            return
        self.messages[message["id"]] = message
        self.seen[message["id"]] = message
        if (t := moment(message.get("timestamp"))) is not None:
            self.times.append(t)

    def rewind(self, to: str) -> None:
        ids = list(self.messages)
        kept = ids[: ids.index(to)] if to in ids else []
        self.messages = {key: self.messages[key] for key in kept}

    def merge(self, changes: dict[str, Any]) -> None:
        self.meta.update({k: v for k, v in changes.items() if k != "messages"})
        for key in ("startTime", "lastUpdated"):
            if (t := moment(changes.get(key))) is not None:
                self.times.append(t)

    def skip(self, kind: Any, prefix: str = "") -> None:
        """Count one line (or message) of type ``kind`` (an empty one shown
        as ``{}``)."""
        named = "{}" if kind == "" else kind
        count_unread(self.unread, named, prefix, names=_NAME)


def _replay(values: Iterable[Any]) -> _Session:
    session = _Session()
    for value in values:
        if isinstance(value, dict):
            session.apply(value)
    return session


def parse(
    lines: Iterable[RecordLine], *, name: str = "", limit: int | None = None
) -> Iterator[Parsed]:
    """The one session of a chat recording: a JSONL log, or (older versions) a
    ``.json`` file of the whole record, pretty-printed, read whole within
    ``limit`` bytes."""
    lines = iter(lines)
    head = next(lines, None)
    if head is None:
        return
    lines = itertools.chain([head], lines)
    if limit is not None and head[1] is not None and head[1].strip() == b"{":
        found = yield from document_or_refusal(lines, limit, what="the chat recording")
        if found is None:
            return
        _, whole = found
        if not isinstance(whole, dict):
            yield LineError(1, "a chat recording must be a JSON object")
            return
        yield _session(1, [whole], _replay([whole]))
        return
    kept: list[dict[str, Any]] = []
    first = 0
    for item in json_objects(lines):
        if isinstance(item, LineError):
            yield item
            continue
        number, value = item
        first = first or number
        kept.append(value)
    if not kept:
        return
    yield _session(first, kept, _replay(kept))


def _session(first: int, kept: list[dict[str, Any]], session: _Session) -> Parsed:
    meta = session.meta
    external = meta.get("sessionId")
    if not isinstance(external, str) or not external:
        return LineError(first, "no session metadata line with a sessionId")
    prompt = next(
        (
            text
            for messages in (session.messages, session.seen)
            for message in messages.values()
            if message["type"] == "user"
            and (text := content_text(message.get("content"))).strip()
            and not text.strip().startswith(_NOT_A_REQUEST)
        ),
        "",
    )
    if not prompt:
        return LineError(
            first, f"session {shown(external)}: no user message to take the prompt from"
        )
    started = moment(meta.get("startTime")) or min(session.times, default=None)
    if started is None:
        return LineError(first, f"session {shown(external)}: no timestamp with a zone")
    record: dict[str, Any] = {
        "external_id": external,
        "prompt": prompt,
        "started_at": iso(started),
        "provider": "gemini",
        "usage": _usage(session.seen.values()),
        "transcript": {"format": FORMAT, "lines": kept},
    }
    models = [
        m["model"]
        for m in session.seen.values()
        if m["type"] == "gemini" and isinstance(m.get("model"), str) and m["model"]
    ]
    if models:
        record["model"] = models[-1]
    output = next(
        (
            text
            for m in reversed(session.messages.values())
            if m["type"] == "gemini"
            and (text := content_text(m.get("content"))).strip()
        ),
        "",
    )
    if output:
        record["output"] = output
    if isinstance(summary := meta.get("summary"), str) and summary.strip():
        record["title"] = first_line(summary, 500)
    surroundings: dict[str, Any] = {"agent": {"name": "gemini"}}
    if cwd := _project_root(session):
        record["cwd"] = surroundings["cwd"] = cwd
    record["surroundings"] = surroundings
    draft = RecordDraft(first, record)
    draft.search = Search(
        start=started,
        end=max([started, *session.times]),
        find_base=True,
        find_original=True,
    )
    if session.unread:
        draft.unread = dict(session.unread)
        draft.notes.append(unread_note(session.unread))
    return draft


def content_text(content: Any) -> str:
    """The text of a message's ``content``: a string, or its text parts
    (thought parts left out), joined as the CLI joins them."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        part["text"]
        for part in content
        if isinstance(part, dict)
        and isinstance(part.get("text"), str)
        and part.get("thought") is not True
    )


def _usage(messages: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Token totals over the model messages; each message with ``tokens`` is
    one model call (``turns``)."""
    usage = dict.fromkeys(_TOKENS.values(), 0)
    turns = 0
    for message in messages:
        tokens = message.get("tokens")
        if message["type"] != "gemini" or not isinstance(tokens, dict):
            continue
        turns += 1
        for key, name in _TOKENS.items():
            usage[name] += count(tokens.get(key))
    return {**usage, "turns": turns}


def _project_root(session: _Session) -> str:
    """The workspace directory whose SHA-256 is the file's ``projectHash``
    (the CLI names its project by that hash), else ""."""
    wanted = session.meta.get("projectHash")
    if not isinstance(wanted, str):
        return ""
    listed = session.meta.get("directories")
    candidates = (
        [d for d in listed if isinstance(d, str)] if isinstance(listed, list) else []
    )
    for message in session.seen.values():
        text = content_text(message.get("content"))
        if message["type"] == "user" and text.lstrip().startswith(_CONTEXT):
            candidates += _workspace_directories(text)
    for candidate in candidates[:_DIRECTORIES]:
        if hashlib.sha256(candidate.encode("utf-8", "replace")).hexdigest() == wanted:
            return candidate
    return ""


def _workspace_directories(text: str) -> list[str]:
    """The ``  - <dir>`` lines under the session context's workspace heading."""
    found: list[str] = []
    lines = text.splitlines()
    if _WORKSPACE not in lines:
        return found
    for line in lines[lines.index(_WORKSPACE) + 1 :]:
        if not line.startswith("  - ") or len(found) >= _DIRECTORIES:
            break
        found.append(line[4:])
    return found


# The stored transcript as conversation turns ---------------------------------


def turns(transcript: dict[str, Any]) -> list[Turn]:
    """The conversation as it stood at the end of the session: the person's
    messages, the model's thoughts, answers and tool calls (each with the
    result the CLI recorded on it), and the CLI's notices."""
    lines = transcript.get("lines")
    session = _replay(lines if isinstance(lines, list) else [])
    found: list[Turn] = []
    answered: set[str] = set()
    for message in session.messages.values():
        kind, content = message["type"], message.get("content")
        text = content_text(content)
        if kind == "user":
            for call_id, result in _responses(content):
                if call_id not in answered:
                    found.append(
                        Turn(
                            TOOL,
                            result,
                            note=f"result of {call_id}" if call_id else "",
                        )
                    )
            note = "context the CLI added" if text.lstrip().startswith(_CONTEXT) else ""
            found.append(Turn(USER, text, note=note))
        elif kind == "gemini":
            thoughts = message.get("thoughts")
            for thought in thoughts if isinstance(thoughts, list) else []:
                if isinstance(thought, dict):
                    said = [thought.get("subject"), thought.get("description")]
                    words = "\n\n".join(s for s in said if isinstance(s, str) and s)
                    found.append(Turn(REASONING, words))
            calls = _calls(message.get("toolCalls"), Call)
            answered.update(call.id for call in calls if call.result is not None)
            found.append(Turn(ASSISTANT, text, calls=calls))
        else:
            found.append(Turn(SYSTEM, text, note=kind))
    return [turn for turn in found if turn.text.strip() or turn.calls]


def _calls(given: Any, make: type[Call]) -> list[Call]:
    calls = []
    for call in given if isinstance(given, list) else []:
        if not isinstance(call, dict):
            continue
        results = [text for _, text in _responses(call.get("result"))]
        calls.append(
            make(
                name=str(call.get("name") or "?"),
                input=json.dumps(call.get("args"), indent=2, ensure_ascii=False),
                id=str(call.get("id") or ""),
                result="\n".join(results) if results else None,
                error=call.get("status") == "error",
            )
        )
    return calls


def _responses(parts: Any) -> list[tuple[str, str]]:
    """The ``functionResponse`` parts of a message: (call id, result text)."""
    found = []
    for part in parts if isinstance(parts, list) else []:
        response = part.get("functionResponse") if isinstance(part, dict) else None
        if not isinstance(response, dict):
            continue
        body = response.get("response")
        if isinstance(body, dict) and isinstance(body.get("output"), str):
            text = body["output"]
        elif isinstance(body, dict) and isinstance(body.get("error"), str):
            text = body["error"]
        else:
            text = json.dumps(body, indent=2, ensure_ascii=False)
        found.append((str(response.get("id") or ""), text))
    return found
