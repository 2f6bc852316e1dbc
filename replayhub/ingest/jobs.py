"""Uploaded files imported by a worker: a file too large to import in the request.

The web process saves the upload under the var directory and queues
:func:`run`; the job's row carries the progress the upload page polls. A worker
lost half way gives the task back and the next attempt imports the file again,
which is harmless (what was stored is found as duplicates).
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db.models import Q
from django.utils import timezone

from replayhub.models import ImportJob, ImportStatus, Project

from .importer import Summary, Throttle, import_stream, read_chunks
from .preflight import preflight_pending

logger = logging.getLogger(__name__)

# The progress written to the job's row at most this often.
PROGRESS_INTERVAL = 0.5


def save_upload(upload: UploadedFile, project: Project, user) -> ImportJob:
    """Keep the uploaded file where a worker can read it; a job to import it."""
    folder = Path(settings.VAR_DIR) / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{uuid.uuid4().hex}.jsonl"
    with path.open("xb") as out:
        for chunk in upload.chunks():
            out.write(chunk)
    return ImportJob.objects.create(
        project=project,
        filename=(upload.name or "upload.jsonl")[:255],
        size_bytes=upload.size,
        path=str(path),
        created_by=user if user.is_authenticated else None,
    )


def run(job_id: int) -> None:
    """Import the job's file, preflight the new runs, record the summary.

    The job is claimed with a conditional UPDATE: queued, or started by a
    worker that has gone silent. A second delivery while it runs does nothing.
    """
    now = timezone.now()
    claimed = (
        ImportJob.objects.filter(pk=job_id)
        .filter(Q(status=ImportStatus.QUEUED) | _stale(now))
        .update(status=ImportStatus.IMPORTING, updated_at=now)
    )
    if not claimed:
        return
    job = ImportJob.objects.select_related("project").get(pk=job_id)
    rows = _Progress(job.pk)
    due = Throttle(PROGRESS_INTERVAL)

    def importing(lines: int, summary: Summary) -> None:
        if due():
            rows.update(lines_read=lines, **_counts(summary))

    def preflighting(done: int, total: int) -> None:
        if due():
            rows.update(preflight_done=done, preflight_total=total)

    try:
        with open(job.path, "rb") as stream:
            summary = import_stream(
                chunks=read_chunks(stream), project=job.project, progress=importing
            )
        rows.update(status=ImportStatus.PREFLIGHT, **_counts(summary))
        result = preflight_pending(
            project_ids=summary.project_ids | {job.project_id}, progress=preflighting
        )
        summary.preflight = result.to_dict()
    except OSError as error:
        _fail(rows, f"the uploaded file could not be read ({error.strerror}).")
    except Exception as error:
        logger.exception("import job %s failed", job.pk)
        _fail(rows, f"the import stopped: {type(error).__name__}: {error}")
    else:
        rows.update(
            status=ImportStatus.DONE,
            summary=summary.to_dict(),
            finished_at=timezone.now(),
            **_counts(summary),
        )
    Path(job.path).unlink(missing_ok=True)


def requeue_stale() -> int:
    """Queue again the jobs a worker should have taken or finished by now.

    A job still queued is moved on, so it is queued again once a period, not
    every time this runs; a silent started job is left as it is, for
    :func:`run` to claim.
    """
    now = timezone.now()
    stale = now - timedelta(seconds=settings.REPLAYHUB_IMPORT_STALE_SECONDS)
    waiting = ImportJob.objects.filter(status=ImportStatus.QUEUED, updated_at__lt=stale)
    ids = list(waiting.values_list("pk", flat=True))
    waiting.filter(pk__in=ids).update(updated_at=now)
    ids += ImportJob.objects.filter(_stale(now)).values_list("pk", flat=True)
    from replayhub import tasks

    for job_id in ids:
        tasks.import_upload.delay_on_commit(job_id)
    return len(ids)


def _stale(now) -> Q:
    silent = now - timedelta(seconds=settings.REPLAYHUB_IMPORT_STALE_SECONDS)
    running = [ImportStatus.IMPORTING, ImportStatus.PREFLIGHT]
    return Q(status__in=running, updated_at__lt=silent)


class _Progress:
    """Updates of one job's row; each one shows the job is alive."""

    def __init__(self, job_id: int) -> None:
        self.rows = ImportJob.objects.filter(pk=job_id)

    def update(self, **fields) -> None:
        self.rows.update(updated_at=timezone.now(), **fields)


def _counts(summary: Summary) -> dict[str, int]:
    return {
        "imported": summary.imported,
        "duplicates": summary.duplicates,
        "invalid": summary.invalid_total,
    }


def _fail(rows, message: str) -> None:
    rows.update(
        status=ImportStatus.FAILED, error=message[:2000], finished_at=timezone.now()
    )
