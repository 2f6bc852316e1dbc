"""The one way to read untrusted JSON: bounded in size and in depth.

Everything an agent, a record, a transcript, a tape or a server sends is read
with :func:`loads`, which refuses -- with :class:`Refused`, a ``ValueError``
whose message is one line -- a text larger than ``max_bytes``, a value nested
deeper than ``max_depth``, and anything that is not JSON. ``RecursionError``
never leaves it.

Why :data:`MAX_DEPTH` is 100. Python stops at 1,000 frames; a Django request
has used 100 to 200 of them before a view runs, and whatever walks a value
afterwards in Python (a template, ``json.dumps(indent=...)``, a comparison,
``copy.deepcopy``) spends one to three frames a level, each walk on top of the
other. 100 levels keep the deepest of those walks under 500 frames, with room
for ReplayHub's own wrappers around a value (a record's transcript, a tape's
exchange, a replay's evidence). The deepest real agent files seen -- tool
schemas inside a model request, OpenHands events, SWE-agent trajectories --
nest under 20 levels, so 100 refuses nothing real.

Stored values are read back with :data:`STORED_MAX_DEPTH`, twice the bound:
ReplayHub wraps a value it read in a few levels of its own before storing it,
and anything deeper was stored before the bound existed (:class:`StoredDecoder`
shows it as refused rather than failing the page that reads it).

Cost. orjson parses (it is written in Rust and stops at 1,024 levels on its
own); the depth is checked only when the text holds more ``[`` and ``{``
than the bound, since a value cannot nest deeper than its text has openers,
and then by a walk with an explicit stack, never by recursion.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

MAX_DEPTH = 100
STORED_MAX_DEPTH = 2 * MAX_DEPTH
# A default for callers with no size limit of their own; most pass theirs.
MAX_BYTES = 64 * 1024 * 1024
STORED_MAX_BYTES = 1024 * 1024 * 1024

# What ``Refused.bound`` names.
DEPTH = "depth"
SIZE = "size"


class Refused(ValueError):
    """The JSON was not read; the message is one line, fit to show.

    ``bound`` is ``"depth"`` or ``"size"`` when a bound refused it, ``""``
    when the text is not JSON at all: a caller that forwards text it cannot
    read (the model gateway) forwards the one and refuses the other.
    """

    def __init__(self, message: str, *, bound: str = "") -> None:
        lines = message.strip().splitlines()
        super().__init__(lines[0] if lines else "not valid JSON")
        self.bound = bound


def too_deep(max_depth: int = MAX_DEPTH) -> Refused:
    return Refused(f"the JSON nests deeper than {max_depth} levels", bound=DEPTH)


def too_large(max_bytes: int) -> Refused:
    return Refused(f"the JSON is larger than {max_bytes:,} bytes", bound=SIZE)


def loads(
    data: bytes | bytearray | memoryview | str,
    *,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    lenient: bool = True,
) -> Any:
    """The JSON value of ``data``, or :class:`Refused`.

    ``max_bytes`` bounds the text (counted in characters for a ``str``: never
    more than its bytes). ``lenient``: what orjson refuses but Python's
    ``json`` reads -- ``NaN`` and ``Infinity``, a lone surrogate escape, a
    byte order mark, UTF-16 -- is read as ``json.loads`` would, within the same
    bounds; without it, only what orjson reads is read (a caller with a
    stricter parser of its own words the rest). Either way an integer past 64
    bits reads as a float, as orjson reads it.
    """
    if len(data) > max_bytes:
        raise too_large(max_bytes)
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        if _orjson_depth(error):
            raise too_deep(max_depth) from None
        if not lenient:
            raise Refused(f"not valid JSON: {error}") from None
        value = _stdlib_loads(data, max_depth)
    check_depth(value, max_depth, openers=_openers(data))
    return value


def _orjson_depth(error: orjson.JSONDecodeError) -> bool:
    return "depth" in str(error).lower() or "recursion" in str(error).lower()


def _stdlib_loads(data: bytes | bytearray | memoryview | str, max_depth: int) -> Any:
    text = bytes(data) if isinstance(data, memoryview) else data
    try:
        return json.loads(text)
    except RecursionError:
        raise too_deep(max_depth) from None
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        raise Refused(f"not valid JSON: {error}") from None


def _openers(data: bytes | bytearray | memoryview | str) -> int:
    if isinstance(data, str):
        return data.count("[") + data.count("{")
    if isinstance(data, memoryview):
        data = data.tobytes()
    return data.count(b"[") + data.count(b"{")


def check_depth(value: Any, max_depth: int = MAX_DEPTH, *, openers: int = -1) -> None:
    """:class:`Refused` when ``value`` nests deeper than ``max_depth``.

    ``value`` is parsed JSON (dicts, lists, scalars) from a parser of a
    caller's own, or a stored value. ``openers``: the ``[`` and ``{`` its text
    held, when known; no deeper than that, the walk is skipped.
    """
    if 0 <= openers <= max_depth:
        return
    if depth(value, stop_past=max_depth) > max_depth:
        raise too_deep(max_depth)


def depth(value: Any, *, stop_past: int | None = None) -> int:
    """How many containers deep ``value`` nests (a scalar 0, ``[]`` 1,
    ``[{}]`` 2), walked with an explicit stack; with ``stop_past``, the walk
    ends at the first level past it (and that level is returned).

    Containers are ``dict`` and ``list`` themselves, as JSON parsers (and
    Django's JSON fields) make them; a subclass is not walked into.
    """
    # One level at a time: the containers of a level are the stack. Exact
    # types, as a JSON parser makes them, keep the walk at about the cost of
    # orjson's own parse on a wide document.
    level: list[Any] = [value] if type(value) is dict or type(value) is list else []
    levels = 0
    while level:
        levels += 1
        if stop_past is not None and levels > stop_past:
            break
        below: list[Any] = []
        keep = below.append
        for node in level:
            for item in node.values() if type(node) is dict else node:
                kind = type(item)
                if kind is dict or kind is list:
                    keep(item)
        level = below
    return levels


# What a stored value too deep to read is read as: the key says why.
REFUSED_KEY = "refused"


class StoredDecoder(json.JSONDecoder):
    """A ``JSONField`` decoder for columns that hold untrusted JSON.

    A value stored before the bound existed, deeper than
    :data:`STORED_MAX_DEPTH`, reads as ``{"refused": <one line>}`` instead of
    failing every page that loads its row with a ``RecursionError``. Text that
    is not JSON raises ``json.JSONDecodeError``, as the default decoder does
    (the field then gives the text as it is).
    """

    refused_shape: type = dict

    def decode(self, s: str, *args: Any) -> Any:
        try:
            return loads(s, max_bytes=STORED_MAX_BYTES, max_depth=STORED_MAX_DEPTH)
        except Refused as refused:
            if not refused.bound:
                raise json.JSONDecodeError(str(refused), s, 0) from None
            marker = {REFUSED_KEY: f"not shown: {refused}"}
            return [marker] if self.refused_shape is list else marker


class StoredListDecoder(StoredDecoder):
    """:class:`StoredDecoder` for a column holding a list: a value too deep
    reads as a list of one ``{"refused": …}`` item."""

    refused_shape = list
