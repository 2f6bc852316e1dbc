"""The Engine API's output stream, pure: frames apart, lines together."""

from __future__ import annotations

import struct

from replayhub.sandbox.engine import LineJoiner, demultiplex


def frame(stream: int, data: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + struct.pack(">I", len(data)) + data


def split(wire: bytes, size: int) -> dict[int, bytes]:
    """What demultiplex makes of ``wire`` read ``size`` bytes at a time."""
    chunks = iter([wire[i : i + size] for i in range(0, len(wire), size)])
    joined: dict[int, bytes] = {}

    def feed(stream: int, data: bytes) -> None:
        joined[stream] = joined.get(stream, b"") + data

    demultiplex(lambda _: next(chunks, b""), feed)
    return joined


def test_frames_are_split_whatever_the_read_sizes() -> None:
    wire = frame(1, b"out\n") + frame(2, b"err") + frame(1, b"") + frame(2, b"!\n")
    for size in (1, 3, 7, 1000):
        assert split(wire, size) == {1: b"out\n", 2: b"err!\n"}


def test_a_line_of_one_stream_is_never_cut_by_the_other() -> None:
    out: list[bytes] = []
    lines = LineJoiner(out.append)

    lines(2, b"sh: can't create")
    lines(1, b"root=read-only\n")
    lines(2, b" /probe\nlast")
    lines.close()

    assert b"".join(out) == b"root=read-only\nsh: can't create /probe\nlast"


def test_a_stream_without_newlines_is_not_held_past_its_cap() -> None:
    out: list[bytes] = []
    lines = LineJoiner(out.append, hold=10)

    lines(1, b"x" * 25)

    assert out == [b"x" * 25]
