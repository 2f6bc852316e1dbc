"""What every transcript format reads into: drafts of native records, line
problems, and the few helpers the formats share. No Django, no git."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from replayhub.ingest.lines import RecordLine
from replayhub.ingest.native import RecordError, parse_line_fast

# Distinct unread types named in a note; more are counted under "other".
UNREAD_NAMES = 10
# A line type shown as it is (lower case, as most agents name theirs).
TYPE_NAME = re.compile(r"[a-z0-9_.:-]{1,40}")


@dataclass
class LineError:
    """A line (or a whole file, line 0) that does not fit its format."""

    line: int
    error: str


@dataclass
class Search:
    """What the repository is asked when the transcript does not name a commit.

    ``branch`` and the session's time span find a base (the branch's last
    commit before ``start``) and an original (the branch's last commit by
    ``end`` whose message or author holds one of ``markers``). Whatever is
    found that way is recorded as inferred, never as read.
    """

    branch: str = ""
    start: datetime | None = None
    end: datetime | None = None
    markers: tuple[str, ...] = ()
    # Commits the transcript itself names (Aider's "Commit abc1234" lines).
    commits: list[str] = field(default_factory=list)
    # A patch to apply at the base to make the original commit, and who for.
    patch: str | None = None
    patch_label: str = ""
    # Whether the base should be looked up at all (not when it is recorded).
    find_base: bool = False
    find_original: bool = False
    # The record has no time and there is no file time to use (an upload, a
    # request body): the base commit's date is taken.
    time_from_base: bool = False


@dataclass
class RecordDraft:
    """A native record made from a transcript, and what is left to find.

    ``record`` is a native run record (``docs/formats.md``) without a
    project; ``line`` is the line it is reported under (the session's first).
    ``inferred`` names each field that was worked out rather than read, and
    how; the importer stores it in the record's ``inferred`` key, and
    preflight makes every such field a provenance warning and the base never
    trusted.
    """

    line: int
    record: dict[str, Any]
    search: Search = field(default_factory=Search)
    inferred: dict[str, str] = field(default_factory=dict)
    # What could not be found, said as provenance warnings too.
    notes: list[str] = field(default_factory=list)
    # Lines (or items) of types the reader does not know, by type: a newer
    # agent's additions, skipped and counted, never line errors.
    unread: dict[str, int] = field(default_factory=dict)
    # The patch the original is, and the tree it makes at the base, once
    # it applied there (``repository.fill``): stored with the run.
    applied: tuple[str, str] | None = None

    def infer(self, name: str, value: Any, how: str) -> None:
        self.record[name] = value
        self.inferred[name] = how


Parsed = RecordDraft | LineError


def json_objects(lines: Iterable[RecordLine]) -> Iterator[tuple[int, Any] | LineError]:
    """Each non-blank line parsed as JSON, or the reason it is not JSON."""
    for item in json_lines(lines):
        yield item if isinstance(item, LineError) else (item[0], item[1])


def json_lines(
    lines: Iterable[RecordLine],
) -> Iterator[tuple[int, dict[str, Any], bytes | None] | LineError]:
    """:func:`json_objects`, each object with its line's bytes when
    ``orjson.loads`` reads them as the same object (None when only the strict
    parser read it right). A reader holding a large file's lines until its
    end keeps the bytes, which the garbage collector never walks, rather than
    the objects, whose walks cost as much again as the parse."""
    for number, data, terminated in lines:
        if data is None:
            yield LineError(number, "the line is longer than the record size limit")
            continue
        if not data.strip():
            continue
        try:
            value, fast = parse_line_fast(data, terminated=terminated)
        except RecordError as error:
            yield LineError(number, str(error))
            continue
        if not isinstance(value, dict):
            yield LineError(number, "a transcript line must be a JSON object")
            continue
        yield number, value, data if fast else None


def moment(value: Any) -> datetime | None:
    """An ISO 8601 time with a zone (a ``Z`` suffix included), else None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed


def iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def first_line(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def block_text(content: Any) -> str:
    """The text of a message's content: a string, or the text of its blocks."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, dict):
            text = block.get("text")
            if isinstance(text, str) and block.get("type") in (
                "text",
                "input_text",
                "output_text",
                None,
            ):
                parts.append(text)
        elif isinstance(block, str):
            parts.append(block)
    return "\n".join(parts)


def count(value: Any) -> int:
    """A token count from a transcript: a whole number, anything else 0."""
    return value if type(value) is int and value >= 0 else 0


def cost_usd(value: Any) -> float | None:
    """A cost from a transcript, as it is written: a number not below zero,
    else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def count_unread(
    unread: Counter[str],
    kind: Any,
    prefix: str = "",
    *,
    names: re.Pattern[str] = TYPE_NAME,
) -> None:
    """Count one line (or item) of type ``kind``, named safely: a file can
    hold any number of made-up types, so only the first few are named, and
    a type ``names`` does not match whole is shown escaped."""
    name = prefix + (
        kind if isinstance(kind, str) and names.fullmatch(kind) else shown(kind, 40)
    )
    if name not in unread and len(unread) >= UNREAD_NAMES:
        name = "other"
    unread[name] += 1


def unread_note(unread: dict[str, int], noun: str = "line") -> str:
    """The import note for lines (or ``noun``s) of types not read, e.g. ``4
    lines of types this version does not read (token_usage_record: 3,
    world_state: 1)``."""
    total = sum(unread.values())
    kinds = ", ".join(f"{kind}: {n}" for kind, n in sorted(unread.items()))
    nouns = noun if total == 1 else noun + "s"
    return f"{total} {nouns} of types this version does not read ({kinds})"


def shown(value: Any, limit: int = 60) -> str:
    """An untrusted value short and escaped, for a message."""
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"
