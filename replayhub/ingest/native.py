"""The native run record: one JSON object per line, parsed and checked.

Pure functions over bytes and plain values, no database (the lines come from
:mod:`replayhub.ingest.lines`): :func:`parse_line` turns one line into a JSON
value, :func:`check_record` turns that value into a :class:`Record` or raises
:class:`RecordError` naming every field that is wrong. ``docs/formats.md`` is
the reference for producers.

Every value is untrusted. Nothing is trimmed, truncated or coerced: a value is
stored exactly as sent or the line is refused with the reason.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import orjson

from replayhub.lib import boundedjson

SHA = re.compile(r"[0-9a-f]{7,64}")
SHA256 = re.compile(r"[0-9a-f]{64}")
SLUG = re.compile(r"[-a-zA-Z0-9_]{1,64}")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# A NUL escape that is not itself an escaped backslash followed by "u0000".
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
BIGINT_MAX = 2**63 - 1

# Optional text fields and the column sizes they are stored in. A longer value is
# refused rather than cut: nothing a producer sent is silently lost.
TEXT_LIMITS: dict[str, int] = {
    "title": 500,
    "provider": 100,
    "model": 200,
    "effort": 50,
    "original_branch": 255,
}
EXTERNAL_ID_LIMIT = 255
IMAGE_LIMIT = 512
USAGE_COUNTS = ("input_tokens", "output_tokens", "turns")


class RecordError(ValueError):
    """Why one line is not a valid record; the message names the field."""


# Not frozen: a frozen dataclass sets each of its many fields through
# object.__setattr__, a measurable cost per record on a large import.
@dataclass(slots=True)
class Record:
    """A checked record: the typed columns plus the record whole (``raw``)."""

    project: str | None
    external_id: str
    title: str
    prompt: str
    provider: str
    model: str
    effort: str
    base_sha: str
    original_commit: str
    original_branch: str
    original_tests_passed: bool | None
    sandbox_image: str
    sandbox_config_sha256: str
    started_at: datetime
    output: str
    usage: dict[str, Any]
    raw: dict[str, Any]
    # What ``Run.raw`` stores -- ``raw`` less the text its columns keep verbatim
    # (:func:`stored_part`) -- as canonical JSON text, sorted keys and no
    # whitespace; and the hash of the whole record's canonical text.
    stored_json: str
    sha256: str
    # ``usage`` as canonical JSON text, as it is sent to the database.
    usage_json: str


def parse_line(data: bytes, *, terminated: bool = True) -> Any:
    """Decode one line as UTF-8 and parse it as JSON; any failure is a RecordError.

    Non-standard JSON is refused: ``NaN``/``Infinity`` and duplicate keys (the
    database could keep neither faithfully), and so is a value nested deeper
    than ``boundedjson.MAX_DEPTH`` (nothing after the import could read it).
    ``terminated=False`` marks the last line of a file that did not end with a
    newline, so a parse failure there is reported as a probable cut-off.
    """
    value = _fast_parse(data)
    if value is not None:
        return value
    return _parse_strictly(data, terminated=terminated)


def parse_line_fast(data: bytes, *, terminated: bool = True) -> tuple[Any, bool]:
    """:func:`parse_line`, and whether ``orjson.loads(data)`` reads the same
    value: a reader holding many lines may keep such a line's bytes and read
    them again with orjson alone, every check having passed."""
    value = _fast_parse(data)
    if value is not None:
        return value, True
    return _parse_strictly(data, terminated=terminated), False


def _fast_parse(data: bytes) -> dict[str, Any] | None:
    """The line read by orjson when that is provably what :func:`_parse_strictly`
    reads: a JSON object without a repeated key whose numbers orjson reads and
    writes as the stdlib does. None for anything else -- invalid JSON, a byte
    order mark, a possible repeated key, an integer outside 64 bits (orjson
    makes it a float): the strict parser then decides, and words the error.

    Each member of an object in the text has a key ending in ``"`` and ``:``
    (whitespace between). The text holds at least as many such endings as its
    objects have members, and the value fewer members than the text when a
    repeated key was dropped: equal counts prove no key repeats. An ending
    inside a string (an escaped quote before a colon) only costs the fast path.

    The bounds are :func:`boundedjson.loads`'s, checked without its count of
    brackets (two more passes over the line): orjson stops past 1,024 levels
    and :func:`_members` past :data:`boundedjson.MAX_DEPTH`, where the strict
    parser then refuses the line.
    """
    if len(data) > boundedjson.MAX_BYTES:
        raise RecordError(str(boundedjson.too_large(boundedjson.MAX_BYTES)))
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        _refuse_past_bounds(data)
        return None
    if type(value) is not dict:
        return None
    members = _members(value)
    if members < 0:
        return None
    if members == data.count(b'":') and not _QUOTE_SPACE.search(data):
        return value
    if members == len(_KEY_END.findall(data)):
        return value
    return None


def _refuse_past_bounds(data: bytes) -> None:
    """For a line orjson does not read: the RecordError of the bound it is
    past, as :func:`boundedjson.loads` words it, if any."""
    try:
        boundedjson.loads(data, lenient=False)
    except boundedjson.Refused as refused:
        if refused.bound:
            raise RecordError(str(refused)) from None


def _parse_strictly(data: bytes, *, terminated: bool) -> Any:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        bad = data[error.start : error.start + 4]
        raise RecordError(
            f"not valid UTF-8: byte {error.start + 1} of the line "
            f"starts {bad!r}, which is not UTF-8 text"
        ) from None
    return parse_text(text.removeprefix("\ufeff"), terminated=terminated)


def parse_text(text: str, *, terminated: bool = True) -> Any:
    """``text`` parsed strictly (see :func:`parse_line`); a RecordError says why
    it is not a record's JSON."""
    try:
        value = _DECODER.decode(text)
    except RecordError:
        raise
    except json.JSONDecodeError as error:
        # Some of json's messages end in "starting at" ("Unterminated string
        # starting at"): the column completes them rather than following "at".
        where = "" if error.msg.endswith(" at") else " at"
        message = f"not valid JSON: {error.msg}{where} column {error.colno}"
        if not terminated:
            message += " (this last line has no newline: the file was probably cut off)"
        raise RecordError(message) from None
    except RecursionError:
        raise RecordError(str(boundedjson.too_deep())) from None
    except ValueError as error:
        # int() refuses numbers with thousands of digits (a DoS guard in CPython).
        raise RecordError(f"not valid JSON: {error}") from None
    try:
        openers = text.count("[") + text.count("{")
        boundedjson.check_depth(value, openers=openers)
    except boundedjson.Refused as refused:
        raise RecordError(str(refused)) from None
    return value


def _refuse_constant(name: str) -> Any:
    raise RecordError(f"not valid JSON: {name} is not a JSON number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RecordError(f"the key {_show(key)} appears twice in one object")
            seen.add(key)
    return value


_DECODER = json.JSONDecoder(
    parse_constant=_refuse_constant, object_pairs_hook=_unique_keys
)


# A key ends with its closing quote, optional whitespace and the colon.
_KEY_END = re.compile(rb'"[ \t\n\r]*:')
# Without a quote followed by whitespace every key ending is a plain '":'.
_QUOTE_SPACE = re.compile(rb'"[ \t\n\r]')
# The floats orjson reads and writes exactly as the stdlib does (``repr``):
# zero and magnitudes in [1e-4, 1e16), where ``repr`` uses no exponent. Outside,
# orjson writes exponents its own way (``0.00001`` for ``1e-05``; 3.11 and older
# ``1e16`` for ``1e+16``), NaN and infinities as null, and reads an integer
# outside 64 bits as a float (at least 9.2e18): such values take the stdlib path.
_REPR_FLOOR = 1e-4
_REPR_CEILING = 1e16


def _members(
    value: dict[str, Any] | list[Any], room: int = boundedjson.MAX_DEPTH
) -> int:
    """The number of object members in ``value``, nested ones included; -1 when
    it holds a float orjson may not read or write as the stdlib does, or nests
    deeper than ``room`` levels (``value`` is the first).

    It recurses, at most ``room`` calls deep."""
    items: Iterable[Any]
    if type(value) is dict:
        count = len(value)
        items = value.values()
    else:
        count = 0
        # The JSON parsers make plain dicts and lists: what is not a dict is a list.
        items = cast("list[Any]", value)
    for item in items:
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is float:
            if not (_REPR_FLOOR <= abs(item) < _REPR_CEILING or item == 0.0):
                return -1
        elif kind is dict or kind is list:
            if room <= 1:
                return -1
            nested = _members(item, room - 1)
            if nested < 0:
                return -1
            count += nested
        else:
            return -1
    return count


def canonical_json(value: Any) -> str:
    """The one text of a JSON value that ``record_sha256`` is computed over."""
    data = _orjson_canonical(value)
    if data is None:
        return _stdlib_canonical_json(value)
    return data.decode("utf-8")


def _canonical_bytes(value: Any, *, plain: bool = False) -> bytes:
    """:func:`canonical_json` as UTF-8 (a lone surrogate: UnicodeEncodeError)."""
    data = _orjson_canonical(value, plain=plain)
    if data is None:
        return _stdlib_canonical_json(value).encode("utf-8")
    return data


def _orjson_canonical(value: Any, *, plain: bool = False) -> bytes | None:
    """The canonical text by orjson, or None where it could differ.

    orjson sorts keys by code point, writes ``,``/``:`` and non-ASCII as is and
    escapes as the stdlib does; it refuses lone surrogates and integers outside
    64 bits (None here). :func:`_members` sends a float it may write otherwise
    to the stdlib, which writes it or raises as it always did. ``plain``:
    :func:`_members` already passed ``value``.
    """
    kind = type(value)
    if kind is not dict and kind is not list and kind is not str:
        return None
    try:
        if not plain and kind is not str and _members(value) < 0:
            return None
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, RecursionError):
        return None


def _stdlib_canonical_json(value: Any) -> str:
    """The definition of the canonical text; :func:`canonical_json` is faster."""
    return json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


def check_record(
    value: Any, *, max_prompt_bytes: int, project: str | None = None
) -> Record:
    """Check one parsed line against the native format.

    ``project`` is the project the caller imports into (``--project``, the API
    URL); a record naming another one is refused. All problems of the line are
    reported together, ``; ``-separated, each starting with the field name.
    """
    return _check(value, max_prompt_bytes, project, plain=False)


def _check(
    value: Any, max_prompt_bytes: int, project: str | None, *, plain: bool
) -> Record:
    """:func:`check_record`; ``plain``: :func:`_members` already passed ``value``."""
    if not isinstance(value, dict):
        raise RecordError(f"a record must be a JSON object, not {json_type(value)}")
    errors: list[str] = []
    check = _Checker(value, errors)

    named_project = check.slug("project")
    if named_project is None and project is None:
        errors.append(
            "project: required field is missing (or give the project on the "
            "command line)"
        )
    elif named_project is not None and project is not None and named_project != project:
        errors.append(
            f"project: the record names {_show(named_project)} but the import is "
            f"into {_show(project)}"
        )
    external_id = check.external_id()
    prompt = check.text("prompt", required=True, nonempty=True) or ""
    if len(prompt) > max_prompt_bytes // 4:
        size = len(prompt.encode("utf-8", errors="surrogatepass"))
        if size > max_prompt_bytes:
            errors.append(
                f"prompt: {size:,} bytes is above the limit of "
                f"{max_prompt_bytes:,} bytes"
            )
    texts = {}
    for name, limit in TEXT_LIMITS.items():
        text = value.get(name)
        # The common case inline; the checker explains anything else.
        if text is None:
            texts[name] = ""
        elif type(text) is str and len(text) <= limit:
            texts[name] = text
        else:
            texts[name] = check.text(name, limit=limit) or ""
    base_sha = check.sha("base_sha", value.get("base_sha"))
    original_commit = check.sha("original_commit", value.get("original_commit"))
    tests_passed = check.boolean("original_tests_passed")
    started_at = check.timestamp("started_at")
    output = check.text("output") or ""
    image, config_sha = check.sandbox()
    usage = check.usage()

    if errors:
        raise RecordError("; ".join(errors))
    stored_json, digest = _fingerprint(value, plain=plain)
    return Record(
        project=named_project or project,
        external_id=external_id,
        title=texts["title"],
        prompt=prompt,
        provider=texts["provider"],
        model=texts["model"],
        effort=texts["effort"],
        base_sha=base_sha,
        original_commit=original_commit,
        original_branch=texts["original_branch"],
        original_tests_passed=tests_passed,
        sandbox_image=image,
        sandbox_config_sha256=config_sha,
        started_at=started_at,
        output=output,
        usage=usage,
        raw=value,
        stored_json=stored_json,
        sha256=digest,
        usage_json=canonical_json(usage),
    )


def _fingerprint(value: dict[str, Any], *, plain: bool = False) -> tuple[str, str]:
    """The stored part of the record as canonical text, and the sha256 of the
    whole record's canonical text, which identifies it.

    The hash leaves out ``project``: it names where a record goes, not what it
    says, so the same record sent with the key and with ``--project`` is one
    record. Strings the database cannot store are refused here, for the whole
    record, so one bad line never fails the batch it travels in.
    """
    try:
        if "project" in value:
            rest = {k: v for k, v in value.items() if k != "project"}
        else:
            rest = value
        data = _canonical_bytes(rest, plain=plain)
        stored = _canonical_bytes(stored_part(value), plain=plain).decode("utf-8")
    except ValueError as error:
        if isinstance(error, UnicodeEncodeError):
            raise RecordError(
                "contains an unpaired UTF-16 surrogate (\\ud800-\\udfff escape), "
                "which is not Unicode text"
            ) from None
        # allow_nan=False: 1e999 parses as infinity, which JSON cannot hold.
        raise RecordError("contains a number too large to store") from None
    if b"\\u0000" in data and _NUL_ESCAPE.search(data.decode("utf-8")):
        raise RecordError(
            "contains a NUL character (\\u0000), which the database cannot store"
        )
    return stored, hashlib.sha256(data).hexdigest()


# The text fields a run keeps verbatim in columns of their own, the largest
# values of a record. ``Run.raw`` stores the rest of the record, so they are not
# stored (and compressed, and written) twice; :func:`whole_record` puts the
# record back together exactly.
VERBATIM = ("prompt", "output")


def stored_part(record: dict[str, Any]) -> dict[str, Any]:
    """The record less each :data:`VERBATIM` field holding non-empty text (its
    column holds that text as is); any other value of those fields -- empty,
    null, a wrong type in an old row -- stays, so nothing is ambiguous."""
    stored = record.copy()
    for name in VERBATIM:
        value = stored.get(name)
        if value and isinstance(value, str):
            del stored[name]
    return stored


def whole_record(stored: dict[str, Any], columns: dict[str, str]) -> dict[str, Any]:
    """The record :func:`stored_part` was taken from, given its ``columns``.

    A field is put back when it is absent and its column holds text: the column
    is empty exactly when the field was absent, null or empty, and the last two
    stayed in ``stored``. Rows that stored the whole record read the same.
    """
    record = dict(stored)
    for name in VERBATIM:
        if name not in record and columns.get(name):
            record[name] = columns[name]
    return record


class _Checker:
    """Field checks that append ``field: problem`` messages instead of raising."""

    def __init__(self, record: dict[str, Any], errors: list[str]) -> None:
        self.record = record
        self.errors = errors

    def fail(self, field: str, problem: str) -> None:
        self.errors.append(f"{field}: {problem}")

    def wrong_type(self, field: str, expected: str, value: Any) -> None:
        shown = _show(value)
        actual = f"{json_type(value)} {shown}" if shown else json_type(value)
        self.fail(field, f"must be {expected}, not {actual}")

    def get(self, field: str, *, required: bool = False) -> Any:
        value = self.record.get(field)
        if value is None and required:
            if field in self.record:
                self.fail(field, "required field is null")
            else:
                self.fail(field, "required field is missing")
        return value

    def text(
        self,
        field: str,
        *,
        required: bool = False,
        nonempty: bool = False,
        limit: int | None = None,
    ) -> str | None:
        value = self.get(field, required=required)
        if value is None:
            return None
        if not isinstance(value, str):
            self.wrong_type(field, "a string", value)
            return None
        if nonempty and not value.strip():
            self.fail(field, "must not be empty")
        if limit is not None and len(value) > limit:
            self.fail(field, f"{len(value):,} characters is above the limit of {limit}")
        return value

    def slug(self, field: str) -> str | None:
        value = self.get(field)
        if value is None:
            return None
        if not isinstance(value, str):
            self.wrong_type(field, "a string", value)
            return None
        if not SLUG.fullmatch(value):
            self.fail(field, f"{_show(value)} is not a project slug")
            return None
        return value

    def external_id(self) -> str:
        value = self.text("external_id", required=True, nonempty=True)
        if value is None:
            return ""
        if len(value) > EXTERNAL_ID_LIMIT:
            self.fail(
                "external_id",
                f"{len(value):,} characters is above the limit of {EXTERNAL_ID_LIMIT}",
            )
        elif CONTROL.search(value):
            self.fail("external_id", "must not contain control characters")
        return value

    def sha(self, field: str, value: Any, *, pattern: re.Pattern[str] = SHA) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            self.wrong_type(field, "a hex string", value)
            return ""
        if not pattern.fullmatch(value):
            what = "a commit sha (7 to 64" if pattern is SHA else "a sha256 (64"
            self.fail(field, f"{_show(value)} is not {what} lowercase hex digits)")
            return ""
        return value

    def boolean(self, field: str) -> bool | None:
        value = self.get(field)
        if value is None or isinstance(value, bool):
            return value
        self.wrong_type(field, "true, false or null", value)
        return None

    def timestamp(self, field: str) -> datetime:
        value = self.get(field, required=True)
        if value is None:
            return _EPOCH
        if not isinstance(value, str):
            self.wrong_type(field, "an ISO 8601 date-time string", value)
            return _EPOCH
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            self.fail(field, f"{_show(value)} is not an ISO 8601 date-time")
            return _EPOCH
        if moment.tzinfo is None or moment.utcoffset() is None:
            self.fail(
                field,
                f"{_show(value)} has no timezone (add Z or an offset like +02:00)",
            )
            return _EPOCH
        return moment

    def section(self, field: str) -> dict[str, Any] | None:
        value = self.get(field)
        if value is None:
            return None
        if not isinstance(value, dict):
            self.wrong_type(field, "an object", value)
            return None
        return value

    def sandbox(self) -> tuple[str, str]:
        sandbox = self.section("sandbox")
        if sandbox is None:
            return "", ""
        image = sandbox.get("image")
        if image is None:
            image = ""
        elif not isinstance(image, str):
            self.wrong_type("sandbox.image", "a string", image)
            image = ""
        elif len(image) > IMAGE_LIMIT:
            self.fail(
                "sandbox.image",
                f"{len(image):,} characters is above the limit of {IMAGE_LIMIT}",
            )
        config = self.sha(
            "sandbox.config_sha256", sandbox.get("config_sha256"), pattern=SHA256
        )
        return image, config

    def usage(self) -> dict[str, Any]:
        usage = self.section("usage")
        if usage is None:
            return {}
        for key in USAGE_COUNTS:
            value = usage.get(key)
            if value is None:
                continue
            if type(value) is not int:
                self.wrong_type(f"usage.{key}", "a whole number", value)
            elif not 0 <= value <= BIGINT_MAX:
                self.fail(f"usage.{key}", f"{value} is out of range")
        cost = usage.get("cost_usd")
        if cost is not None:
            if type(cost) not in (int, float):
                self.wrong_type("usage.cost_usd", "a number", cost)
            elif not (math.isfinite(cost) and cost >= 0):
                self.fail("usage.cost_usd", f"{cost} is not a non-negative amount")
        return usage


_EPOCH = datetime.fromisoformat("1970-01-01T00:00:00+00:00")


def json_type(value: Any) -> str:
    """What a JSON value is, in words: 'an object', 'a number', 'null'…"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _show(value: Any, limit: int = 60) -> str:
    """A short, escaped rendering of an untrusted value for an error message."""
    if isinstance(value, dict | list):
        return ""
    text = repr(value)
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"
