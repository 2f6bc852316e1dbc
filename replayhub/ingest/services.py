"""Import workflows: one entry for the API, the upload page, its worker and the
command; the upload jobs a worker imports; and rollouts followed as a training
run writes them. Keyword-only functions; work for a worker is enqueued by task
name (``replayhub.celery``)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from django.conf import settings
from django.core.files import File
from django.db.models import Q
from django.utils import timezone

from replayhub.celery import Task, enqueue
from replayhub.git.mirrors import is_remote
from replayhub.ingest import follow, jobs, verifiers
from replayhub.ingest.importer import (
    ImportSummary,
    import_body,
    import_stream,
    read_chunks,
)
from replayhub.ingest.lines import split_lines
from replayhub.ingest.preflight import (
    PreflightResult,
    preflight_defer,
    preflight_pending,
    remote_projects,
)
from replayhub.ingest.transcripts import loader, swebench
from replayhub.ingest.transcripts.detect import format_hint
from replayhub.ingest.verifiers import RolloutSummary
from replayhub.lib.files import open_regular
from replayhub.models import FollowSource, ImportFormat, ImportJob, Project

logger = logging.getLogger(__name__)


class PreflightMode(StrEnum):
    """How much of the preflight :func:`runs_import` does before it returns."""

    # The new runs stay pending.
    SKIP = "skip"
    # Someone waits on the answer (a request): up to REPLAYHUB_SYNC_PREFLIGHT_MAX
    # runs here, the rest by a worker; a project on a remote wholly by a
    # worker, since its mirror is fetched first.
    BOUNDED = "bounded"
    # Every pending run here: a worker or a command.
    ALL = "all"


class ImportProgress(Protocol):
    """What a long import reports as it goes: a terminal's status line, a job's
    row. Calls come from the importing thread."""

    def importing(self, lines: int, summary: ImportSummary) -> None:
        """After each batch: the lines read and the counts so far."""

    def imported(self, summary: ImportSummary) -> None:
        """Once every record is stored or refused; preflight comes next."""

    def preflighting(self, done: int, total: int) -> None:
        """After each chunk of preflight: the runs done and the runs to do."""


def runs_import(
    *,
    project: Project | None,
    source: Iterable[bytes],
    preflight: PreflightMode,
    allow_array: bool = False,
    progress: ImportProgress | None = None,
    format: str = ImportFormat.NATIVE,
    name: str = "",
    original: str = "",
) -> ImportSummary:
    """Import native run records, then preflight the pending runs they touched.

    With a transcript format (``loader.TRANSCRIPTS``, or ``auto``) the stream
    is one transcript file for ``project`` (needed), named ``name`` (a Claude
    Code file's name says which session it continues).

    With ``format="verifiers"`` the stream is one file of verifiers rollout
    records for ``project`` (needed), every line read; rollouts need no
    preflight.

    ``source`` is the JSONL file as byte chunks; with ``allow_array`` (a request
    body) it may be a JSON array of records instead. ``project`` is where
    records without one go, and the only project they may name when given
    (``allow_array`` needs one).

    Preflight covers every pending run of the projects the records went to and
    of ``project``, runs left pending by an earlier import included. With
    :attr:`PreflightMode.BOUNDED`, the runs still pending are queued for a
    worker once the caller's transaction commits; so are those of a project on
    a remote, whose mirror git would fetch, never in a request (they wait with
    ``preflight.FETCH_WAIT`` as their reason, counted as ``deferred``). The
    summary's ``preflight`` counts are ``None`` when nothing was preflighted.
    """
    importing = progress.importing if progress is not None else None
    head, source = loader.peek(source)
    if format == ImportFormat.VERIFIERS:
        if project is None:
            raise ValueError("rollout records name no project: give one")
        summary: ImportSummary = verifiers.import_chunks(
            project=project, chunks=source, progress=importing
        )
        _hint(summary, name, head, format)
        if progress is not None:
            progress.imported(summary)
        return summary
    if format in loader.TRANSCRIPTS or format == loader.AUTO:
        if project is None:
            raise ValueError("transcripts name no project: give one")
        summary = loader.import_sources(
            project=project,
            # A body has no file time: formats that would take theirs take
            # the base commit's, so sending the same body again is harmless.
            sources=[loader.Source(name or "upload", source)],
            format=format,
            progress=importing,
            original=original,
        )
    elif allow_array:
        if project is None:
            raise ValueError("a body that may be a JSON array needs a project")
        summary = import_body(chunks=source, project=project, progress=importing)
    else:
        summary = import_stream(chunks=source, project=project, progress=importing)
    _hint(summary, name, head, format)
    if progress is not None:
        progress.imported(summary)

    project_ids = summary.project_ids | ({project.pk} if project is not None else set())
    if preflight == PreflightMode.SKIP or not project_ids:
        return summary
    bounded = preflight == PreflightMode.BOUNDED
    later = remote_projects(project_ids) if bounded else set()
    result = PreflightResult(pending=0)
    if project_ids - later:
        result = preflight_pending(
            project_ids=project_ids - later,
            limit=settings.REPLAYHUB_SYNC_PREFLIGHT_MAX if bounded else None,
            progress=progress.preflighting if progress is not None else None,
        )
    if later:
        result.deferred = preflight_defer(project_ids=later)
        result.pending = (result.pending or 0) + result.deferred
    summary.preflight = result.to_dict()
    summary.preflight_errors = result.errors
    if bounded and result.pending:
        for project_id in sorted(project_ids):
            enqueue(Task.PREFLIGHT_PENDING, project_id)
    return summary


def _hint(summary: ImportSummary, name: str, head: bytes, format: str) -> None:
    """Name the format the file looks like when nothing of it was read in the
    one chosen: every line failed, or (a Markdown or whole-document reader)
    none held a record (``auto`` already chose by the same look)."""
    failed = not (summary.imported or summary.duplicates or summary.conflicts_total)
    if failed and format != loader.AUTO:
        summary.format_hint = format_hint(name, head, format)


def imports_in_worker(project: Project, format: str) -> bool:
    """Whether importing ``format`` into ``project`` must wait for a worker:
    transcripts are completed from the project's history, and a project on a
    git remote would be fetched, which never happens in a web request."""
    transcript = format in loader.TRANSCRIPTS or format == loader.AUTO
    return transcript and is_remote(project.repo_path)


def import_job_create(
    *,
    project: Project,
    upload: File,
    actor,
    format: str = ImportFormat.NATIVE,
    original: str = "",
) -> ImportJob:
    """Keep an upload too large to import in the request; a worker imports it
    once the caller's transaction commits."""
    job = jobs.save_upload(
        upload=upload, project=project, user=actor, format=format, original=original
    )
    enqueue(Task.IMPORT_UPLOAD, job.pk)
    return job


def import_job_run(*, job_id: int) -> None:
    """Import a job's file and preflight every new run; the job's row follows.

    Safe to call twice: a job is claimed with a conditional UPDATE (queued, or
    started by a worker gone silent), so a second delivery while it runs does
    nothing, and importing the file again stores nothing twice. The file is
    removed once the job has ended, done or failed.
    """
    job = jobs.claim(job_id=job_id)
    if job is None:
        return
    row = jobs.JobProgress(job)
    try:
        with open(job.path, "rb") as stream:
            summary = runs_import(
                project=job.project,
                source=read_chunks(stream),
                preflight=PreflightMode.ALL,
                progress=row,
                format=job.format,
                name=job.filename,
                original=job.original,
            )
    except OSError as error:
        row.fail(f"the uploaded file could not be read ({error.strerror}).")
    except verifiers.NoRolloutSettings as error:
        row.fail(str(error))
    except Exception as error:
        logger.exception("import job %s failed", job.pk)
        row.fail(f"the import stopped: {type(error).__name__}: {error}")
    else:
        row.finish(summary)
    Path(job.path).unlink(missing_ok=True)


def import_job_requeue_stale() -> int:
    """Queue again the jobs a worker should have taken or finished by now; how
    many were queued."""
    job_ids = jobs.due_again()
    for job_id in job_ids:
        enqueue(Task.IMPORT_UPLOAD, job_id)
    return len(job_ids)


def transcripts_import(
    *,
    project: Project,
    paths: Iterable[Path],
    format: str,
    instances: Path | None = None,
    preflight: PreflightMode = PreflightMode.ALL,
    progress: ImportProgress | None = None,
    original: str = "",
) -> ImportSummary:
    """Import transcript files into ``project`` (``format`` a transcript
    format or ``auto``), then preflight its pending runs. ``instances`` is a
    SWE-bench dataset file (JSONL) the predictions and trajectories refer to;
    ``original`` the commit that is the one run's original."""
    known: dict[str, dict] | None = None
    problems: list[dict] = []
    if instances is not None:
        with open_regular(instances) as stream:
            known, errors = swebench.read_instances(
                split_lines(
                    read_chunks(stream),
                    max_line_bytes=settings.REPLAYHUB_MAX_RECORD_BYTES,
                )
            )
        problems = [
            {"file": str(instances), "line": e.line, "error": e.error} for e in errors
        ]
    summary = loader.import_sources(
        project=project,
        sources=loader.file_sources(paths),
        format=format,
        instances=known,
        progress=progress.importing if progress is not None else None,
        original=original,
    )
    for problem in problems:
        summary.invalid_total += 1
        summary.invalid.append(problem)
    if progress is not None:
        progress.imported(summary)
    if preflight == PreflightMode.SKIP:
        return summary
    result = preflight_pending(
        project_ids={project.pk},
        progress=progress.preflighting if progress is not None else None,
    )
    summary.preflight = result.to_dict()
    summary.preflight_errors = result.errors
    return summary


def rollouts_import(
    *,
    project: Project,
    paths: Iterable[Path] = (),
    chunks: Iterable[bytes] | None = None,
    progress: Callable[[int, ImportSummary], None] | None = None,
) -> RolloutSummary:
    """Import verifiers record files (index-selected where they have an
    index) or a stream of one file's bytes into ``project``."""
    if chunks is not None:
        return verifiers.import_chunks(
            project=project, chunks=chunks, progress=progress
        )
    return verifiers.import_files(project=project, paths=paths, progress=progress)


def follow_source_get(*, project: Project, pattern: str) -> FollowSource:
    """The source following ``pattern`` for ``project``, made the first time.
    A relative pattern is made absolute, so workers elsewhere find it."""
    pattern = os.path.abspath(pattern)
    return FollowSource.objects.get_or_create(project=project, pattern=pattern)[0]


def rollouts_follow(*, source: FollowSource) -> RolloutSummary:
    """One follow pass over ``source``, now."""
    return follow.follow_pass(source)


def follow_claimed(*, source_id: int) -> RolloutSummary | None:
    """A follow pass, unless one started less than half a period ago (a
    second delivery, or a pass still running): one conditional UPDATE claims
    the pass."""
    now = timezone.now()
    recent = now - timedelta(seconds=settings.REPLAYHUB_FOLLOW_SECONDS / 2)
    claimed = (
        FollowSource.objects.filter(pk=source_id, enabled=True)
        .filter(Q(last_pass_at__isnull=True) | Q(last_pass_at__lt=recent))
        .update(last_pass_at=now)
    )
    if not claimed:
        return None
    source = FollowSource.objects.select_related("project").get(pk=source_id)
    return follow.follow_pass(source)


def follow_due() -> int:
    """Queue a pass for every enabled source; how many were queued."""
    ids = list(FollowSource.objects.filter(enabled=True).values_list("pk", flat=True))
    for source_id in ids:
        enqueue(Task.FOLLOW_SOURCE, source_id, on_commit=False)
    return len(ids)
