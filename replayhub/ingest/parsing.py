"""Reading an import's batches in a process of its own: the second core.

Reading a line (parsing, checking, hashing, the binary COPY form) is most of
an import's work in Python, and one process holds one core. A
:class:`ParserProcess` reads batches (:func:`replayhub.ingest.rows.read_batch`)
in a child process, in the order they were handed over, while the importing
process reads the file, classifies and stores the batches before.

What crosses over is small next to the work: the lines' bytes one way, and
the other one bytes object and four small values per record, or, for an
import into one project, the batch's whole ``COPY`` stream and three small
values per record (:func:`replayhub.ingest.rows.pack`). At most
:data:`IN_FLIGHT` batches are in the child at once, so memory stays flat.
"""

from __future__ import annotations

import gc
import multiprocessing
import queue
import threading
import traceback
from multiprocessing.connection import Connection
from typing import Any

from replayhub.ingest.rows import Lines, Parsed, Row, pack, read_batch

# Parsing processes: with the importing process and the database server, two
# keep both cores busy where one left the importing process waiting for it.
PROCESSES = 2
# A row made of its fields' tuple without a call of Python code.
_new = tuple.__new__
# Batches handed to each and not yet taken back: one being read while the next
# waits, so a child never waits for the importing process.
IN_FLIGHT = 2


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
        processes: int = PROCESSES,
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
        try:
            for _ in range(processes):
                ours, theirs = context.Pipe()
                self.connections.append(ours)
                # A child has a copy of every end of ours made so far; it
                # closes them, so that closing ours ends each child's connection.
                process = context.Process(
                    target=_serve,
                    args=(theirs, list(self.connections), options, head),
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
        self.connections[self.sent % len(self.connections)].send((lines, tail))
        self.sent += 1

    def full(self) -> bool:
        return self.waiting >= IN_FLIGHT * len(self.connections)

    def take(self) -> Parsed:
        """The oldest batch handed over, read; what a child raised, raised."""
        answer = self.connections[self.taken % len(self.connections)].recv()
        self.taken += 1
        if isinstance(answer, str):
            raise RuntimeError(f"the import's parsing process failed:\n{answer}")
        rows, invalid, packed = answer
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
        if self.frozen:
            self.frozen = False
            gc.unfreeze()


def _serve(
    connection: Connection,
    inherited: list[Connection],
    options: dict[str, Any],
    head: bytes | None,
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
    batches: queue.Queue[tuple[Lines, bytes | None] | None] = queue.Queue()
    receiver = threading.Thread(target=_receive, args=(connection, batches))
    receiver.start()
    try:
        while (batch := batches.get()) is not None:
            lines, tail = batch
            try:
                parsed = read_batch(lines, binary=True, **options)
                answer: Any
                if head is not None and tail is not None:
                    # One stream the importing process stores as it is.
                    answer = ([], parsed.invalid, pack(parsed.rows, head, tail))
                else:
                    # Rows cross over as plain tuples: pickling a named tuple
                    # calls Python code for each row, both ways.
                    rows = [tuple(row) for row in parsed.rows]
                    answer = (rows, parsed.invalid, None)
            except Exception:  # handed to the importing process
                answer = traceback.format_exc()
            connection.send(answer)
    except OSError:  # the importing process closed its end
        return


def _receive(
    connection: Connection, batches: queue.Queue[tuple[Lines, bytes | None] | None]
) -> None:
    try:
        while True:
            batches.put(connection.recv())
    except (EOFError, OSError):  # the importing process closed its end
        batches.put(None)
