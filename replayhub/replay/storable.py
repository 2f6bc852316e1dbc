"""Text and numbers a database stores, from whatever an agent shaped.

PostgreSQL refuses NUL in text and in jsonb, and no database takes a lone
UTF-16 surrogate, which is what ``surrogateescape`` makes of bytes that are not
UTF-8 (a file name the agent chose); no JSON column takes a NaN or an
infinity. :func:`storable` makes a replay's report storable before
``services.replay_finish`` writes it, and names what it changed.

The walk recurses: everything untrusted in a report was read within
``lib.boundedjson``'s depth, so a report nests a few levels deeper at most.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

# What a database refuses in text; it comes from the agent: its output, test
# output, test ids, file names.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_TO_ESCAPE = re.compile("[\\\\\x00\ud800-\udfff]")
_ESCAPED = re.compile(r"\\(\\|x00|u[0-9a-f]{4})")


def escape_text(text: str) -> str:
    r"""``text`` with the backslash, NUL and lone surrogates escaped as a Python
    string literal escapes them: ``\`` → ``\\``, NUL → ``\x00``, U+DCFF →
    ``\udcff``. Nothing else changes, and :func:`unescape_text` undoes it
    exactly. Applied only through :func:`storable`, which escapes a field only
    when it holds something a database refuses."""
    return _TO_ESCAPE.sub(_escape_char, text)


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\\":
        return "\\\\"
    return "\\x00" if char == "\x00" else f"\\u{ord(char):04x}"


def unescape_text(text: str) -> str:
    """The text :func:`escape_text` was given."""
    return _ESCAPED.sub(_unescape_sequence, text)


def _unescape_sequence(match: re.Match[str]) -> str:
    sequence = match.group(1)
    if sequence == "\\":
        return "\\"
    return "\x00" if sequence == "x00" else chr(int(sequence[1:], 16))


def storable(value: Any, where: str = "") -> tuple[Any, list[str], list[str]]:
    """``value`` made storable, with the names of the fields that were changed.

    ``value`` is text, a number, or lists, tuples, dicts and dataclasses of
    them, nested. A field is named by its path of dataclass fields from
    ``where`` (``gate.attempts.output_tail``); list items, dict keys and
    values are named by their container. When any text in a field holds NUL
    or a lone surrogate, *every* text of that field is escaped
    (:func:`escape_text`), so a field listed as escaped is unescaped whole and
    one not listed is stored verbatim. A NaN or an infinity, which no JSON
    column takes, becomes None. Returns the value (the same object when
    nothing changed), the fields escaped and the fields whose numbers were
    dropped.
    """
    escaped: set[str] = set()
    dropped: set[str] = set()
    _walk(value, where, None, escaped, dropped)
    if escaped or dropped:
        value = _walk(value, where, escaped, set(), set())
    return value, sorted(escaped), sorted(dropped)


def _walk(
    value: Any,
    where: str,
    escape: set[str] | None,
    escaped: set[str],
    dropped: set[str],
) -> Any:
    """Note what is unstorable (``escape`` None), or rebuild ``value`` with the
    fields in ``escape`` escaped and every NaN and infinity dropped."""
    if isinstance(value, str):
        if escape is None:
            if _UNSTORABLE.search(value):
                escaped.add(where)
            return value
        if where not in escape:
            return value
        text = escape_text(value)
        return value if text == value else text
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        dropped.add(where)
        return value if escape is None else None
    if isinstance(value, dict):
        pairs = [
            (
                _walk(key, where, escape, escaped, dropped),
                _walk(item, where, escape, escaped, dropped),
            )
            for key, item in value.items()
        ]
        same = all(
            k is old_k and v is old_v
            for (k, v), (old_k, old_v) in zip(pairs, value.items(), strict=True)
        )
        return value if same else dict(pairs)
    if isinstance(value, list | tuple):
        items = [_walk(item, where, escape, escaped, dropped) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        if isinstance(value, list):
            return items
        if hasattr(value, "_fields"):  # a named tuple
            return type(value)(*items)
        return type(value)(items)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            if not f.init:
                continue
            old = getattr(value, f.name)
            name = f"{where}.{f.name}" if where else f.name
            new = _walk(old, name, escape, escaped, dropped)
            if new is not old:
                changes[f.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value
