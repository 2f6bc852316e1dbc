"""A byte stream cut into numbered lines, however it arrives in chunks."""

from __future__ import annotations

import pytest

from replayhub.ingest.lines import RecordLine, split_blocks, split_lines


def test_lines_are_numbered_and_may_span_chunks():
    chunks = [b'{"a": 1}\n{"b"', b": 2}\n", b"\n", b'{"c": 3}']
    assert list(split_lines(chunks, max_line_bytes=100)) == [
        RecordLine(1, b'{"a": 1}', True),
        RecordLine(2, b'{"b": 2}', True),
        RecordLine(3, b"", True),
        RecordLine(4, b'{"c": 3}', False),
    ]


def test_a_line_over_the_limit_is_dropped_and_the_next_line_is_intact():
    chunks = [b"x" * 30, b"y" * 30 + b"\n" + b"ok\n", b"z" * 70]
    assert list(split_lines(chunks, max_line_bytes=50)) == [
        RecordLine(1, None, True),
        RecordLine(2, b"ok", True),
        RecordLine(3, None, False),
    ]


@pytest.mark.parametrize("ending", [b"", b"\n"])
def test_every_way_of_cutting_a_stream_into_chunks_gives_the_same_lines(ending):
    # Blank, over the limit (12 bytes) within one chunk and across chunks.
    data = b"first\n\n" + b"x" * 20 + b"\nok\n" + b"y" * 13 + b"\nlast" + ending
    expected = [
        (1, b"first", True),
        (2, b"", True),
        (3, None, True),
        (4, b"ok", True),
        (5, None, True),
        (6, b"last", bool(ending)),
    ]
    for one in range(len(data) + 1):
        for two in range(one, len(data) + 1):
            chunks = [data[:one], data[one:two], data[two:]]
            blocks = list(split_blocks(chunks, max_line_bytes=12))
            assert [line for block in blocks for line in block] == expected
            assert all(blocks)
            assert list(split_lines(chunks, max_line_bytes=12)) == expected


def test_a_file_ending_with_a_newline_has_no_extra_last_line():
    assert [n for n, _, _ in split_lines([b"a\nb\n"], max_line_bytes=10)] == [1, 2]
