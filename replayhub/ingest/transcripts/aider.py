"""Aider's chat history (``.aider.chat.history.md``), one run per chat session.

Aider appends to the file as it goes: each session opens with
``# aider chat started at YYYY-MM-DD HH:MM:SS`` (local time, no zone), the
person's messages are lines starting ``#### ``, what Aider prints (its
version and model, token counts, commits, command output) are lines starting
``> ``, and everything else is the model's answer. Read here from those lines:
the model (``> Model: NAME with … edit format``, ``> Main model: …``, older
versions' ``> Models: …``), the token counts and cost (``> Tokens: 12k
sent, 1.1k received. Cost: $0.05 message, …``: Aider rounds them, so the
usage says ``approximate``; with cache figures the cost is on the next line,
unquoted), and the commits Aider made (``> Commit 1a2b3c4 message``).
In-chat commands (``/add``, ``/run``, ``!ls``: Aider runs them itself) are
not requests; ``/ask``, ``/code`` and ``/architect`` are, without their
name.

A session without a request (Aider started and quit) is not a run and is
left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from replayhub.ingest.lines import RecordLine
from replayhub.ingest.transcripts.shapes import (
    LineError,
    Parsed,
    RecordDraft,
    Search,
    iso,
)

FORMAT = "aider"
HEADER = re.compile(r"# aider chat started at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s*")
_MODEL = re.compile(r"> (?:Main model|Models?): (\S+)")
_TOKENS = re.compile(
    r"> Tokens: ([\d.]+)(k?) sent(?:, [^,]*?cache[^,]*)*, ([\d.]+)(k?) received"
)
_COST = re.compile(r"Cost: \$([\d.]+) message")
# In-chat commands that carry a request after their name; any other command
# (``/add``, ``/run``, ``/exit`` ...) is not a request to the model.
_ASKING = re.compile(r"/(?:ask|code|architect)\s+(\S.*)", re.DOTALL)
_COMMIT = re.compile(r"> Commit ([0-9a-f]{7,40}) ")
# Aider marks its commits: "(aider)" after the author's name, or an "aider: "
# prefix on the message in older versions.
MARKERS = ("(aider)", "aider:")


def parse(lines: Iterable[RecordLine], *, name: str = "") -> Iterator[Parsed]:
    session: list[tuple[int, str]] = []
    for number, data, _ in lines:
        if data is None:
            yield LineError(number, "the line is longer than the record size limit")
            continue
        text = data.decode("utf-8", "replace").rstrip("\r")
        if HEADER.fullmatch(text):
            if session:
                yield from _session(session, next_start=text)
            session = []
        session.append((number, text))
    if session:
        yield from _session(session, next_start=None)


def _session(
    lines: list[tuple[int, str]], *, next_start: str | None
) -> Iterator[Parsed]:
    number, header = lines[0]
    matched = HEADER.fullmatch(header)
    if matched is None:
        # Text before the first header: nothing to import from it.
        if any(text.startswith("#### ") for _, text in lines):
            yield LineError(number, "requests before the first session header")
        return
    started = datetime.fromisoformat(matched.group(1)).replace(tzinfo=UTC)
    requests: list[str] = []
    current: list[str] = []
    answer: list[str] = []
    model = ""
    sent = received = 0
    cost = 0.0
    commits: list[str] = []
    for _, text in lines[1:]:
        if text.startswith("#### "):
            # Aider ends each request line with a Markdown line break.
            current.append(text[5:].removesuffix("  "))
            continue
        if current:
            requests.append("\n".join(current))
            current = []
            answer = []
        if (found := _MODEL.match(text)) is not None:
            model = found.group(1)
        elif (found := _TOKENS.match(text)) is not None:
            sent += _tokens(found.group(1), found.group(2))
            received += _tokens(found.group(3), found.group(4))
            if (money := _COST.search(text)) is not None:
                cost += float(money.group(1))
        elif text.startswith("Cost: $") and (money := _COST.match(text)):
            # The cost on a line of its own: a report with cache figures.
            cost += float(money.group(1))
        elif (found := _COMMIT.match(text)) is not None:
            commits.append(found.group(1))
        elif not text.startswith(">") and requests:
            answer.append(text)
    if current:
        requests.append("\n".join(current))
    requests = [r for given in requests if (r := _request(given))]
    if not requests:
        return
    usage: dict[str, Any] = {
        "input_tokens": sent,
        "output_tokens": received,
        "turns": len(requests),
        "approximate": True,
    }
    if cost:
        usage["cost_usd"] = round(cost, 6)
    record: dict[str, Any] = {
        "external_id": f"aider-{started.strftime('%Y%m%dT%H%M%S')}",
        "prompt": requests[0],
        "usage": usage,
        "transcript": {"format": FORMAT, "text": "\n".join(t for _, t in lines)},
    }
    if model:
        record["model"] = model
    output = "\n".join(answer).strip()
    if output:
        record["output"] = output
    draft = RecordDraft(number, record)
    draft.infer(
        "started_at",
        iso(started),
        "the chat history gives local time without a zone; read as UTC",
    )
    draft.search = Search(start=started, commits=commits, markers=MARKERS)
    draft.notes.append("token counts and cost are Aider's rounded figures")
    if not commits:
        draft.notes.append(
            "the session names no commit Aider made: the run has no original commit"
        )
    yield draft


def _request(text: str) -> str:
    """A request to the model: the text, or what follows a command that asks
    (``/ask …``, ``/code …``); "" for any other in-chat command."""
    if not text.startswith(("/", "!")):
        return text
    asking = _ASKING.match(text)
    return asking.group(1) if asking else ""


def _tokens(value: str, thousands: str) -> int:
    return round(float(value) * (1000 if thousands else 1))
