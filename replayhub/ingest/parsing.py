"""Reading an import's batches in a process of its own: the second core.

Reading a line (parsing, checking, hashing, the binary COPY form) is most of
an import's work in Python, and one process holds one core. A
:class:`ParserProcess` reads batches (:func:`replayhub.ingest.rows.read_batch`)
in a child process, in the order they were handed over, while the importing
process reads the file, classifies and stores the batches before.

What crosses over is small next to the work: the lines one way, and the
other one bytes object and four small values per record, or, for an import
into one project, the batch's whole ``COPY`` stream and three small values
per record (:func:`replayhub.ingest.rows.pack`). The bytes -- the lines, the
stream -- go through memory the two processes share (:class:`Slots`) and
only the small values through the pipe: on two cores a pipe's copies,
wake-ups and pickling of a megabyte a batch each way cost more than reading
some of the lines. At most :data:`IN_FLIGHT` batches are in the child at
once, so memory stays flat.
"""

from __future__ import annotations

import gc
import itertools
import mmap
import multiprocessing
import operator
import queue
import threading
import traceback
from array import array
from multiprocessing.connection import Connection
from typing import Any, NamedTuple

from replayhub.gateway.redact import may_hold_key_shape
from replayhub.ingest.rows import Lines, Packed, Parsed, Row, pack, read_batch

# Parsing processes. With the importing process (little more than the file's
# chunks and the writer's COPY since the batches pass in shared memory) and
# the database server, one keeps two cores busy: two competed for them,
# 27,100 records/s against one's 28,400 (docs/performance.md), and a
# transcript import's reading process lost a core's share to the second.
PROCESSES = 1
# A row made of its fields' tuple without a call of Python code.
_new = tuple.__new__
# Batches handed to each and not yet taken back: one being read while the next
# waits, so a child never waits for the importing process.
IN_FLIGHT = 2
# The size of each shared slot; a batch whose lines or stream are larger
# crosses the pipe instead. Only the pages a batch touches are resident.
SLOT_BYTES = 8 << 20
# The slots' two ways.
LINES, STREAM = 0, 1


class Slots:
    """The memory a parent and one child share: :data:`IN_FLIGHT` slots for
    the lines of the batches handed over, as many for the streams handed back.

    A child's batch number ``i`` uses slot ``i % IN_FLIGHT`` both ways. That
    slot is free again when batch ``i`` is handed over: the importing process
    hands a child a batch only once that child's batch ``i - IN_FLIGHT`` was
    taken back (:meth:`ParserProcess.full`), and the child answers only once
    it has read the lines."""

    def __init__(self) -> None:
        # Anonymous and shared: what a forked child writes, the parent reads.
        self.memory = mmap.mmap(-1, 2 * IN_FLIGHT * SLOT_BYTES)

    def write(self, way: int, batch: int, data: bytes) -> None:
        start = self._start(way, batch)
        self.memory[start : start + len(data)] = data

    def read(self, way: int, batch: int, size: int) -> bytes:
        start = self._start(way, batch)
        return self.memory[start : start + size]

    def cut(self, way: int, batch: int, sizes: array[int]) -> list[bytes]:
        """The pieces of ``sizes`` bytes, one byte apart, that the slot holds."""
        starts = itertools.accumulate(
            map(_PAST_SEPARATOR, sizes), initial=self._start(way, batch)
        )
        memory = self.memory
        # One start more than sizes: the end of the last.
        pairs = zip(starts, sizes, strict=False)
        return [memory[start : start + size] for start, size in pairs]

    def holds_no_key_shape(self, way: int, batch: int, size: int) -> bool:
        """Whether the slot's first ``size`` bytes are proved to hold no key
        shape."""
        start = self._start(way, batch)
        return not may_hold_key_shape(self.memory, start, start + size)

    def close(self) -> None:
        self.memory.close()

    @staticmethod
    def _start(way: int, batch: int) -> int:
        return (way * IN_FLIGHT + batch % IN_FLIGHT) * SLOT_BYTES


# From a line's size to the start of the next one in a slot (a newline apart).
_PAST_SEPARATOR = (1).__add__


class Shared(NamedTuple):
    """A batch's lines in its slot, as the pipe carries them: the lines'
    numbers and sizes, and those that are not a whole line of text (over
    the size limit, or the file's last without a newline) as (index, too
    long, terminated); the bytes are the lines joined by newlines."""

    numbers: array[int]
    sizes: array[int]
    odd: list[tuple[int, bool, bool]]
    size: int


def hand_over(slots: Slots, batch: int, lines: Lines) -> Lines | Shared:
    """What the pipe carries of ``lines``: the lines themselves when they do
    not fit their slot, else their :class:`Shared` description, the bytes
    written into the slot."""
    texts = list(map(_TEXT, lines))
    ended = list(map(_ENDED, lines))
    odd: list[tuple[int, bool, bool]] = []
    if None in texts or False in ended:
        odd = [
            (index, text is None, end)
            for index, (text, end) in enumerate(zip(texts, ended, strict=True))
            if text is None or not end
        ]
        texts = [text or b"" for text in texts]
    joined = b"\n".join(texts)
    if len(joined) > SLOT_BYTES:
        return lines
    slots.write(LINES, batch, joined)
    numbers = array("q", map(_NUMBER, lines))
    return Shared(numbers, array("q", map(len, texts)), odd, len(joined))


# A line's parts, taken without Python code for each line.
_NUMBER, _TEXT, _ENDED = (operator.itemgetter(part) for part in range(3))


def taken_over(slots: Slots, batch: int, sent: Lines | Shared) -> Lines:
    """The lines :func:`hand_over` described, read back from the slot."""
    if not isinstance(sent, Shared):
        return sent
    # Cut by size, straight from the slot: a line may hold a newline (an
    # element of a JSON array).
    texts = slots.cut(LINES, batch, sent.sizes)
    lines: Lines = list(zip(sent.numbers, texts, [True] * len(texts), strict=True))
    for index, too_long, terminated in sent.odd:
        text = None if too_long else texts[index]
        lines[index] = (sent.numbers[index], text, terminated)
    return lines


class ParserProcess:
    """Child processes reading batches of lines into binary rows; the batches
    go to them in turn and come back in the order they were handed over."""

    @staticmethod
    def usable() -> bool:
        # A daemonic process (a pool's worker) may not start children.
        return not multiprocessing.current_process().daemon

    def __init__(
        self,
        *,
        project: str | None,
        max_prompt_bytes: int,
        max_line_bytes: int,
        head: bytes | None = None,
        processes: int | None = None,
    ) -> None:
        """``head``: what each stored row starts with when every row is of
        the import's project (:func:`replayhub.ingest.copying.copy_head`);
        then a batch handed over with its tail comes back as one COPY stream
        (:func:`replayhub.ingest.rows.pack`)."""
        # fork: a child starts in milliseconds with the code already loaded,
        # and runs nothing but pure functions over the bytes it is sent -- no
        # database connection, lock or thread of the parent is used there.
        context = multiprocessing.get_context("fork")
        # The import's own objects come and go by the batch: the collections
        # they set off need not walk everything loaded before (as the web
        # server's processes never do, replayhub.wsgi). Put back by close(),
        # unless something else had frozen them (then it is left as it was).
        self.frozen = gc.get_freeze_count() == 0
        if self.frozen:
            gc.freeze()
        options = {
            "project": project,
            "max_prompt_bytes": max_prompt_bytes,
            "max_line_bytes": max_line_bytes,
        }
        self.connections: list[Connection] = []
        self.processes: list[multiprocessing.process.BaseProcess] = []
        self.slots: list[Slots] = []
        try:
            for _ in range(processes or PROCESSES):
                ours, theirs = context.Pipe()
                self.connections.append(ours)
                self.slots.append(Slots())
                # A child has a copy of every end of ours made so far; it
                # closes them, so that closing ours ends each child's connection.
                process = context.Process(
                    target=_serve,
                    args=(theirs, self.connections[:], options, head, self.slots[-1]),
                    name="replayhub-import-parser",
                    daemon=True,
                )
                process.start()
                theirs.close()
                self.processes.append(process)
        except BaseException:
            # No caller holds this object to close it: the children started
            # are stopped, and the collector is given back what it was.
            self.close()
            raise
        self.sent = 0
        self.taken = 0

    @property
    def waiting(self) -> int:
        return self.sent - self.taken

    def put(self, lines: Lines, tail: bytes | None = None) -> None:
        """Hand over a batch; with ``tail`` (what each of its rows ends with:
        :func:`replayhub.ingest.copying.copy_tail`) and a ``head``, it comes
        back packed."""
        batch, child = divmod(self.sent, len(self.connections))
        sent = hand_over(self.slots[child], batch, lines)
        self.connections[child].send((sent, tail))
        self.sent += 1

    def full(self) -> bool:
        return self.waiting >= IN_FLIGHT * len(self.connections)

    def take(self) -> Parsed:
        """The oldest batch handed over, read; what a child raised, raised."""
        batch, child = divmod(self.taken, len(self.connections))
        answer = self.connections[child].recv()
        self.taken += 1
        if isinstance(answer, str):
            raise RuntimeError(f"the import's parsing process failed:\n{answer}")
        rows, invalid, packed, shared = answer
        if shared is not None:
            packed = packed._replace(data=self.slots[child].read(STREAM, batch, shared))
        return Parsed([_new(Row, row) for row in rows], invalid, packed)

    def close(self) -> None:
        """Stop the children (batches not taken are dropped) and wait for them."""
        for connection in self.connections:
            connection.close()
        for process in self.processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join()
        for slots in self.slots:
            slots.close()
        self.slots = []
        if self.frozen:
            self.frozen = False
            gc.unfreeze()


def _serve(
    connection: Connection,
    inherited: list[Connection],
    options: dict[str, Any],
    head: bytes | None,
    slots: Slots,
) -> None:
    for end in inherited:
        end.close()
    # What the importing process had made stays out of the collector's sight
    # here: the collections that reading batches sets off would otherwise
    # walk the hundreds of thousands of objects of Django and the project,
    # copying every page they touch (this process is a fork, and its own).
    gc.freeze()
    # The batches are received on a thread of their own: the importing process
    # may be handing over the next batch while this one sends a large answer,
    # and each would wait for the other to read.
    batches: queue.Queue[tuple[Lines | Shared, bytes | None] | None] = queue.Queue()
    receiver = threading.Thread(target=_receive, args=(connection, batches))
    receiver.start()
    number = 0
    try:
        while (batch := batches.get()) is not None:
            sent, tail = batch
            try:
                lines = taken_over(slots, number, sent)
                # The probes for key shapes run over the slot's bytes as they
                # are, rather than over the lines joined again.
                clean = isinstance(sent, Shared) and slots.holds_no_key_shape(
                    LINES, number, sent.size
                )
                parsed = read_batch(lines, binary=True, no_key_shape=clean, **options)
                answer: Any
                if head is not None and tail is not None:
                    # One stream the importing process stores as it is.
                    answer = _packed(slots, number, pack(parsed.rows, head, tail))
                    answer = ([], parsed.invalid, *answer)
                else:
                    # Rows cross over as plain tuples: pickling a named tuple
                    # calls Python code for each row, both ways.
                    rows = [tuple(row) for row in parsed.rows]
                    answer = (rows, parsed.invalid, None, None)
            except Exception:  # handed to the importing process
                answer = traceback.format_exc()
            connection.send(answer)
            number += 1
    except OSError:  # the importing process closed its end
        return


def _packed(slots: Slots, batch: int, packed: Packed) -> tuple[Packed, int | None]:
    """``packed`` as the pipe carries it, and the size of its stream when
    that was written into the batch's slot (then the stream is not sent)."""
    size = len(packed.data)
    if size > SLOT_BYTES:
        return packed, None
    slots.write(STREAM, batch, packed.data)
    return packed._replace(data=b""), size


def _receive(
    connection: Connection,
    batches: queue.Queue[tuple[Lines | Shared, bytes | None] | None],
) -> None:
    try:
        while True:
            batches.put(connection.recv())
    except (EOFError, OSError):  # the importing process closed its end
        batches.put(None)
