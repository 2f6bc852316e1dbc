"""Batches of lines read into rows ready to store; pure, no database.

:func:`read_batch` reads a batch of numbered lines (:class:`Parsed`): each
valid record as a :class:`Row` -- the line, the project it names, the
external id and hash that classify it, and its columns -- and each invalid
line with the reason. With ``binary=True`` the columns are already in
PostgreSQL's binary ``COPY`` format (:data:`COLUMNS`, in that order), so the
process storing them does no work per column; otherwise they are the
:class:`~replayhub.ingest.native.Record` itself.

The batch is the unit of work so that it can be read in another process
(:mod:`replayhub.ingest.parsing`): what crosses over is the lines' bytes one
way and, the other way, one bytes object and four small values per record;
or, when every row is of the import's project, the batch's whole ``COPY``
stream (:func:`pack`) and three small values per record, so the importing
process makes no object a row.
"""

from __future__ import annotations

import operator
import struct
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from replayhub.gateway.redact import mask_key_shapes
from replayhub.ingest.fastpath import Columns, read_columns, read_record
from replayhub.ingest.native import (
    EXTERNAL_ID_LIMIT,
    IMAGE_LIMIT,
    TEXT_LIMITS,
    RecordError,
)

# The run columns a row carries, in the order of its binary form; the project
# and the columns every row of a batch shares are added by the writer.
COLUMNS = (
    "external_id",
    "title",
    "prompt",
    "provider",
    "model",
    "effort",
    "base_sha",
    "original_commit",
    "original_branch",
    "original_tests_passed",
    "sandbox_image",
    "sandbox_config_sha256",
    "started_at",
    "output",
    "usage",
    "raw",
    "record_sha256",
)

# One line: its number, its bytes (None when over the size limit) and whether
# it ended with a newline.
Lines = list[tuple[int, bytes | None, bool]]


class Row(NamedTuple):
    line: int
    project: str | None
    external_id: str
    sha256: str
    # The binary COPY fields of COLUMNS, or the Record.
    columns: Any


class Packed(NamedTuple):
    """A batch's rows as the whole binary ``COPY`` stream that stores them
    (:func:`pack`), and per row what classifying them asks for, in order:
    the line, the external id, the hash, and the size of its record columns
    in the stream."""

    data: bytes
    lines: list[int]
    external_ids: list[str]
    digests: list[str]
    sizes: list[int]


class Parsed(NamedTuple):
    rows: list[Row]
    invalid: list[tuple[int, str]]
    # The rows as one COPY stream instead (then ``rows`` is empty).
    packed: Packed | None = None


# Binary COPY: the stream's signature (no flags, no extension) and its end.
SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
TRAILER = b"\xff\xff"


def pack(rows: list[Row], head: bytes, tail: bytes) -> Packed:
    """``rows`` (binary) as one COPY stream: each row ``head`` (its field
    count and project), its record columns and ``tail`` (the columns every
    row of the batch shares), so the process storing them joins nothing."""
    columns = list(map(_COLUMNS, rows))
    sizes = list(map(len, columns))
    if columns:
        # The rows joined by what ends one and starts the next, the stream's
        # ends on the first and last: one copy, no Python code a row.
        columns[0] = SIGNATURE + head + columns[0]
        columns[-1] += tail + TRAILER
        data = (tail + head).join(columns)
    else:
        data = SIGNATURE + TRAILER
    return Packed(
        data,
        list(map(_LINE, rows)),
        list(map(_EXTERNAL_ID, rows)),
        list(map(_SHA256, rows)),
        sizes,
    )


_LINE, _EXTERNAL_ID, _SHA256, _COLUMNS = map(operator.itemgetter, (0, 2, 3, 4))


def unpack(packed: Packed) -> list[Row]:
    """The rows of ``packed`` again, their columns in binary form (the
    project is the import's: None here)."""
    rows = []
    data = memoryview(packed.data)
    count = len(packed.lines)
    at = len(SIGNATURE)
    # Every row's tail is the same size: what is left once the heads and
    # the record columns are counted.
    rest = len(data) - at - len(TRAILER) - _HEAD * count - sum(packed.sizes)
    tail = rest // count if count else 0
    for line, external_id, digest, size in zip(
        packed.lines, packed.external_ids, packed.digests, packed.sizes, strict=True
    ):
        start = at + _HEAD
        columns = bytes(data[start : start + size])
        rows.append(Row(line, None, external_id, digest, columns))
        at = start + size + tail
    return rows


# A row's head: its field count (2 bytes) and its project's field (a 4-byte
# length and the 8-byte id).
_HEAD = 14


def read_batch(
    lines: Lines,
    *,
    project: str | None,
    max_prompt_bytes: int,
    max_line_bytes: int,
    binary: bool,
    no_key_shape: bool = False,
) -> Parsed:
    """Read ``lines`` in order; ``project`` as for :func:`read_record`. A
    blank line is left out, neither a row nor invalid.

    ``no_key_shape``: the lines are known to hold none (the probes found
    none in their bytes, :func:`replayhub.gateway.redact.may_hold_key_shape`)."""
    rows: list[Row] = []
    invalid: list[tuple[int, str]] = []
    masked = no_key_shape or _holds_no_key_shape(lines)
    for number, data, terminated in lines:
        if data is None:
            too_long = f"the line is longer than the limit of {max_line_bytes:,} bytes"
            invalid.append((number, too_long))
            continue
        try:
            row = _row(
                number, data, terminated, project, max_prompt_bytes, binary, masked
            )
        except RecordError as error:
            if data and not data.isspace():  # a blank line is no record
                invalid.append((number, str(error)))
            continue
        rows.append(row)
    return Parsed(rows, invalid)


def _holds_no_key_shape(lines: Lines) -> bool:
    """Whether masking key shapes leaves every line of the batch as it is.

    Masked whole, the lines joined by newlines, in one pass of the probes
    rather than one a line: no key shape spans a newline, and a mask always
    changes what it masks, so an unchanged whole means unchanged lines. A
    batch it changes has each line masked as it is read."""
    joined = b"\n".join(data for _, data, _ in lines if data is not None)
    masked = mask_key_shapes(joined)
    return masked is joined or masked == joined


def _row(
    number: int,
    data: bytes,
    terminated: bool,
    project: str | None,
    max_prompt_bytes: int,
    binary: bool,
    masked: bool,
) -> Row:
    if binary:
        values = read_columns(
            data,
            terminated=terminated,
            max_prompt_bytes=max_prompt_bytes,
            project=project,
            masked=masked,
        )
        # The project first, then the columns, the hash last (Columns); the
        # row made without the named tuple's own Python-level constructor.
        fields = binary_fields(values)
        return _new(Row, (number, values[0], values[1], values[-1], fields))
    record = read_record(
        data,
        terminated=terminated,
        max_prompt_bytes=max_prompt_bytes,
        project=project,
        masked=masked,
    )
    return Row(number, record.project, record.external_id, record.sha256, record)


_new = tuple.__new__
_LENGTH = struct.Struct(">i").pack
_TIMESTAMP = struct.Struct(">iq").pack
_NULL = b"\xff\xff\xff\xff"
_BOOLEAN = {
    True: b"\x00\x00\x00\x01\x01",
    False: b"\x00\x00\x00\x01\x00",
    None: _NULL,
}
# PostgreSQL counts timestamps in microseconds from 2000-01-01 UTC.
_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
# The length of every field whose text has a limit, looked up rather than
# packed: UTF-8 takes at most four bytes a character.
_LONGEST = 4 * max(*TEXT_LIMITS.values(), EXTERNAL_ID_LIMIT, IMAGE_LIMIT)
_LENGTHS = tuple(map(_LENGTH, range(_LONGEST + 1)))
# The fields an import's records mostly share -- provider, model and effort;
# the sandbox's image and config -- made once for each value met, up to
# _SHARED_LIMIT values a process.
_SHARED: dict[tuple[str, ...], bytes] = {}
_SHARED_LIMIT = 1024


def _shared(*texts: str) -> bytes:
    """``texts`` as consecutive text fields."""
    fields = _SHARED.get(texts)
    if fields is None:
        fields = b"".join(_LENGTHS[len(data)] + data for data in map(str.encode, texts))
        if len(_SHARED) < _SHARED_LIMIT:
            _SHARED[texts] = fields
    return fields


def binary_fields(values: Columns) -> bytes:
    """The :data:`COLUMNS` of a record, given as its
    :data:`~replayhub.ingest.fastpath.Columns`, as binary COPY fields: each a
    4-byte length and the value (text as UTF-8; jsonb as version 1 and the
    text; boolean one byte; timestamptz 8 bytes of microseconds)."""
    (
        _,
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
        started_at,
        output,
        usage,
        stored,
        digest,
    ) = values
    # One expression rather than a loop: this runs for every record.
    length = _LENGTH
    short = _LENGTHS
    external_id = external_id.encode()
    title = title.encode()
    prompt = prompt.encode()
    base_sha = base_sha.encode()
    commit = commit.encode()
    branch = branch.encode()
    output = output.encode()
    return b"".join(
        (
            short[len(external_id)],
            external_id,
            short[len(title)],
            title,
            length(len(prompt)),
            prompt,
            _shared(provider, model, effort),
            short[len(base_sha)],
            base_sha,
            short[len(commit)],
            commit,
            short[len(branch)],
            branch,
            _BOOLEAN[passed],
            _shared(image, config),
            _TIMESTAMP(8, (started_at - _PG_EPOCH) // _MICROSECOND),
            length(len(output)),
            output,
            length(len(usage) + 1),
            b"\x01",
            usage,
            length(len(stored) + 1),
            b"\x01",
            stored,
            b"\x00\x00\x00\x40",
            digest.encode(),
        )
    )


def binary_value(value: Any, type_name: str) -> bytes:
    """One binary COPY field of a column default, for the types the run
    table's defaulted columns use; anything else is a ValueError."""
    if value is None:
        return _NULL
    if type_name in ("text", "varchar") and isinstance(value, str):
        data = value.encode()
    elif type_name == "jsonb" and isinstance(value, str):
        data = b"\x01" + value.encode()
    elif type_name == "bool" and isinstance(value, bool):
        data = b"\x01" if value else b"\x00"
    elif type_name == "int8" and isinstance(value, int):
        data = struct.pack(">q", value)
    elif type_name == "int4" and isinstance(value, int):
        data = struct.pack(">i", value)
    elif type_name == "float8" and isinstance(value, int | float):
        data = struct.pack(">d", value)
    elif type_name == "timestamptz" and isinstance(value, datetime):
        data = struct.pack(">q", (value - _PG_EPOCH) // _MICROSECOND)
    else:
        raise ValueError(f"no binary COPY form for {value!r} as {type_name}")
    return _LENGTH(len(data)) + data
