"""Streaming, batched, idempotent import of native run records.

One line at a time is parsed and checked (:mod:`replayhub.ingest.native`); valid
records are stored in batches, each batch in its own transaction with one query
per project to find the external ids already stored. The same record again is a
duplicate, the same external id with other content a conflict: reported, never
written over. Invalid lines are reported and never stop the valid ones.

Memory is flat: nothing is kept across batches but counters and the first
:data:`REPORT_LIMIT` invalid lines and conflicts. A file interrupted half way
leaves whole batches stored; importing it again finishes the job.
"""

from __future__ import annotations

import itertools
import json
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from replayhub.ingest import arrays
from replayhub.ingest.copying import copy_head, copy_runs, copy_stream, copy_tail
from replayhub.ingest.lines import RecordLine, split_blocks
from replayhub.ingest.native import RecordError, stored_part
from replayhub.ingest.parsing import ParserProcess
from replayhub.ingest.rows import Lines, Packed, Parsed, Row, read_batch, unpack
from replayhub.models import Project, Run

BATCH_SIZE = 1000
# On PostgreSQL an import of more than one batch reads its lines in a process
# of its own (replayhub.ingest.parsing) while this one stores.
PARSER_PROCESS = True
READ_SIZE = 64 * 1024
# The summary lists at most this many invalid lines and conflicts; the totals
# count them all.
REPORT_LIMIT = 1000
# A batch can collide with a concurrent import of the same records; it is then
# classified again against what that import stored.
_ATTEMPTS = 3
_PROJECT_CACHE = 1000


@dataclass
class ImportSummary:
    """What an import did. :meth:`to_dict` is the documented summary object."""

    imported: int = 0
    duplicates: int = 0
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    invalid: list[dict[str, Any]] = field(default_factory=list)
    conflicts_total: int = 0
    invalid_total: int = 0
    preflight: dict[str, int] | None = None
    # Lines of agents' files of types the reader does not know, by type:
    # skipped knowingly, never invalid.
    unread_types: dict[str, int] = field(default_factory=dict)
    # The format the file looks like when every line failed in the one chosen.
    format_hint: str = ""
    # Not part of the summary object: why preflight left runs pending, and
    # which projects the records went to.
    preflight_errors: list[str] = field(default_factory=list)
    project_ids: set[int] = field(default_factory=set)

    def add_invalid(self, line: int, error: str) -> None:
        self.invalid_total += 1
        if len(self.invalid) < REPORT_LIMIT:
            self.invalid.append({"line": line, "error": error})

    def add_conflict(self, line: int, project: str, external_id: str) -> None:
        self.conflicts_total += 1
        if len(self.conflicts) < REPORT_LIMIT:
            self.conflicts.append(
                {"line": line, "project": project, "external_id": external_id}
            )

    @property
    def complete(self) -> bool:
        """Whether every record was stored or already there, unchanged."""
        return not (self.invalid_total or self.conflicts_total)

    def to_dict(self) -> dict[str, Any]:
        return {
            "imported": self.imported,
            "duplicates": self.duplicates,
            "conflicts": self.conflicts,
            "invalid": self.invalid,
            "conflicts_total": self.conflicts_total,
            "invalid_total": self.invalid_total,
            "preflight": self.preflight,
            "unread_types": self.unread_types,
            **({"format_hint": self.format_hint} if self.format_hint else {}),
        }


@dataclass(slots=True)
class _Item:
    line: int
    project: Project
    row: Row


@dataclass(slots=True)
class _Packed:
    """A batch a parsing process made into one COPY stream, every row of the
    import's ``project``: stored as it is, with no work a row here; iterated,
    its items, for classifying it."""

    project: Project
    packed: Packed

    def __len__(self) -> int:
        return len(self.packed.lines)

    def __iter__(self) -> Iterator[_Item]:
        project = self.project
        return (_Item(row.line, project, row) for row in unpack(self.packed))


# What is stored at once: a batch's items, or a batch packed.
_Batch = list[_Item] | _Packed


def read_chunks(stream: IO[bytes], size: int = READ_SIZE) -> Iterator[bytes]:
    while chunk := stream.read(size):
        yield chunk


# Called after each batch with the number of lines read and the summary so far.
Progress = Callable[[int, ImportSummary], None]


class Throttle:
    """True at most once every ``seconds``: for showing progress while work goes
    on without the showing costing more than the work."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.last = float("-inf")

    def __call__(self) -> bool:
        now = time.monotonic()
        if now - self.last < self.seconds:
            return False
        self.last = now
        return True


def import_stream(
    *,
    chunks: Iterable[bytes],
    project: Project | None = None,
    progress: Progress | None = None,
) -> ImportSummary:
    """Import a JSONL byte stream (a file, stdin, an upload, a request body).

    ``project`` is the project records go to when they do not name one, and the
    only one they may name when given.
    """
    blocks = split_blocks(chunks, max_line_bytes=settings.REPLAYHUB_MAX_RECORD_BYTES)
    summary = ImportSummary()
    with _Importer(summary, project, progress) as importer:
        for block in blocks:
            # Blank lines go with the others, and reading leaves them out.
            importer.add_lines(block)
    return summary


def import_lines(
    *,
    lines: Iterable[RecordLine],
    project: Project | None = None,
    progress: Progress | None = None,
) -> ImportSummary:
    summary = ImportSummary()
    with _Importer(summary, project, progress) as importer:
        for number, data, terminated in lines:
            if data is None or (data and not data.isspace()):
                importer.add_line(number, data, terminated)
    return summary


def import_body(
    *,
    chunks: Iterable[bytes],
    project: Project,
    progress: Progress | None = None,
) -> ImportSummary:
    """Import an HTTP request body: a JSON array of records, or JSONL.

    The first non-blank byte decides (looked for in the first
    :data:`READ_SIZE` bytes): ``[`` is an array, read whole (the caller bounds
    its size), anything else is JSONL, streamed. For an array, ``line`` in the
    summary is the 1-based position of the element.
    """
    chunks = iter(chunks)
    head, is_array = arrays.read_head(chunks, READ_SIZE)
    if not is_array:
        return import_stream(
            chunks=itertools.chain([head], chunks), project=project, progress=progress
        )
    summary = ImportSummary()
    with _Importer(summary, project, progress) as importer:
        for position, element in arrays.array_elements(head + b"".join(chunks)):
            if isinstance(element, RecordError):
                summary.add_invalid(position, str(element))
            else:
                importer.add_line(position, element, True)
    return summary


class _Importer:
    """Collects checked records into batches and stores them; a context manager.

    On PostgreSQL, outside a transaction, an import of more than one batch is
    stored by a :class:`_Writer` thread while this one parses on: the database
    stores one batch while Python parses another, instead of each waiting for
    the other. Otherwise each batch is stored when it is full.
    """

    def __init__(
        self,
        summary: ImportSummary,
        project: Project | None,
        progress: Progress | None = None,
    ) -> None:
        self.summary = summary
        self.progress = progress
        self.default = project
        # A record without a project caches its miss under None.
        self.projects: dict[str | None, Project | None] = {}
        if project is not None:
            self.projects[project.slug] = project
        self.max_prompt_bytes = settings.REPLAYHUB_MAX_PROMPT_BYTES
        self.max_line_bytes = settings.REPLAYHUB_MAX_RECORD_BYTES
        self.slug = project.slug if project is not None else None
        # COPY takes the columns in its binary form, made as each line is read.
        self.binary = connection.vendor == "postgresql"
        self.pending: Lines = []
        # What each row starts with when the parsing processes pack the
        # batches: the import's project named, on PostgreSQL.
        self.head: bytes | None = None
        self.parser: ParserProcess | None = None
        self.writer: _Writer | None = None
        self.statistics = _Statistics()
        self.optimistic = True

    def __enter__(self) -> _Importer:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        failed = error is not None
        try:
            if not failed:
                self.flush(last=True)
                while self.parser is not None and self.parser.waiting:
                    self.take(self.parser.take())
        except BaseException:
            failed = True
            raise
        finally:
            if self.parser is not None:
                self.parser.close()
            if failed and self.writer is not None:
                # Whole batches: the ones handed over are stored.
                self.writer.stop()
        if failed:
            return
        if self.writer is not None:
            self.writer.close()
        # Unknown projects are found when a batch is stored, after later lines
        # were parsed.
        self.summary.invalid.sort(key=lambda entry: entry["line"])

    def add_line(self, number: int, data: bytes | None, terminated: bool) -> None:
        """Take one line (None: over the size limit) into the batch; a full
        batch is read, and its records stored or the lines reported."""
        self.pending.append((number, data, terminated))
        if len(self.pending) >= BATCH_SIZE:
            self.flush()
            if self.progress is not None:
                self.progress(number, self.summary)

    def add_lines(self, lines: Lines) -> None:
        """:meth:`add_line` for each of ``lines``, without Python code for each."""
        self.pending += lines
        while len(self.pending) >= BATCH_SIZE:
            rest = self.pending[BATCH_SIZE:]
            del self.pending[BATCH_SIZE:]
            number = self.pending[-1][0]
            self.flush()
            self.pending = rest
            if self.progress is not None:
                self.progress(number, self.summary)

    def flush(self, *, last: bool = False) -> None:
        """Read the lines collected since the last batch and store their
        records, or hand them to the writer thread (started with the first
        full batch, as more may follow; an import that fits in one batch is
        stored in line)."""
        lines, self.pending = self.pending, []
        if not lines:
            return
        if (
            self.parser is None
            and not last
            and PARSER_PROCESS
            and _Writer.usable()
            and ParserProcess.usable()
        ):
            # Every row is then of the project the import is into (a record
            # naming another is refused): the children can make the batch's
            # COPY stream whole.
            if self.binary and self.default is not None:
                self.head = copy_head(self.default.pk)
            self.parser = ParserProcess(
                project=self.slug,
                max_prompt_bytes=self.max_prompt_bytes,
                max_line_bytes=self.max_line_bytes,
                head=self.head,
            )
        if self.parser is None:
            self.take(
                read_batch(
                    lines,
                    project=self.slug,
                    max_prompt_bytes=self.max_prompt_bytes,
                    max_line_bytes=self.max_line_bytes,
                    binary=self.binary,
                ),
                last=last,
            )
            return
        if self.parser.full():
            self.take(self.parser.take())
        # The import time of the batch's runs: when it was handed over.
        tail = copy_tail(timezone.now()) if self.head is not None else None
        self.parser.put(lines, tail)

    def take(self, parsed: Parsed, *, last: bool = False) -> None:
        for number, message in parsed.invalid:
            self.summary.add_invalid(number, message)
        items: _Batch
        if parsed.packed is not None and self.default is not None:
            items = _Packed(self.default, parsed.packed)
        else:
            items = self.resolve(parsed.rows)
        if not items:
            return
        if self.writer is None and not last and _Writer.usable():
            self.writer = _Writer(self)
        if self.writer is not None:
            self.writer.put(items)
        else:
            self.store(items)

    def store(self, items: _Batch) -> None:
        """Classify a batch and write its new runs, in one transaction.

        While the batches before were all new, a batch is first written whole
        without looking up stored hashes (in a savepoint when inside a
        transaction): the unique (project, external id) index refuses it if
        one of its records is stored already or repeated in it, and it is then
        rolled back and classified. A batch that collides with a concurrent
        import of the same ids is rolled back and classified again against what
        that import stored.
        """
        if self.optimistic:
            try:
                with transaction.atomic():
                    _write(items)
            except IntegrityError:
                pass
            else:
                self.account(items, items, 0, [])
                return
        if isinstance(items, _Packed):
            items = list(items)
        self.statistics.refresh()
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                with transaction.atomic():
                    fresh, duplicates, conflicts = _classify(items)
                    _write(fresh)
            except IntegrityError:
                if attempt == _ATTEMPTS:
                    raise
                continue
            self.account(items, fresh, duplicates, conflicts)
            # A file of records stored before is looked up batch by batch
            # rather than written twice.
            self.optimistic = not duplicates and not conflicts
            return

    def resolve(self, rows: list[Row]) -> list[_Item]:
        items = []
        for row in rows:
            try:
                items.append(_Item(row.line, self.project(row.project), row))
            except RecordError as error:
                self.summary.add_invalid(row.line, str(error))
        return items

    def project(self, slug: str | None) -> Project:
        if slug in self.projects:
            found = self.projects[slug]
        else:
            found = Project.objects.filter(slug=slug).first()
            if len(self.projects) < _PROJECT_CACHE:
                self.projects[slug] = found
        if found is None:
            raise RecordError(f"project: there is no project {json.dumps(slug)}")
        return found

    def account(
        self,
        items: _Batch,
        fresh: _Batch,
        duplicates: int,
        conflicts: list[_Item],
    ) -> None:
        self.statistics.grew(len(fresh))
        summary = self.summary
        summary.imported += len(fresh)
        summary.duplicates += duplicates
        for item in conflicts:
            summary.add_conflict(item.line, item.project.slug, item.row.external_id)
        if isinstance(items, _Packed):
            summary.project_ids.add(items.project.pk)
        else:
            summary.project_ids.update(item.project.pk for item in items)


class _Writer:
    """Stores an import's batches on a thread of its own, in order, with its own
    database connection, while the importing thread parses the next batch.

    One batch waits in the queue at most, so memory stays flat. An error in
    the writer surfaces in the importing thread at its next batch or at the end.

    Its batches commit without waiting for their WAL to reach the disk
    (``synchronous_commit`` off on its connection), and its last step waits
    for all of it at once (:func:`_make_durable`): when the import returns,
    every run it counts is as durable as with a flush per batch. Waiting once
    instead of once a batch keeps the server copying rather than flushing
    (about 100 flushes at 100,000 records). A crash of the server during the
    import may lose the batches of its last moments: the import then fails,
    and importing the file again stores them, as after any interruption.
    """

    @staticmethod
    def usable() -> bool:
        # Inside a transaction, the writer's own connection would see none of
        # the caller's uncommitted rows and commit outside its transaction.
        return connection.vendor == "postgresql" and not connection.in_atomic_block

    def __init__(self, importer: _Importer) -> None:
        self.importer = importer
        self.queue: queue.Queue[_Batch | None] = queue.Queue(maxsize=1)
        self.error: BaseException | None = None
        self.stopped = False
        self.thread = threading.Thread(
            target=self.run, name="replayhub-import-writer", daemon=True
        )
        self.thread.start()

    def run(self) -> None:
        try:
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SET synchronous_commit TO off")
            except BaseException as error:  # handed to the importing thread
                self.error = error
            while (items := self.queue.get()) is not None:
                if self.error is None:
                    try:
                        self.importer.store(items)
                    except BaseException as error:  # handed to the importing thread
                        self.error = error
            projects = self.importer.summary.project_ids
            if self.error is None and projects:
                try:
                    _make_durable(min(projects))
                except BaseException as error:  # handed to the importing thread
                    self.error = error
        finally:
            connection.close()

    def put(self, items: _Batch) -> None:
        if self.error is not None:
            self.close()
        self.queue.put(items)

    def close(self) -> None:
        """Wait for the batches handed over; raise what the writer raised."""
        self.stop()
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        if self.thread.is_alive():
            self.queue.put(None)
            self.thread.join()


def _make_durable(project_id: int) -> None:
    """Wait until the WAL of every transaction committed before is on disk.

    A commit waits for the WAL up to its own record, and so for all before
    it, only when it wrote WAL itself: a lock on the project's row does (the
    lock every run's foreign key takes at its commit)."""
    quote = connection.ops.quote_name
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL synchronous_commit TO on")
        cursor.execute(
            f"SELECT 1 FROM {quote(Project._meta.db_table)} "  # noqa: S608 -- names from the model
            f"WHERE {quote('id')} = %s FOR KEY SHARE",
            [project_id],
        )


def _as_integrity_error(error: BaseException) -> BaseException:
    """The IntegrityError the ORM would raise for psycopg's own unique violation
    (COPY bypasses Django's error wrapping); any other error unchanged."""
    if connection.vendor == "postgresql":
        from psycopg.errors import UniqueViolation

        if isinstance(error, UniqueViolation):
            return IntegrityError(str(error))
    return error


class _Statistics:
    """Keeps PostgreSQL's row estimate for the run table from falling far behind.

    The lookup of stored hashes must use the unique (project, external id)
    index. On a table that has grown much since it was last analyzed (the
    first big import into an empty table) the planner believes the project has
    a handful of runs and scans all of them instead, once per batch, which
    makes a large import quadratic. Analyzing before a lookup whenever the
    table has doubled since the estimate costs a few ANALYZEs per import at
    most, none for an import that is small next to the table, and none for
    one that never looks up (all its records new).
    """

    def __init__(self) -> None:
        self.enabled = connection.vendor == "postgresql"
        self.known: float | None = None
        self.added = 0

    def grew(self, rows: int) -> None:
        self.added += rows

    def refresh(self) -> None:
        """Analyze the table if it has doubled since the estimate."""
        if not self.enabled or not self.added:
            return
        table = Run._meta.db_table
        with connection.cursor() as cursor:
            if self.known is None:
                cursor.execute(
                    "SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [table]
                )
                self.known = max(cursor.fetchone()[0], 0)
            if self.added > max(self.known, BATCH_SIZE):
                # Only the key columns: the row count is what matters here,
                # and the wide text and JSON columns would make it slow.
                quote = connection.ops.quote_name
                cursor.execute(
                    f"ANALYZE {quote(table)} ({quote('project_id')}, "
                    f"{quote('external_id')})"
                )
                self.known += self.added
                self.added = 0


def _classify(batch: list[_Item]) -> tuple[list[_Item], int, list[_Item]]:
    """Split a batch into new records, duplicates and conflicts.

    One query per project finds the stored hashes; records earlier in the same
    batch count as stored, so a file repeating a record is handled the same.
    """
    wanted: dict[int, list[str]] = {}
    for item in batch:
        wanted.setdefault(item.project.pk, []).append(item.row.external_id)
    stored: dict[tuple[int, str], str] = {}
    for project_id, external_ids in wanted.items():
        for external_id, digest in _stored_hashes(project_id, external_ids):
            stored[(project_id, external_id)] = digest
    fresh: list[_Item] = []
    conflicts: list[_Item] = []
    duplicates = 0
    for item in batch:
        key = (item.project.pk, item.row.external_id)
        digest = stored.get(key)
        if digest is None:
            stored[key] = item.row.sha256
            fresh.append(item)
        elif digest == item.row.sha256:
            duplicates += 1
        else:
            conflicts.append(item)
    return fresh, duplicates, conflicts


def _stored_hashes(project_id: int, external_ids: list[str]) -> Iterable[tuple]:
    if connection.vendor != "postgresql":
        return Run.objects.filter(
            project_id=project_id, external_id__in=external_ids
        ).values_list("external_id", "record_sha256")
    # One array parameter rather than IN with a placeholder per id: building
    # and splitting a thousand placeholders cost more than the query itself.
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quote('external_id')}, {quote('record_sha256')} "  # noqa: S608 -- names from the model
            f"FROM {quote(Run._meta.db_table)} "
            f"WHERE {quote('project_id')} = %s AND {quote('external_id')} = ANY(%s)",
            [project_id, external_ids],
        )
        return cursor.fetchall()


def _write(items: _Batch) -> None:
    """Write the new runs: COPY on PostgreSQL, else ``bulk_create``."""
    if not items:
        return
    now = timezone.now()
    if connection.vendor != "postgresql":
        Run.objects.bulk_create([_run(item, now) for item in items])
        return
    try:
        if isinstance(items, _Packed):
            copy_stream(items.packed.data)
        else:
            copy_runs(items, now)
    except Exception as error:
        converted = _as_integrity_error(error)
        if converted is error:
            raise
        raise converted from error


def _run(item: _Item, now) -> Run:
    record = item.row.columns
    return Run(
        project=item.project,
        external_id=record.external_id,
        title=record.title,
        prompt=record.prompt,
        provider=record.provider,
        model=record.model,
        effort=record.effort,
        base_sha=record.base_sha,
        original_commit=record.original_commit,
        original_branch=record.original_branch,
        original_tests_passed=record.original_tests_passed,
        sandbox_image=record.sandbox_image,
        sandbox_config_sha256=record.sandbox_config_sha256,
        started_at=record.started_at,
        output=record.output,
        usage=record.usage,
        raw=stored_part(record.raw),
        record_sha256=record.sha256,
        imported_at=now,
    )
