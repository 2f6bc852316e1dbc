"""The usual native record, read fast: what a large import spends its time on.

:func:`read_record` is :func:`~replayhub.ingest.native.parse_line` then
:func:`~replayhub.ingest.native.check_record` as one step -- the same record or
the same RecordError. A line that orjson reads as the stdlib would and whose
every field is of the usual, valid kind is checked here in straight-line code,
and its canonical texts are written by orjson without a second look at what
the fast parse proved. Anything else -- a wrong type, a value over a limit, a
string the database cannot store -- goes to the full checks, which refuse
with every reason or accept, so this module never words an error.

:func:`read_columns` is the same read for a row about to be ``COPY``-ed: a
usual record comes back as the values its binary row is made of
(:data:`Columns`), its stored and usage texts as the bytes they are written
in, without the :class:`Record` (whose making, and the decoding and encoding
of those texts again, were some 2 us of a line's 25).
"""

from __future__ import annotations

import hashlib
import math
import re
from datetime import datetime
from typing import Any

import orjson

from replayhub.gateway.redact import mask_key_shapes
from replayhub.ingest.native import (
    BIGINT_MAX,
    CONTROL,
    EXTERNAL_ID_LIMIT,
    IMAGE_LIMIT,
    SHA,
    SHA256,
    SLUG,
    TEXT_LIMITS,
    USAGE_COUNTS,
    Record,
    _check,
    _fast_parse,
    _members,
    _parse_strictly,
    check_record,
)
from replayhub.lib import boundedjson

_SORTED = orjson.OPT_SORT_KEYS
_UNICODE_ESCAPE = re.compile(rb"\\u")
_TITLE, _PROV, _MODEL, _EFFORT, _BRANCH = (
    TEXT_LIMITS[name]
    for name in ("title", "provider", "model", "effort", "original_branch")
)


def read_record(
    data: bytes,
    *,
    terminated: bool = True,
    max_prompt_bytes: int,
    project: str | None = None,
    masked: bool = False,
) -> Record:
    """:func:`parse_line` then :func:`check_record`, as one step: the same
    record or the same RecordError, faster (what the fast parse proved about
    the numbers and keys is not proved again).

    ``masked``: ``mask_key_shapes`` is known to leave ``data`` as it is (the
    line was in a batch it left unchanged, :func:`replayhub.ingest.rows.read_batch`).
    """
    if not masked:
        data = mask_key_shapes(data)  # no provider key is stored, nor its hash
    value = _fast_parse(data)
    if value is None:
        value = _parse_strictly(data, terminated=terminated)
        return check_record(value, max_prompt_bytes=max_prompt_bytes, project=project)
    usual = _usual(value, max_prompt_bytes, project)
    if usual is None:
        return _check(value, max_prompt_bytes, project, plain=True)
    return _record(value, usual)


# What a record's binary columns are made of (rows.binary_fields): the
# project it names or is given, then the values of rows.COLUMNS in order --
# text as str, ``usage`` and ``raw`` as their canonical UTF-8 bytes, the
# hash as hex.
Columns = tuple[Any, ...]


def read_columns(
    data: bytes,
    *,
    terminated: bool = True,
    max_prompt_bytes: int,
    project: str | None = None,
    masked: bool = False,
) -> Columns:
    """:func:`read_record` as the values its stored row is made of, without
    the :class:`Record` when the record is of the usual kind: the same
    checks, and the same RecordError."""
    if not masked:
        data = mask_key_shapes(data)
    # A one-byte search first: a two-byte one is some eight times slower.
    if b"\\" not in data or _UNICODE_ESCAPE.search(data) is None:
        usual = _read_plain(data, max_prompt_bytes, project)
        if usual is not None:
            return usual
    value = _fast_parse(data)
    if value is not None:
        usual = _usual(value, max_prompt_bytes, project)
        if usual is not None:
            return usual
        record = _check(value, max_prompt_bytes, project, plain=True)
    else:
        value = _parse_strictly(data, terminated=terminated)
        record = check_record(value, max_prompt_bytes=max_prompt_bytes, project=project)
    return columns(record)


def _read_plain(
    data: bytes, max_prompt_bytes: int, project: str | None
) -> Columns | None:
    """The :data:`Columns` of a usual record written without ``\\u``
    escapes (as most are); None for anything else, which the caller reads as
    before. No error is worded here.

    Such a line proves that no key repeats with its colons rather than its
    key endings (two passes over the line fewer). With no ``\\u`` escape, a
    colon in the text is either a member's, one per member written, or a
    string's own, one per colon the parsed strings hold -- and JSON has no
    other way to write one. The record's canonical text (which is made in
    any case) holds one colon per member of the value and each of its
    strings' own: a repeated key, whose first member the parse dropped,
    leaves the line with more colons than the canonical text. Nor can a
    string hold a NUL (written only as ``\\u0000``).
    """
    if len(data) > boundedjson.MAX_BYTES:
        return None
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if type(value) is not dict or _members(value) < 0:
        return None
    return _usual(value, max_prompt_bytes, project, colons=data.count(b":"))


def columns(record: Record) -> Columns:
    """The :data:`Columns` of a checked record."""
    return (
        record.project,
        record.external_id,
        record.title,
        record.prompt,
        record.provider,
        record.model,
        record.effort,
        record.base_sha,
        record.original_commit,
        record.original_branch,
        record.original_tests_passed,
        record.sandbox_image,
        record.sandbox_config_sha256,
        record.started_at,
        record.output,
        record.usage_json.encode(),
        record.stored_json.encode(),
        record.sha256,
    )


def _record(value: dict[str, Any], usual: Columns) -> Record:
    (
        project,
        external_id,
        title,
        prompt,
        provider,
        model,
        effort,
        base_sha,
        commit,
        branch,
        passed,
        image,
        config,
        moment,
        output,
        usage_text,
        stored_text,
        digest,
    ) = usual
    usage = value.get("usage")
    return Record(
        project=project,
        external_id=external_id,
        title=title,
        prompt=prompt,
        provider=provider,
        model=model,
        effort=effort,
        base_sha=base_sha,
        original_commit=commit,
        original_branch=branch,
        original_tests_passed=passed,
        sandbox_image=image,
        sandbox_config_sha256=config,
        started_at=moment,
        output=output,
        usage=usage if usage is not None else {},
        raw=value,
        stored_json=stored_text.decode(),
        sha256=digest,
        usage_json=usage_text.decode(),
    )


def _check_usual(
    value: dict[str, Any], max_prompt_bytes: int, project: str | None
) -> Record | None:
    """The record when every field is of the usual, valid kind; else None."""
    usual = _usual(value, max_prompt_bytes, project)
    return None if usual is None else _record(value, usual)


def _usual(
    value: dict[str, Any],
    max_prompt_bytes: int,
    project: str | None,
    *,
    colons: int | None = None,
) -> Columns | None:
    """The record's :data:`Columns` when every field is of the usual, valid
    kind; else None.

    ``value`` passed :func:`~replayhub.ingest.native._fast_parse`, or, with
    ``colons``, was read by :func:`_read_plain` (which see). The same
    checks as the full ones, with exact types (a str subclass from a Python
    caller takes the full checks). It never refuses: anything unusual returns
    None and the full checks run, to refuse with every reason or to accept.
    """
    get = value.get
    named = get("project")
    if not _usual_project(named, project):
        return None
    external_id = get("external_id")
    prompt = get("prompt")
    title = get("title")
    provider = get("provider")
    model = get("model")
    effort = get("effort")
    branch = get("original_branch")
    base_sha = get("base_sha")
    commit = get("original_commit")
    passed = get("original_tests_passed")
    started = get("started_at")
    output = get("output")
    sandbox = get("sandbox")
    usage = get("usage")
    if not (
        type(external_id) is str
        and len(external_id) <= EXTERNAL_ID_LIMIT
        and type(prompt) is str
        and len(prompt) <= max_prompt_bytes // 4
        and (title is None or (type(title) is str and len(title) <= _TITLE))
        and (provider is None or (type(provider) is str and len(provider) <= _PROV))
        and (model is None or (type(model) is str and len(model) <= _MODEL))
        and (effort is None or (type(effort) is str and len(effort) <= _EFFORT))
        and (branch is None or (type(branch) is str and len(branch) <= _BRANCH))
        and (base_sha is None or (type(base_sha) is str and SHA.fullmatch(base_sha)))
        and (commit is None or (type(commit) is str and SHA.fullmatch(commit)))
        and (passed is None or type(passed) is bool)
        and type(started) is str
        and (output is None or type(output) is str)
        # Not blank (isspace is the whitespace strip() removes, without
        # copying the text, and False for "").
        and external_id
        and not external_id.isspace()
        and prompt
        and not prompt.isspace()
        # Printable text has no control character; the pattern decides the rest.
        and (external_id.isprintable() or not CONTROL.search(external_id))
    ):
        return None
    moment = _usual_moment(started)
    if moment is None:
        return None
    image_and_config = _usual_sandbox(sandbox)
    if image_and_config is None:
        return None
    if usage is not None and (type(usage) is not dict or not _usual_usage(usage)):
        return None
    texts = _written(value, output, usage, colons)
    if texts is None:
        return None
    stored_text, digest, usage_text = texts
    return (
        named or project,
        external_id,
        title or "",
        prompt,
        provider or "",
        model or "",
        effort or "",
        base_sha or "",
        commit or "",
        branch or "",
        passed,
        *image_and_config,
        moment,
        output or "",
        usage_text,
        stored_text,
        digest,
    )


def _usual_project(named: Any, project: str | None) -> bool:
    """Whether the record's project is of the usual kind: a valid slug, the
    given project's when one is given, or no name when one is given."""
    if named is None:
        return project is not None
    return (
        type(named) is str
        and SLUG.fullmatch(named) is not None
        and (project is None or named == project)
    )


def _usual_moment(started: str) -> datetime | None:
    """``started_at`` read as an ISO time with its offset; else None."""
    try:
        moment = datetime.fromisoformat(started)
    except ValueError:
        return None
    if moment.tzinfo is None or moment.utcoffset() is None:
        return None
    return moment


def _usual_sandbox(sandbox: Any) -> tuple[str, str] | None:
    """The sandbox's image and config hash ("" for either not given) when
    both are of the usual kind; else None."""
    if sandbox is None:
        return "", ""
    if type(sandbox) is not dict:
        return None
    # Any JSON value of the record until checked.
    image: Any = sandbox.get("image")
    config: Any = sandbox.get("config_sha256")
    if image is None:
        image = ""
    elif type(image) is not str or len(image) > IMAGE_LIMIT:
        return None
    if config is None:
        config = ""
    elif type(config) is not str or not SHA256.fullmatch(config):
        return None
    return image, config


def _usual_usage(usage: dict[str, Any]) -> bool:
    for key in USAGE_COUNTS:
        count = usage.get(key)
        if count is not None and (
            type(count) is not int or not 0 <= count <= BIGINT_MAX
        ):
            return False
    cost = usage.get("cost_usd")
    return cost is None or (
        (type(cost) is float or type(cost) is int) and math.isfinite(cost) and cost >= 0
    )


def _written(
    value: dict[str, Any],
    output: str | None,
    usage: dict[str, Any] | None,
    colons: int | None = None,
) -> tuple[bytes, str, bytes] | None:
    """The stored part's canonical text, the record's hash and the usage's
    text, as :func:`~replayhub.ingest.native._fingerprint` and
    :func:`~replayhub.ingest.native.canonical_json` give them (UTF-8); None
    for a string the database cannot store (the full checks then refuse it),
    and, given the line's ``colons``, for a key that may repeat."""
    try:
        if "project" in value:
            rest = value.copy()
            del rest["project"]
        else:
            rest = value
        hashed = orjson.dumps(rest, option=_SORTED)
        stored = value.copy()
        del stored["prompt"]
        if output:
            del stored["output"]
        stored_text = orjson.dumps(stored, option=_SORTED)
        usage_text = orjson.dumps(usage, option=_SORTED) if usage else b"{}"
    except orjson.JSONEncodeError:  # a lone surrogate
        return None
    if colons is None:
        if b"\\u0000" in hashed:
            return None
    # The project's member (a slug or null: no colon of its own) is not hashed.
    elif hashed.count(b":") + ("project" in value) != colons:
        return None
    return stored_text, hashlib.sha256(hashed).hexdigest(), usage_text
