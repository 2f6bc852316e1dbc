"""Reading an import's batches in a process of its own: the second core.

Reading a line (parsing, checking, hashing, the binary COPY form) is most of
an import's work in Python, and one process holds one core. A
:class:`ParserProcess` reads batches (:func:`replayhub.ingest.rows.read_batch`)
in a child process, in the order they were handed over, while the importing
process reads the file, classifies and stores the batches before.

What crosses over is small next to the work: the lines' bytes one way, one
bytes object and four small values per record the other. At most
:data:`IN_FLIGHT` batches are in the child at once, so memory stays flat.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import traceback
from multiprocessing.connection import Connection
from typing import Any

from .rows import Lines, Parsed, read_batch

# Batches handed over and not yet taken back: one being read while the next
# waits, so the child never waits for the importing process.
IN_FLIGHT = 2


class ParserProcess:
    """A child process reading batches of lines into binary rows, in order."""

    def __init__(
        self, *, project: str | None, max_prompt_bytes: int, max_line_bytes: int
    ) -> None:
        # fork: the child starts in milliseconds with the code already loaded,
        # and runs nothing but pure functions over the bytes it is sent -- no
        # database connection, lock or thread of the parent is used there.
        context = multiprocessing.get_context("fork")
        self.connection, child = context.Pipe()
        options = {
            "project": project,
            "max_prompt_bytes": max_prompt_bytes,
            "max_line_bytes": max_line_bytes,
        }
        self.process = context.Process(
            target=_serve,
            args=(child, self.connection, options),
            name="replayhub-import-parser",
            daemon=True,
        )
        self.process.start()
        child.close()
        self.waiting = 0

    def put(self, lines: Lines) -> None:
        self.connection.send(lines)
        self.waiting += 1

    def full(self) -> bool:
        return self.waiting >= IN_FLIGHT

    def take(self) -> Parsed:
        """The oldest batch handed over, read; what the child raised, raised."""
        answer = self.connection.recv()
        self.waiting -= 1
        if isinstance(answer, str):
            raise RuntimeError(f"the import's parsing process failed:\n{answer}")
        return Parsed(*answer)

    def close(self) -> None:
        """Stop the child (batches not taken are dropped) and wait for it."""
        self.connection.close()
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


def _serve(
    connection: Connection, other_end: Connection, options: dict[str, Any]
) -> None:
    # The child's copy of the importing process's end: closed, so that the
    # importing process closing its own ends the connection.
    other_end.close()
    # The batches are received on a thread of their own: the importing process
    # may be handing over the next batch while this one sends a large answer,
    # and each would wait for the other to read.
    batches: queue.Queue[Lines | None] = queue.Queue()
    receiver = threading.Thread(target=_receive, args=(connection, batches))
    receiver.start()
    try:
        while (lines := batches.get()) is not None:
            try:
                answer: Any = tuple(read_batch(lines, binary=True, **options))
            except Exception:  # handed to the importing process
                answer = traceback.format_exc()
            connection.send(answer)
    except OSError:  # the importing process closed its end
        return


def _receive(connection: Connection, batches: queue.Queue[Lines | None]) -> None:
    try:
        while True:
            batches.put(connection.recv())
    except (EOFError, OSError):  # the importing process closed its end
        batches.put(None)
