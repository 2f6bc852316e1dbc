"""Uploaded files imported by a worker: a file too large to import in the request.

The web process saves the upload under the var directory and a worker imports it
(:func:`replayhub.ingest.services.import_job_run`); the job's row carries the
progress the upload page polls. A worker lost half way gives the task back and
the next attempt imports the file again, which is harmless (what was stored is
found as duplicates).
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.db.models import Q
from django.utils import timezone

from replayhub.ingest.importer import ImportSummary, Throttle
from replayhub.models import ImportJob, ImportStatus, Project

# The progress written to the job's row at most this often.
PROGRESS_INTERVAL = 0.5


def save_upload(
    *, upload: File, project: Project, user, format: str = "native", original: str = ""
) -> ImportJob:
    """Keep the uploaded file where a worker can read it; a job to import it."""
    folder = Path(settings.VAR_DIR) / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{uuid.uuid4().hex}.jsonl"
    with path.open("xb") as out:
        for chunk in upload.chunks():
            out.write(chunk)
    # A received upload, or a request body held in a file, has a size.
    assert upload.size is not None
    return ImportJob.objects.create(
        project=project,
        filename=(upload.name or "upload.jsonl")[:255],
        format=format,
        original=original[:64],
        size_bytes=upload.size,
        path=str(path),
        created_by=user if user.is_authenticated else None,
    )


def claim(*, job_id: int) -> ImportJob | None:
    """The job, now importing; None when it is not this caller's to import.

    A conditional UPDATE: a job queued, or started by a worker that has gone
    silent, is taken; one a live worker is importing, or one finished, is not.
    """
    now = timezone.now()
    claimed = (
        ImportJob.objects.filter(pk=job_id)
        .filter(Q(status=ImportStatus.QUEUED) | _stale(now))
        .update(status=ImportStatus.IMPORTING, updated_at=now)
    )
    if not claimed:
        return None
    return ImportJob.objects.select_related("project").get(pk=job_id)


def due_again() -> list[int]:
    """The jobs a worker should have taken or finished by now, to queue again.

    A job still queued is moved on, so it is queued again once a period, not
    every time this runs; a silent started job is left as it is, for
    :func:`claim` to take.
    """
    now = timezone.now()
    stale = now - timedelta(seconds=settings.REPLAYHUB_IMPORT_STALE_SECONDS)
    waiting = ImportJob.objects.filter(status=ImportStatus.QUEUED, updated_at__lt=stale)
    ids = list(waiting.values_list("pk", flat=True))
    waiting.filter(pk__in=ids).update(updated_at=now)
    ids += ImportJob.objects.filter(_stale(now)).values_list("pk", flat=True)
    return ids


def _stale(now) -> Q:
    silent = now - timedelta(seconds=settings.REPLAYHUB_IMPORT_STALE_SECONDS)
    running = [ImportStatus.IMPORTING, ImportStatus.PREFLIGHT]
    return Q(status__in=running, updated_at__lt=silent)


class JobProgress:
    """A claimed job's row as its import goes on: progress at most every
    :data:`PROGRESS_INTERVAL`, then the summary or the reason it failed. Each
    update shows the job is alive."""

    def __init__(self, job: ImportJob) -> None:
        self.rows = ImportJob.objects.filter(pk=job.pk)
        self.due = Throttle(PROGRESS_INTERVAL)

    def importing(self, lines: int, summary: ImportSummary) -> None:
        if self.due():
            self.update(lines_read=lines, **_counts(summary))

    def imported(self, summary: ImportSummary) -> None:
        self.update(status=ImportStatus.PREFLIGHT, **_counts(summary))

    def preflighting(self, done: int, total: int) -> None:
        if self.due():
            self.update(preflight_done=done, preflight_total=total)

    def finish(self, summary: ImportSummary) -> None:
        self.update(
            status=ImportStatus.DONE,
            summary=summary.to_dict(),
            finished_at=timezone.now(),
            **_counts(summary),
        )

    def fail(self, message: str) -> None:
        self.update(
            status=ImportStatus.FAILED,
            error=message[:2000],
            finished_at=timezone.now(),
        )

    def update(self, **fields) -> None:
        self.rows.update(updated_at=timezone.now(), **fields)


def _counts(summary: ImportSummary) -> dict[str, int]:
    return {
        "imported": summary.imported,
        "duplicates": summary.duplicates,
        "invalid": summary.invalid_total,
    }
