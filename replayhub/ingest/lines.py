"""A byte stream cut into numbered lines: the first step of every import.

:func:`split_lines` gives the lines one at a time without holding more than
one; :func:`split_blocks` gives the same lines a chunk's worth at a time as
plain tuples, for an import of millions of lines (no Python code a line).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import NamedTuple

# A line as a plain tuple: its number, its bytes (None when over the size
# limit) and whether it ended with a newline.
Line = tuple[int, bytes | None, bool]


class RecordLine(NamedTuple):
    """One physical line. ``data`` is None when the line was over the size limit."""

    number: int
    data: bytes | None
    terminated: bool


def split_lines(
    chunks: Iterable[bytes], *, max_line_bytes: int
) -> Iterator[RecordLine]:
    """Cut a stream of byte chunks into numbered lines (1-based, ``\\n`` ends one).

    Memory stays within one line of at most ``max_line_bytes``: the bytes of a
    longer line are dropped as they arrive and it is yielded with ``data=None``.
    A last line without a newline is yielded with ``terminated=False``.
    """
    for block in split_blocks(chunks, max_line_bytes=max_line_bytes):
        for line in block:
            yield _new(RecordLine, line)


_new = tuple.__new__


def split_blocks(
    chunks: Iterable[bytes], *, max_line_bytes: int
) -> Iterator[list[Line]]:
    """:func:`split_lines`, the lines that each chunk ends given together as
    plain tuples: what an import of millions of lines reads without Python
    code for each line. A chunk that ends no line gives nothing."""
    number = 0
    parts: list[bytes] = []
    size = 0
    too_long = False
    for chunk in chunks:
        if not chunk:
            continue
        pieces = chunk.split(b"\n")
        if len(pieces) > 1:
            # The first piece ends the line the chunks before began.
            first = pieces[0]
            number += 1
            block: list[Line]
            if too_long or size + len(first) > max_line_bytes:
                block = [(number, None, True)]
            else:
                block = [(number, b"".join([*parts, first]) if parts else first, True)]
            parts, size, too_long = [], 0, False
            whole = pieces[1:-1]  # the lines within the chunk
            count = len(whole)
            if count and max(map(len, whole)) > max_line_bytes:
                block += [
                    (n, None if len(piece) > max_line_bytes else piece, True)
                    for n, piece in enumerate(whole, number + 1)
                ]
            else:
                numbers = range(number + 1, number + 1 + count)
                block += zip(numbers, whole, itertools.repeat(True, count), strict=True)
            number += count
            yield block
        tail = pieces[-1]
        if tail and not too_long:
            size += len(tail)
            if size > max_line_bytes:
                parts, too_long = [], True
            else:
                parts.append(tail)
    if parts or too_long:
        yield [(number + 1, None if too_long else b"".join(parts), False)]
