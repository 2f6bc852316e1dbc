"""Transcript files imported as native run records.

Each file is read as a stream of lines by its format's parser; each record
made is completed from the project repository
(:func:`replayhub.ingest.transcripts.repository.fill`), given the fields it
inferred (``inferred``) and what could not be found (``import_notes``), and
handed to the native importer as one line: duplicates, conflicts, batches and
the compressed storage of ``Run.raw`` are the native import's. A record's
``line`` in the summary is the line its session starts on, with the ``file``.

A run whose original is a patch gets the patch stored beside it
(``RunPatch``) once the import has stored the runs; the project's repository
is only read. The patches wait in memory until then, so each is bounded
(``REPLAYHUB_MAX_PATCH_BYTES``) and so are an import's together
(``REPLAYHUB_MAX_IMPORT_PATCH_BYTES``): a patch past either is its record's
one-line refusal, naming the figures.
"""

from __future__ import annotations

import itertools
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

import orjson
from django.conf import settings

from replayhub.git.scratch import GitError, repository_git_dir
from replayhub.ingest.importer import (
    REPORT_LIMIT,
    ImportSummary,
    Progress,
    import_lines,
    read_chunks,
)
from replayhub.ingest.lines import RecordLine, split_lines
from replayhub.ingest.transcripts import (
    aider,
    atif,
    batches,
    claude_code,
    codex,
    documents,
    gemini_cli,
    mini_swe_agent,
    opencode,
    opencode_storage,
    swebench,
)
from replayhub.ingest.transcripts.base_at_start import find_base
from replayhub.ingest.transcripts.detect import HEAD_BYTES, detect
from replayhub.ingest.transcripts.enrich import enrich
from replayhub.ingest.transcripts.reading import PROCESS_BYTES, ReadingProcess
from replayhub.ingest.transcripts.repository import (
    Lookups,
    PatchRefused,
    fill,
    full_sha,
    parent,
)
from replayhub.ingest.transcripts.shapes import LineError, Parsed, RecordDraft
from replayhub.lib.files import open_regular
from replayhub.models import ImportFormat, Preflight, Project, Run, RunPatch

AUTO = "auto"
# External ids asked of the database at once: when the patches are stored,
# and for the runs a predictions or trajectories file made before.
PATCH_BATCH = 500
ONE_ORIGINAL = (
    "an original commit was named on import, and it is one run's: this run was "
    "not imported (import it apart, or without naming the original)"
)
TRANSCRIPTS = frozenset(
    {
        ImportFormat.CLAUDE_CODE,
        ImportFormat.CODEX,
        ImportFormat.AIDER,
        ImportFormat.SWE_AGENT,
        ImportFormat.OPENHANDS,
        ImportFormat.SWEBENCH,
        ImportFormat.MINI_SWE_AGENT,
        ImportFormat.GEMINI_CLI,
        ImportFormat.ATIF,
        ImportFormat.OPENCODE,
    }
)

# The formats of a run's two files in a mini-swe-agent batch (:mod:`batches`).
_ONE_RUN_TWO_FILES = frozenset({ImportFormat.SWEBENCH, ImportFormat.MINI_SWE_AGENT})
# A trajectory of a run imported before from its prediction enriches it.
_ENRICHING = frozenset({batches.Before.ENRICH, batches.Before.ENRICH_DIFFERS})
# The readers of runs on SWE-bench instances: each takes what its files leave
# out (the base, the task) from the dataset's instances (``--instances``).
_SWE_BENCH_READERS: dict[str, Callable[..., Iterator[Parsed]]] = {
    ImportFormat.SWEBENCH: swebench.parse,
    ImportFormat.SWE_AGENT: documents.parse_swe_agent,
    ImportFormat.MINI_SWE_AGENT: mini_swe_agent.parse,
}


@dataclass
class TranscriptSummary(ImportSummary):
    """An import summary with what the import says of a file or a line
    without refusing it: why runs were imported without a base (a session
    naming no branch whose checkout could not be told), the predictions left
    to their trajectories and the batch runner's files passed over
    (:mod:`batches`). ``notes``, the first of them, each with its file and
    line, and their total; ``from_trajectories``, the predictions already
    read from their trajectories; ``enriched``, the runs imported before
    from their predictions that their trajectories enriched."""

    notes: list[dict[str, Any]] = field(default_factory=list)
    notes_total: int = 0
    from_trajectories: int = 0
    enriched: int = 0

    @classmethod
    def of(cls, summary: ImportSummary) -> TranscriptSummary:
        return cls(**{f.name: getattr(summary, f.name) for f in fields(summary)})

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "notes": self.notes,
            "notes_total": self.notes_total,
            "from_trajectories": self.from_trajectories,
            "enriched": self.enriched,
        }


class Source:
    """One file to import: its name and its bytes, read when asked."""

    def __init__(
        self,
        name: str,
        chunks: Iterable[bytes],
        modified: datetime | None = None,
        path: Path | None = None,
    ) -> None:
        self.name = name
        self.chunks = chunks
        self.modified = modified
        # A file on disk, which can be read again from its start.
        self.path = path

    def again(self) -> Source:
        """The file opened again, to be read from its start (OSError when it
        cannot be)."""
        assert self.path is not None
        stream = open_regular(self.path)
        return Source(self.name, _closing(stream), self.modified, self.path)


def _closing(stream: BinaryIO) -> Iterator[bytes]:
    with stream:
        yield from read_chunks(stream)


def file_sources(paths: Iterable[Path]) -> Iterator[Source]:
    """Regular files opened one at a time (never a link), streamed. An
    OpenCode session's info file in OpenCode's storage is its session joined
    as an export, and that session's message and part files among ``paths``
    are left to it (:mod:`opencode_storage`)."""
    given = list(paths)
    joined = opencode_storage.pieces(given)
    for path in given:
        if path in joined:
            continue
        root = opencode_storage.storage_root(path)
        if root is not None:
            limit = settings.REPLAYHUB_MAX_RECORD_BYTES
            with open_regular(path) as stream:
                stat = os.fstat(stream.fileno())
            modified = datetime.fromtimestamp(stat.st_mtime).astimezone()
            data = opencode_storage.export(path, root, limit)
            yield Source(str(path), iter([data]), modified)
            continue
        with open_regular(path) as stream:
            stat = os.fstat(stream.fileno())
            modified = datetime.fromtimestamp(stat.st_mtime).astimezone()
            yield Source(str(path), read_chunks(stream), modified, path)


def parse_source(
    source: Source,
    format: str,
    *,
    instances: dict[str, dict[str, Any]] | None = None,
) -> Iterator[Parsed]:
    limit = settings.REPLAYHUB_MAX_RECORD_BYTES
    lines = split_lines(source.chunks, max_line_bytes=limit)
    name = source.name
    if format == ImportFormat.CLAUDE_CODE:
        return claude_code.parse(lines, name=name)
    if format == ImportFormat.CODEX:
        return codex.parse(lines, name=name)
    if format == ImportFormat.AIDER:
        return aider.parse(lines, name=name)
    if format == ImportFormat.OPENHANDS:
        return documents.parse_openhands(lines, name=name, limit=limit)
    if (reader := _SWE_BENCH_READERS.get(format)) is not None:
        return reader(
            lines,
            name=name,
            limit=limit,
            instances=instances,
            file_time=source.modified,
        )
    if format == ImportFormat.GEMINI_CLI:
        return gemini_cli.parse(lines, name=name, limit=limit)
    if format == ImportFormat.ATIF:
        return atif.parse(lines, name=name, limit=limit, file_time=source.modified)
    if format == ImportFormat.OPENCODE:
        return opencode.parse(lines, name=name, limit=limit)
    raise ValueError(f"not a transcript format: {format}")


def import_sources(
    *,
    project: Project,
    sources: Iterable[Source],
    format: str,
    instances: dict[str, dict[str, Any]] | None = None,
    progress: Progress | None = None,
    original: str = "",
) -> ImportSummary:
    """Import transcript files (``format`` one of :data:`TRANSCRIPTS`, or
    ``auto`` to judge each file by its name and first bytes) into
    ``project``; native record files pass through under ``auto``.
    ``original`` names the commit that is the original of the one run the
    import makes (a run after it is refused: it names one run's original).

    Under ``auto``, files of SWE-bench predictions are read after the others,
    so that a prediction of a run a mini-swe-agent trajectory made is left to
    it (:mod:`batches`). A prediction or a trajectory whose run was imported
    before from the run's other file is left to that run, and said; a
    trajectory enriches its prediction's run."""
    repository = _Repository(project)
    trajectories = batches.Trajectories()
    records = _Records(
        repository, instances=instances, original=original, trajectories=trajectories
    )
    reading = _Reading(repository, records, format=format, original=original)
    try:
        imported = import_lines(
            lines=reading.lines(sources), project=project, progress=progress
        )
    finally:
        reading.close()
    summary = TranscriptSummary.of(imported)
    notes = [*repository.base_notes, *trajectories.notes(), *reading.passed_over]
    summary.notes = [
        {"file": name, "line": line, "note": note}
        for name, line, note in notes[:REPORT_LIMIT]
    ]
    summary.notes_total = len(notes)
    summary.from_trajectories = trajectories.read_from_trajectories
    summary.duplicates += trajectories.duplicates
    summary.enriched = trajectories.enriched
    _store_patches(project, repository.patches)
    summary.unread_types = dict(reading.unread)
    for entry in [*summary.invalid, *summary.conflicts]:
        entry["file"], entry["line"] = reading.where[entry["line"]]
    for name, line, error in reading.problems:
        summary.invalid_total += 1
        if len(summary.invalid) < REPORT_LIMIT:
            summary.invalid.append({"file": name, "line": line, "error": error})
    summary.invalid.sort(key=lambda entry: (entry["file"], entry["line"]))
    summary.project_ids.add(project.pk)
    return summary


class _Reading:
    """The import's files as the native import's lines, numbered across the
    import: each file's format told (``auto``), its records read, in line or
    in a reading process; where each line came from (``where``), the files
    and lines refused (``problems``) and passed over (``passed_over``) kept
    for the summary."""

    def __init__(
        self, repository: _Repository, records: _Records, *, format: str, original: str
    ) -> None:
        self.repository = repository
        self.records = records
        self.format = format
        self.where: dict[int, tuple[str, int]] = {}
        self.problems: list[tuple[str, int, str]] = []
        self.passed_over: list[tuple[str, int, str]] = []
        self.unread: Counter[str] = Counter()
        self.numbers = itertools.count(1)
        self.reader: ReadingProcess | None = None
        # Whether a reading process may still start: only before the importer
        # has a line, so no thread or process of the import is there to fork.
        self.may_start = not original and ReadingProcess.usable()

    def lines(self, sources: Iterable[Source]) -> Iterator[RecordLine]:
        predictions: list[Source] = []
        for source in sources:
            kind = self.format
            if kind == AUTO:
                head, source.chunks = peek(source.chunks)
                kind = detect(source.name, head) or ""
                if not kind and (note := batches.runner_file(source.name)):
                    self.passed_over.append((source.name, 0, note))
                    continue
                if not kind:
                    self.problem(source, "the format was not recognised")
                    continue
                if kind == ImportFormat.SWEBENCH and source.path is not None:
                    predictions.append(source)
                    continue
            if kind == ImportFormat.NATIVE:
                self.may_start = False
                limit = settings.REPLAYHUB_MAX_RECORD_BYTES
                for line in split_lines(source.chunks, max_line_bytes=limit):
                    number = next(self.numbers)
                    self.where[number] = (source.name, line.number)
                    yield RecordLine(number, line.data, line.terminated)
            elif kind == ImportFormat.VERIFIERS or kind not in TRANSCRIPTS:
                self.problem(source, f"{kind} files are not read here")
            else:
                yield from self.transcript(source, kind, self.read(source, kind))
        for source in predictions:
            try:
                again = source.again()
            except OSError as error:
                self.problem(source, f"the file could not be read: {error.strerror}")
                continue
            # Read in line once a trajectory was: the prediction of its run is
            # left to it, which only this process knows of.
            if self.records.trajectories.submissions:
                found = self.records.read(again, ImportFormat.SWEBENCH, self.unread)
            else:
                found = self.read(again, ImportFormat.SWEBENCH)
            yield from self.transcript(again, ImportFormat.SWEBENCH, found)

    def problem(self, source: Source, error: str) -> None:
        self.problems.append((source.name, 0, error))

    def read(self, source: Source, kind: str) -> Iterator[tuple[int, bytes | str]]:
        """The file's records, read in a process of their own when the
        import's first transcript file is large (``PROCESS_BYTES``), else in
        line."""
        repository = self.repository
        if self.may_start:
            self.may_start = False
            head, source.chunks = peek(source.chunks, PROCESS_BYTES)
            if len(head) >= PROCESS_BYTES and repository.open() is not None:
                self.reader = ReadingProcess(
                    self.records.read, repository.state, repository.merge
                )
        if self.reader is not None and not self.reader.broken:
            return self.reader.read(source, kind, self.unread)
        return self.records.read(source, kind, self.unread)

    def transcript(
        self, source: Source, kind: str, found: Iterator[tuple[int, bytes | str]]
    ) -> Iterator[RecordLine]:
        if kind in _ONE_RUN_TWO_FILES:
            found = self.not_stored(source, kind, found)
        for at, data in found:
            if isinstance(data, str):
                self.problems.append((source.name, at, data))
                continue
            number = next(self.numbers)
            self.where[number] = (source.name, at)
            yield RecordLine(number, data, True)

    def not_stored(
        self, source: Source, kind: str, found: Iterator[tuple[int, bytes | str]]
    ) -> Iterator[tuple[int, bytes | str]]:
        """The records of a predictions or trajectories file but those left
        to the run of their external id imported before from the run's other
        file (:func:`batches.stored_before`), looked up a batch at a time; a
        trajectory left to its prediction's run enriches it (:mod:`enrich`)."""
        trajectories = self.records.trajectories
        while chunk := list(itertools.islice(found, PATCH_BATCH)):
            records = [
                orjson.loads(data) if isinstance(data, bytes) else None
                for _, data in chunk
            ]
            ids = [record["external_id"] for record in records if record]
            project = self.repository.project
            stored = {
                external_id: (made_from, output, enriched_from)
                for external_id, made_from, output, enriched_from in (
                    Run.objects.filter(project=project, external_id__in=ids)
                ).values_list(
                    "external_id",
                    "raw__transcript__format",
                    "output",
                    "raw__transcript__trajectory_sha256",
                )
            }
            for (at, data), record in zip(chunk, records, strict=True):
                if record is not None:
                    where = (source.name, at)
                    found_before = stored.get(record["external_id"])
                    before = trajectories.left_to_stored(record, where, found_before)
                    if before in _ENRICHING:
                        outcome = enrich(project, record, batches.digest(record))
                        trajectories.enrichment(where, before, outcome)
                    if before is not batches.Before.IMPORT:
                        continue
                    if kind == ImportFormat.MINI_SWE_AGENT:
                        trajectories.saw(record)
                yield at, data

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()


class _Records:
    """Each record of a transcript file as its JSON line, or the line and
    why it is refused: what :func:`import_sources` imports, in line or in a
    reading process."""

    def __init__(
        self,
        repository: _Repository,
        *,
        instances: dict[str, dict[str, Any]] | None,
        original: str,
        trajectories: batches.Trajectories,
    ) -> None:
        self.repository = repository
        self.instances = instances
        self.original = original
        self.trajectories = trajectories
        self.made = itertools.count(1)
        self.limit = settings.REPLAYHUB_MAX_RECORD_BYTES

    def read(
        self, source: Source, kind: str, unread: Counter[str]
    ) -> Iterator[tuple[int, bytes | str]]:
        limit = self.limit
        for parsed in parse_source(source, kind, instances=self.instances):
            if isinstance(parsed, LineError):
                yield parsed.line, parsed.error
                continue
            if kind == ImportFormat.SWEBENCH and self.trajectories.take(
                parsed, source.name
            ):
                continue
            unread.update(parsed.unread)
            if self.original and next(self.made) > 1:
                yield parsed.line, ONE_ORIGINAL
                continue
            data = self.repository.complete(parsed, source.name, self.original)
            if isinstance(data, str):
                yield parsed.line, data
                continue
            if len(data) > limit:
                yield (
                    parsed.line,
                    f"{parsed.record['external_id']}: the record with its "
                    f"transcript is {len(data):,} bytes, above the limit "
                    f"of {limit:,}",
                )
                continue
            yield parsed.line, data


def _store_patches(
    project: Project, patches: dict[tuple[str, str], tuple[str, str]]
) -> None:
    """Store each patch with the run made of its record: the run of its
    external id whose original is the commit the patch made (a run that was
    there already with another original keeps its own).

    A preflight of another import into the project may have read one of
    these runs before its patch was here, and found its original in no
    repository: such a run is pending again, for the preflight that follows."""
    ids = sorted({external_id for external_id, _ in patches})
    for start in range(0, len(ids), PATCH_BATCH):
        runs = Run.objects.filter(
            project=project, external_id__in=ids[start : start + PATCH_BATCH]
        ).values_list("pk", "external_id", "original_commit")
        made = [
            RunPatch(run_id=pk, patch=found[0], tree=found[1])
            for pk, external_id, commit in runs
            if (found := patches.get((external_id, commit))) is not None
        ]
        RunPatch.objects.bulk_create(made, ignore_conflicts=True, batch_size=100)
        Run.objects.filter(
            pk__in=[patch.run_id for patch in made], preflight=Preflight.UNREPRODUCIBLE
        ).update(preflight=Preflight.PENDING, preflight_reason="")


def peek(
    chunks: Iterable[bytes], size: int = HEAD_BYTES
) -> tuple[bytes, Iterable[bytes]]:
    """A stream's first ``size`` bytes or so (by default what ``detect``
    reads), and the stream whole again."""
    iterator = iter(chunks)
    taken = []
    held = 0
    while held < size and (chunk := next(iterator, None)) is not None:
        taken.append(chunk)
        held += len(chunk)
    return b"".join(taken), itertools.chain(taken, iterator)


class _Repository:
    """The project repository, opened once per import when a record needs it."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.git_dir: Path | None = None
        self.lookups: Lookups | None = None
        self.problem = ""
        # (external id, original commit) -> (patch, tree), and their bytes.
        self.patches: dict[tuple[str, str], tuple[str, str]] = {}
        self.patch_bytes = 0
        # Why a run was imported without a base, said in the summary:
        # (file, line, note).
        self.base_notes: list[tuple[str, int, str]] = []
        self._notes_sent = 0

    def state(self) -> tuple[list[tuple[str, int, str]], dict, int]:
        """What reading files gathered besides their records, for
        :meth:`merge` in the importing process: the base notes since the
        last call, the patches and their bytes."""
        notes = self.base_notes[self._notes_sent :]
        self._notes_sent = len(self.base_notes)
        return notes, self.patches, self.patch_bytes

    def merge(self, state: tuple[list[tuple[str, int, str]], dict, int]) -> None:
        notes, self.patches, self.patch_bytes = state
        self.base_notes += notes

    def open(self) -> Path | None:
        if self.git_dir is None and not self.problem:
            try:
                # A project on a remote is read from this host's mirror,
                # fetched once per import: a transcript names recent commits.
                self.git_dir = repository_git_dir(self.project.repository(refresh=True))
                self.lookups = Lookups(self.git_dir)
            except (GitError, OSError) as error:
                self.problem = f"the project repository could not be read: {error}"
        return self.git_dir

    def complete(
        self, draft: RecordDraft, name: str, original: str = ""
    ) -> bytes | str:
        """The record as one JSON line, or why it cannot be imported;
        ``original`` is the commit named on import as the run's original."""
        search = draft.search
        if original:
            refused = self._name_original(draft, original)
            if refused:
                return refused
        wanted = (
            search.patch is not None
            or search.commits
            or search.find_base
            or search.find_original
        )
        git_dir = self.open() if wanted else None
        if wanted and git_dir is None:
            draft.notes.append(self.problem)
        elif git_dir is not None:
            try:
                # Bytes a patch file held that are not UTF-8 come as escapes.
                size = len((search.patch or "").encode("utf-8", "surrogateescape"))
            except UnicodeEncodeError:
                return (
                    f"{search.patch_label}: the patch holds a lone surrogate "
                    "escape, which is no text git can apply"
                )
            refused = self._patch_room(search.patch_label, size)
            if refused:
                return refused
            try:
                if not original:
                    self._base_at_start(draft, git_dir, name)
                fill(draft, git_dir, self.lookups)
            except PatchRefused as error:
                return f"{search.patch_label}: {error}"
            except GitError as error:
                draft.notes.append(f"the project repository could not be read: {error}")
            if draft.applied is not None:
                key = (draft.record["external_id"], draft.record["original_commit"])
                if key not in self.patches:
                    self.patch_bytes += size
                self.patches[key] = draft.applied
        record = draft.record
        if original and "base_sha" not in record:
            self._base_from_original(draft)
        if "started_at" not in record:
            # A file with no times of its own, sent without a file time (an
            # upload, the API), and no base commit whose date could stand in.
            return (
                "the run has no start time: the file records none, and it came "
                "with no file time and no base commit to date it by"
            )
        record["transcript"]["file"] = os.path.basename(name)
        if draft.inferred:
            record["inferred"] = draft.inferred
        if draft.notes:
            record["import_notes"] = draft.notes
        try:
            return orjson.dumps(record)
        except orjson.JSONEncodeError as error:
            # A number past 64 bits, or text with a lone surrogate escape.
            return f"the session holds a value no run can store ({error})"

    def _base_at_start(self, draft: RecordDraft, git_dir: Path, name: str) -> None:
        """A session naming no branch: the base its checkout stood at when it
        started, or why there is none, said in the summary too."""
        search = draft.search
        if search.find_base and not search.branch and "base_sha" not in draft.record:
            note = find_base(draft, git_dir, self.project.default_branch, self.lookups)
            if note:
                self.base_notes.append((name, draft.line, note))

    def _patch_room(self, label: str, size: int) -> str:
        """Why a patch of ``size`` bytes is not taken, or ""."""
        most = settings.REPLAYHUB_MAX_PATCH_BYTES
        if size > most:
            return (
                f"{label}: the submitted patch is {size:,} bytes, above the "
                f"limit of {most:,} bytes a patch"
            )
        total = settings.REPLAYHUB_MAX_IMPORT_PATCH_BYTES
        if self.patch_bytes + size > total:
            return (
                f"{label}: the submitted patch ({size:,} bytes) would bring this "
                f"import's patches to {self.patch_bytes + size:,} bytes, above "
                f"the limit of {total:,} bytes an import"
            )
        return ""

    def _name_original(self, draft: RecordDraft, original: str) -> str:
        """Sets the run's original to the commit named on import; why not."""
        git_dir = self.open()
        if git_dir is None:
            return self.problem
        try:
            full = full_sha(git_dir, original)
        except GitError as error:
            return f"the project repository could not be read: {error}"
        if full is None:
            return (
                f"the original commit {original[:64]!r} named on import is not "
                "a commit of the project repository"
            )
        draft.infer("original_commit", full, "named on import (--original)")
        # The named commit is the original, whatever the file names or holds.
        draft.search.find_original = False
        draft.search.commits = []
        draft.search.patch = None
        return ""

    def _base_from_original(self, draft: RecordDraft) -> None:
        git_dir = self.open()
        found = parent(git_dir, draft.record["original_commit"]) if git_dir else None
        if found:
            draft.infer(
                "base_sha",
                found,
                "the parent of the original commit named on import; no base "
                "was found from the session",
            )
