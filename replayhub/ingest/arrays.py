"""A request body that is a JSON array of records, read element by element.

The API takes a JSON array as well as JSONL. The array is read whole (the
caller bounds its size) and cut into its elements as bytes, each handed to
the same record checks as a JSONL line, so one bad element is refused alone
and its neighbours are imported. Where the array itself is broken nothing
after that point can be read: the refusal says so. Pure: no Django.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from replayhub.ingest.native import RecordError
from replayhub.lib import boundedjson

# Blank before the first record: whitespace and a UTF-8 byte order mark.
BLANK = b" \t\r\n\xef\xbb\xbf"


def read_head(chunks: Iterator[bytes], limit: int) -> tuple[bytes, bool]:
    """The body's first chunks, read until one holds a non-blank byte or
    ``limit`` bytes are read, and whether that byte opens an array (``[``).

    The head is the start of the body: the caller reads on from ``chunks``.
    """
    head = b""
    while len(head) < limit and not head.lstrip(BLANK):
        chunk = next(chunks, None)
        if chunk is None:
            break
        head += chunk
    return head, head.lstrip(BLANK).startswith(b"[")


def array_elements(data: bytes) -> Iterator[tuple[int, bytes | RecordError]]:
    """The elements of a JSON array as bytes, by position; a RecordError where
    the array itself is broken (nothing after that point can be read)."""
    # Bytes that are not UTF-8 survive decoding as lone surrogates and are
    # turned back into bytes per element, so only that element is refused.
    text = data.decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")
    decoder = json.JSONDecoder()
    index = _skip_space(text, text.index("[") + 1)
    position = 0
    while index < len(text) and text[index] != "]":
        position += 1
        try:
            # Only the element's end is wanted here: read_record reads it,
            # within the bounds, and one nested past them is refused alone.
            _, end = decoder.raw_decode(text, index)
        except (ValueError, RecursionError) as error:
            message = (
                f"not valid JSON: {error}"
                if isinstance(error, ValueError)
                else str(boundedjson.too_deep())
            )
            yield (
                position,
                RecordError(f"{message}; the rest of the array was not read"),
            )
            return
        yield position, text[index:end].encode("utf-8", errors="surrogateescape")
        index = _skip_space(text, end)
        if text.startswith(",", index):
            index = _skip_space(text, index + 1)
        elif not text.startswith("]", index):
            yield (
                position + 1,
                RecordError(
                    "not valid JSON: expected ',' or ']' after an element; the rest "
                    "of the array was not read"
                ),
            )
            return
    if index >= len(text):
        yield (
            position + 1,
            RecordError("not valid JSON: the array is not closed with ']'"),
        )
    elif text[index + 1 :].strip():
        yield (
            position + 1,
            RecordError("not valid JSON: there is more after the closing ']'"),
        )


def _skip_space(text: str, index: int) -> int:
    while index < len(text) and text[index] in " \t\r\n":
        index += 1
    return index
