"""Reading transcript files in a process of their own: the importing process's
core is left to the native import the records go through.

A large transcript import spends most of its Python time reading the
transcripts (parsing each line, building each record and its tape, asking
the repository), and the importing process also hands the records to the
native import's parsing processes and stores them. A :class:`ReadingProcess`
reads the files' records there instead: the importing process streams each
file's bytes to it and takes back, in order, each record as its JSON line or
each line's refusal, exactly as :meth:`loader._Records.read` gives them in
line (several to a message).

Bounds: at most :data:`CHUNKS_WAITING` chunks of a file wait in the child, and
the child's answers wait in a pipe; a reading process that fails or stops
ends the file it was reading with one refusal naming why, and the files after
it are read in line.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import queue
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection
from typing import Any

# Chunks of a file (64 KiB each) read ahead of the reading process.
CHUNKS_WAITING = 64
# How often a waiting reading process looks whether the importing process
# is still there.
PARENT_CHECK_SECONDS = 1.0
# The child's records go back several to a message (a message a record was
# a wake-up of both processes a record): at most this many, or about this
# many bytes.
ANSWERS_A_MESSAGE = 64
MESSAGE_BYTES = 1024 * 1024
# A file whose first bytes reach this size is read in a process of its own;
# a smaller import is read in line (starting a process costs more).
PROCESS_BYTES = 1024 * 1024

# What a file's records are read by: (source, kind, the unread line types
# to count) -> each record's line number and JSON line, or the line and why
# it was refused.
Records = Callable[[Any, str, Counter[str]], Iterator[tuple[int, bytes | str]]]


class ReadingProcess:
    """A child process reading transcript files with ``records`` (a function
    of the importing process, run in the fork); ``state`` gives what the
    records' reading gathered besides them, sent back after each file, and
    ``merge`` takes it in the importing process."""

    @staticmethod
    def usable() -> bool:
        # A daemonic process (a pool's worker) may not start children.
        return not multiprocessing.current_process().daemon

    def __init__(
        self,
        records: Records,
        state: Callable[[], Any],
        merge: Callable[[Any], None],
    ) -> None:
        # fork: the child starts with the import's repository and settings
        # already read; it runs no query (the repository was opened before).
        context = multiprocessing.get_context("fork")
        self.connection, theirs = context.Pipe()
        self.records = records
        self.merge = merge
        self.process = context.Process(
            target=_serve,
            args=(theirs, self.connection, records, state, os.getpid()),
            name="replayhub-transcript-reader",
            daemon=True,
        )
        self.process.start()
        theirs.close()
        self.broken = ""

    def read(
        self, source: Any, kind: str, unread: Counter[str]
    ) -> Iterator[tuple[int, bytes | str]]:
        """The records of ``source`` read in the child, in order; the file's
        refusal (line 0) when the child failed or stopped while reading it.
        A child that stopped before the file leaves it to be read in line."""
        try:
            self.connection.send(("source", source.name, source.modified, kind))
        except OSError:
            self.process.join(timeout=5)
            self.broken = f"the reading process stopped ({self.process.exitcode})"
            yield from self.records(source, kind, unread)
            return
        feeder = threading.Thread(
            target=_feed, args=(self.connection, source.chunks), daemon=True
        )
        feeder.start()
        finished = False
        try:
            while True:
                try:
                    answer = self.connection.recv()
                except (EOFError, OSError):
                    self.process.join(timeout=5)
                    self.broken = (
                        "the process reading the file stopped (exit code "
                        f"{self.process.exitcode})"
                    )
                    yield 0, f"the file was not read to its end: {self.broken}"
                    return
                kind_of = answer[0]
                if kind_of == "records":
                    yield from answer[1]
                elif kind_of == "failed":
                    yield 0, f"the file was not read to its end: {answer[1]}"
                elif kind_of == "done":
                    unread.update(answer[1])
                    self.merge(answer[2])
                    finished = True
                    return
        finally:
            if not finished and self.process.is_alive():
                # The import stopped half way through the file: the child,
                # which may be waiting to send, stops too, and so the feeder.
                self.process.kill()
                self.broken = "the import stopped"
            feeder.join()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.connection.send(("stop",))
        self.connection.close()
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


def _feed(connection: Connection, chunks: Iterable[bytes]) -> None:
    """The file's bytes to the child, then the end of the file."""
    try:
        for chunk in chunks:
            connection.send(chunk)
        connection.send(("end",))
    except OSError:  # the child stopped: the reading thread says so
        return


class _SourceInChild:
    """A file as the child sees it: its name and time, its chunks as they
    arrive."""

    def __init__(self, name: str, modified: Any, chunks: Iterator[bytes]) -> None:
        self.name = name
        self.modified = modified
        self.chunks = chunks


def _serve(
    connection: Connection,
    inherited: Connection,
    records: Records,
    state: Callable[[], Any],
    parent: int,
) -> None:
    inherited.close()
    # What the importing process had loaded stays out of the collector's
    # sight here, as in the parsing processes: a file's sessions are held
    # until it ends, and each full collection their growth sets off would
    # walk all of Django too (a tenth of reading 10,000 sessions).
    gc.freeze()
    # Messages are received on a thread of their own, so the importing
    # process can send the next chunk while this one sends records.
    waiting: queue.Queue[Any] = queue.Queue(maxsize=CHUNKS_WAITING)
    # A daemon: it may wait on a pipe other processes still hold when the
    # child is told to stop.
    receiver = threading.Thread(
        target=_receive, args=(connection, waiting, parent), daemon=True
    )
    receiver.start()
    while (message := waiting.get()) is not None:
        if message[0] == "stop":
            return
        _, name, modified, kind = message
        chunks = _chunks(waiting)
        source = _SourceInChild(name, modified, chunks)
        unread: Counter[str] = Counter()
        answers: list[tuple[int, bytes | str]] = []
        size = 0
        failure = ""
        try:
            for answer in records(source, kind, unread):
                answers.append(answer)
                size += len(answer[1])
                if len(answers) >= ANSWERS_A_MESSAGE or size >= MESSAGE_BYTES:
                    connection.send(("records", answers))
                    answers, size = [], 0
        except Exception as error:  # handed to the importing process
            failure = _one_line(error)
        if answers:
            connection.send(("records", answers))
        if failure:
            connection.send(("failed", failure))
        for _ in chunks:  # what is left of the file after a failure
            pass
        connection.send(("done", dict(unread), state()))


def _one_line(error: Exception) -> str:
    """An error as one line: its type and its message's first line, bounded."""
    lines = str(error).strip().splitlines()
    said = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    return said if len(said) <= 300 else said[:299] + "…"


def _chunks(waiting: queue.Queue[Any]) -> Iterator[bytes]:
    while isinstance(item := waiting.get(), bytes):
        yield item
    if item is None:  # the importing process closed its end: for the loop
        waiting.put(None)


def _receive(connection: Connection, waiting: queue.Queue[Any], parent: int) -> None:
    try:
        while True:
            # Processes the import forked later hold copies of the importing
            # process's end, so its end of the pipe may never close: an
            # importing process that was killed is noticed by its pid.
            while not connection.poll(PARENT_CHECK_SECONDS):
                if os.getppid() != parent:
                    raise EOFError
            waiting.put(connection.recv())
    except (EOFError, OSError):  # the importing process closed its end
        waiting.put(None)
