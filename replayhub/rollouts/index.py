"""Loading a record file, index-selected when it has a sibling index.

``index_<env>.jsonl`` sits beside ``train_rollouts_<env>.jsonl`` /
``eval_rollouts_<env>.jsonl``: one row per record line with ``task_name``,
``reward``, ``branches`` and the line's byte ``offset`` and ``len`` (its
newline included). Rows that could never seed -- replayed output, a reward
outside the window, too few branches, a trace already stored -- are counted
and their lines never read; only the surviving byte spans are read and
parsed. Every parsed record is checked against its row: a span that is not a
whole line, or a record that is not the one its row describes, means the
index is stale, and the file is then read whole (the spans already loaded
are not loaded twice). Lines past the last row (an index lagging behind its
file) are read as they are. Without an index every line is read.

Pure but for reading files: what is stored where is the caller's concern
(``already`` answers which trace ids a project has).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replayhub.lib import boundedjson
from replayhub.lib.files import open_regular
from replayhub.rollouts.graph import leaves
from replayhub.rollouts.seeds import SeedRules
from replayhub.rollouts.trace import REPLAY_MARK, ShapeError, Trace, parse_record

READ_SIZE = 256 * 1024
# A rollout with its token ids and logprobs is large; a line past this is
# refused rather than held in memory.
MAX_LINE_BYTES = 64 * 1024 * 1024
_LOOKUP_CHUNK = 5000
_ROW_FIELDS = ("task_name", "reward", "branches", "offset", "len")

# Which trace ids, of those given, are stored already.
Already = Callable[[list[str]], set[str]]


def index_path(record_path: Path) -> Path | None:
    """The sibling index a record file's name implies, or None for a name
    outside the convention. Whether it exists is the reader's concern."""
    name = record_path.name
    for prefix in ("train_rollouts_", "eval_rollouts_"):
        if name.startswith(prefix):
            return record_path.with_name("index_" + name[len(prefix) :])
    return None


@dataclass(slots=True)
class Loaded:
    """One record line: its Trace, or why it could not be read."""

    number: int
    offset: int
    length: int
    trace: Trace | None = None
    value: Any = None
    error: str = ""


@dataclass
class LoadReport:
    """What loading a file found besides records."""

    # Rows counted without being read, by reason: replayed, source_reward,
    # no_seed, imported (the trace is stored already).
    skipped: Counter[str] = field(default_factory=Counter)
    # Why the index was not used, or stopped being used ("" when it was).
    index_problem: str = ""
    indexed: bool = False
    # Where the index's rows end (a byte offset, and the last row's line):
    # everything before was read or counted, even when the last rows were
    # skipped without being read. 0 when the index was not used.
    covered: int = 0
    covered_lines: int = 0


@dataclass(slots=True)
class _Row:
    number: int
    offset: int
    length: int
    trace: str | None
    task_name: Any
    reward: float
    branches: int
    replayed: bool


class _Stale(Exception):
    pass


def load(
    path: Path,
    *,
    rules: SeedRules,
    report: LoadReport,
    already: Already | None = None,
    start: int = 0,
    first_line: int = 1,
    final: bool = True,
    use_index: bool = True,
) -> Iterator[Loaded]:
    """The records of ``path`` from byte ``start``, index-selected when it can be.

    ``first_line`` is the number of the line at ``start``. ``final``: the
    file is complete, so a last line without its newline is
    read (and refused if it is cut off); otherwise it is a record still being
    written and is left for later.
    """
    index = index_path(path) if use_index else None
    if index is None or not index.is_file():
        yield from _stream(path, start=start, first_number=first_line, final=final)
        return
    local: Counter[str] = Counter()
    try:
        plan = _plan(path, index, rules, local, start)
    except _Stale as problem:
        report.index_problem = f"{index.name}: {problem}; the whole file was read"
        yield from _stream(path, start=start, first_number=first_line, final=final)
        return
    report.indexed = True
    done: set[int] = set()
    try:
        yield from _selected(path, plan, local, already, done, final)
    except _Stale as problem:
        report.index_problem = (
            f"{index.name} does not match the file ({problem}); the whole file was read"
        )
        for loaded in _stream(path, start=start, first_number=first_line, final=final):
            if loaded.offset not in done:
                yield loaded
        return
    report.skipped.update(local)
    if plan.end > start:
        report.covered, report.covered_lines = plan.end, plan.last


@dataclass
class _Plan:
    """The rows whose lines are to be read, where the rows end, and after
    which line number the lines past them begin."""

    wanted: list[_Row]
    end: int
    last: int
    start: int


def _plan(
    path: Path, index: Path, rules: SeedRules, skipped: Counter[str], start: int
) -> _Plan:
    """Filter the index's rows. Only the rows to read outlive this call: a
    hundred thousand parsed rows kept alive would be walked by every garbage
    collection while the records are parsed."""
    numbers, values = _read_index(index)
    size = path.stat().st_size
    end = 0
    wanted: list[_Row] = []
    low, high = rules.min_source_reward, rules.max_source_reward
    min_branches = rules.min_branches
    # The hot loop of an index-selected load: every row's span is checked,
    # and a row becomes a _Row only when its line is to be read.
    for number, value in zip(numbers, values, strict=True):
        try:
            offset, length = value["offset"], value["len"]
            reward, branches = value["reward"], value["branches"]
        except (KeyError, TypeError):
            raise _Stale(
                f"line {number} lacks one of {', '.join(_ROW_FIELDS)}"
            ) from None
        if type(offset) is not int or type(length) is not int or length <= 0:
            raise _Stale(f"line {number} has a field of the wrong type")
        if offset < end or offset + length > size:
            raise _Stale(f"row {number} names bytes that are not a record line")
        end = offset + length
        if offset < start:
            continue
        if type(reward) not in (int, float) or type(branches) is not int:
            raise _Stale(f"line {number} has a field of the wrong type")
        if REPLAY_MARK in value and value[REPLAY_MARK] is not None:
            skipped["replayed"] += 1
        elif (low is not None and reward < low) or (high is not None and reward > high):
            skipped["source_reward"] += 1
        elif branches < min_branches:
            skipped["no_seed"] += 1
        else:
            wanted.append(_row(value, number))
    return _Plan(wanted, end, numbers[-1] if numbers else 0, start)


def _selected(
    path: Path,
    plan: _Plan,
    skipped: Counter[str],
    already: Already | None,
    done: set[int],
    final: bool,
) -> Iterator[Loaded]:
    wanted = plan.wanted
    if already is not None:
        wanted = _not_stored(wanted, already, skipped)
    # Unbuffered: each span is one pread, with no buffer filled around it.
    with open_regular(path, buffering=0) as stream:
        fd = stream.fileno()
        for row in wanted:
            # One byte before the span: a whole line starts after a newline.
            before = 1 if row.offset else 0
            data = os.pread(fd, row.length + before, row.offset - before)
            if len(data) != row.length + before or not data.endswith(b"\n"):
                raise _Stale(f"row {row.number}'s span does not end a line")
            if before and data[0] != 0x0A:
                raise _Stale(f"row {row.number}'s span does not start a line")
            try:
                trace, value = parse_record(data[before:])
            except ShapeError as error:
                raise _Stale(f"line {row.number}: {error}") from None
            _check(row, trace)
            done.add(row.offset)
            yield Loaded(row.number, row.offset, row.length, trace, value)
    tail = max(plan.end, plan.start)
    if tail < path.stat().st_size:
        yield from _stream(path, start=tail, first_number=plan.last + 1, final=final)


def _check(row: _Row, trace: Trace) -> None:
    """Raise _Stale unless ``trace`` is the record ``row`` describes."""
    if row.trace is not None and row.trace != trace.id:
        raise _Stale(f"row {row.number} names trace {row.trace}, the line {trace.id}")
    if row.task_name != trace.task_name:
        raise _Stale(f"row {row.number}'s task name is not the line's")
    if not math.isclose(row.reward, trace.reward, rel_tol=1e-9, abs_tol=1e-9):
        raise _Stale(f"row {row.number}'s reward is not the line's")
    if row.branches != len(leaves(trace.nodes)):
        raise _Stale(f"row {row.number}'s branch count is not the line's")


def _not_stored(wanted: list[_Row], already: Already, skipped: Counter) -> list[_Row]:
    ids = [row.trace for row in wanted if row.trace is not None]
    stored: set[str] = set()
    for begin in range(0, len(ids), _LOOKUP_CHUNK):
        stored |= already(ids[begin : begin + _LOOKUP_CHUNK])
    if not stored:
        return wanted
    kept = []
    for row in wanted:
        if row.trace in stored:
            skipped["imported"] += 1
        else:
            kept.append(row)
    return kept


def _read_index(index: Path) -> tuple[list[int], list[Any]]:
    """The index's rows, parsed, and their line numbers. A last row without
    its newline is still being written: the lines it would name are read
    whole, as lines past the last row."""
    with open_regular(index) as stream:
        data = stream.read()
    lines = data.split(b"\n")
    lines.pop()  # after the last newline: empty, or a row being written
    if b"\n\n" in data or data.startswith(b"\n") or b"\r" in data:
        numbered = [(n, line) for n, line in enumerate(lines, 1) if line.strip()]
        numbers = [n for n, _ in numbered]
        lines = [line for _, line in numbered]
    else:
        numbers = list(range(1, len(lines) + 1))
    joined = b"[" + b",".join(lines) + b"]"
    try:
        # One call for every row: this is most of the cost of reading an index.
        # The file is read whole already; the rows, one level down, are bounded.
        rows = boundedjson.loads(
            joined,
            max_bytes=len(joined),
            max_depth=boundedjson.MAX_DEPTH + 1,
            lenient=False,
        )
    except boundedjson.Refused:
        for number, line in zip(numbers, lines, strict=True):
            try:
                boundedjson.loads(line, max_bytes=len(line), lenient=False)
            except boundedjson.Refused as refused:
                why = refused if refused.bound else "is not JSON"
                raise _Stale(f"line {number} {why}") from None
        raise _Stale("a row is not JSON") from None
    return numbers, rows


def _row(row: Any, number: int) -> _Row:
    try:
        offset, length, branches = row["offset"], row["len"], row["branches"]
        reward, name = row["reward"], row["task_name"]
    except (KeyError, TypeError):
        raise _Stale(f"line {number} lacks one of {', '.join(_ROW_FIELDS)}") from None
    trace = row.get("trace")
    if not (
        type(offset) is int
        and offset >= 0
        and type(length) is int
        and length > 0
        and type(branches) is int
        and type(reward) in (int, float)
        and (trace is None or isinstance(trace, str))
    ):
        raise _Stale(f"line {number} has a field of the wrong type")
    return _Row(
        number,
        offset,
        length,
        trace,
        name,
        float(reward),
        branches,
        row.get(REPLAY_MARK) is not None,
    )


def _stream(
    path: Path, *, start: int = 0, first_number: int = 1, final: bool = True
) -> Iterator[Loaded]:
    with open_regular(path) as stream:
        stream.seek(start)
        yield from read_lines(
            _chunks(stream), start=start, first_number=first_number, final=final
        )


def read_lines(
    chunks: Iterable[bytes],
    *,
    start: int = 0,
    first_number: int = 1,
    final: bool = True,
) -> Iterator[Loaded]:
    """Parse the lines of a byte stream that begins at byte ``start`` of its
    file. A last line without its newline is parsed when ``final``, else left
    (it is not yielded)."""
    for number, offset, length, data, terminated in _lines(chunks, start):
        if not terminated and not final:
            return
        line = number + first_number - 1
        if data is None:
            yield Loaded(
                line,
                offset,
                length,
                error=f"the line is longer than the limit of {MAX_LINE_BYTES:,} bytes",
            )
        elif data.strip():
            try:
                trace, value = parse_record(data, terminated=terminated)
            except ShapeError as error:
                yield Loaded(line, offset, length, error=str(error))
            else:
                yield Loaded(line, offset, length, trace, value)


def _lines(
    chunks: Iterable[bytes], start: int
) -> Iterator[tuple[int, int, int, bytes | None, bool]]:
    """(number, offset, length with the newline, data without it or None when
    over :data:`MAX_LINE_BYTES`, terminated) of each line, holding one line at
    most."""
    number = 0
    offset = start
    parts: list[bytes] = []
    size = 0
    for chunk in chunks:
        begin = 0
        while (newline := chunk.find(b"\n", begin)) >= 0:
            piece = chunk[begin:newline]
            number += 1
            size += len(piece)
            if size > MAX_LINE_BYTES:
                data = None
            elif parts:
                data = b"".join([*parts, piece])
            else:
                data = piece
            yield number, offset, size + 1, data, True
            offset += size + 1
            parts, size = [], 0
            begin = newline + 1
        tail = chunk[begin:]
        if tail:
            size += len(tail)
            if size <= MAX_LINE_BYTES:
                parts.append(tail)
            else:
                parts = []
    if size:
        number += 1
        data = b"".join(parts) if size <= MAX_LINE_BYTES else None
        yield number, offset, size, data, False


def _chunks(stream) -> Iterator[bytes]:
    while chunk := stream.read(READ_SIZE):
        yield chunk
