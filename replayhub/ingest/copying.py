"""Runs written by PostgreSQL's binary ``COPY``: the import's way to store a batch.

The ORM's per-row cost would be most of an import. A record's columns are put
in binary form as its line is read (:func:`replayhub.ingest.rows.binary_fields`);
here each row gets its field count, its project and the columns every row of
a batch shares, with no work per column.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import JSONField
from psycopg import postgres

from replayhub.ingest.rows import COLUMNS, SIGNATURE, TRAILER, binary_value
from replayhub.models import Run

# Run columns a record fills; every other column gets its model default.
FROM_RECORD = ("project_id", *COLUMNS, "imported_at")


def copy_runs(items: Sequence[Any], now) -> None:
    """COPY the new runs; the ORM's per-row cost would be most of an import."""
    copy_stream(copy_data(items, now))


def copy_stream(data: bytes) -> None:
    """COPY a whole binary stream of runs in the columns of :func:`copy_layout`
    (:func:`copy_data`, or :func:`replayhub.ingest.rows.pack`)."""
    table, names, _ = copy_layout()
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(
            f"COPY {table} ({names}) FROM STDIN (FORMAT BINARY)"
        ) as copy,
    ):
        copy.write(data)


def copy_data(items: Sequence[Any], now) -> bytes:
    """The binary COPY stream of ``items``, in the columns of :func:`copy_layout`.

    The record columns were put in binary form as their lines were read
    (:func:`replayhub.ingest.rows.binary_fields`): here each row is its field
    count, its project, those bytes and the columns the batch shares -- the
    import time and every other column's model default, so a field added to
    Run later is still filled -- with no work per column.
    """
    tail = copy_tail(now)
    heads: dict[int, bytes] = {}
    parts = [SIGNATURE]
    for item in items:
        pk = item.project.pk
        head = heads.get(pk)
        if head is None:
            head = heads[pk] = copy_head(pk)
        parts += (head, item.row.columns, tail)
    parts.append(TRAILER)
    return b"".join(parts)


def copy_head(project_id: int) -> bytes:
    """What each row of a run of the project starts with: its field count
    and its project."""
    _, _, shared = copy_layout()
    return _FIELD_COUNT(len(FROM_RECORD) + len(shared), 8, project_id)


def copy_tail(now) -> bytes:
    """What each row of a batch imported at ``now`` ends with: the import time
    and every other column's model default."""
    _, _, shared = copy_layout()
    return b"".join(
        binary_value(value, type_name)
        for value, type_name in [(now, "timestamptz"), *shared]
    )


_FIELD_COUNT = struct.Struct(">hiq").pack
# The binary form each record column is made in (rows.binary_fields); any
# other column type there would be a COPY error, found once a process here.
_TEXT_TYPES = ("text", "varchar")
_RECORD_TYPES = {
    "original_tests_passed": ("bool",),
    "started_at": ("timestamptz",),
    "usage": ("jsonb",),
    "raw": ("jsonb",),
}
_LAYOUT: dict[str, tuple[str, str, list[tuple[Any, str]]]] = {}


def copy_layout() -> tuple[str, str, list[tuple[Any, str]]]:
    """The table, the quoted column list and the defaults of the columns not
    filled from the record with their type names (once a process)."""
    quote = connection.ops.quote_name
    table = quote(Run._meta.db_table)
    if table in _LAYOUT:
        return _LAYOUT[table]
    fields = [f for f in Run._meta.concrete_fields if not f.primary_key]
    column = {f.attname: f.column for f in fields}
    others = [f for f in fields if f.attname not in FROM_RECORD]
    columns = [column[name] for name in FROM_RECORD] + [f.column for f in others]
    names = ", ".join(quote(name) for name in columns)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {names} FROM {table} LIMIT 0")  # noqa: S608 -- quoted model names
        types = [
            postgres.types.get(description.type_code)
            for description in cursor.description
        ]
    type_names = [info.name if info is not None else "?" for info in types]
    if type_names[0] != "int8":
        raise RuntimeError(f"run.project_id is {type_names[0]}, not what COPY sends")
    carried = type_names[1 : len(FROM_RECORD) - 1]
    for name, type_name in zip(COLUMNS, carried, strict=True):
        if type_name not in _RECORD_TYPES.get(name, _TEXT_TYPES):
            raise RuntimeError(f"run.{name} is {type_name}, not what COPY sends")
    defaults = [
        (
            json.dumps(f.get_default(), cls=f.encoder)
            if isinstance(f, JSONField)
            else f.get_db_prep_save(f.get_default(), connection),
            type_name,
        )
        for f, type_name in zip(others, type_names[len(FROM_RECORD) :], strict=True)
    ]
    _LAYOUT[table] = (table, names, defaults)
    return _LAYOUT[table]
