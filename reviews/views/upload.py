"""The upload page: an admin imports a JSONL file of native run records or
of verifiers rollout records.

A file imported in the request is answered with a redirect to the page that
shows its summary (Post/Redirect/Get): the form stays one entry of the
browser's history, so Back returns to it, and reloading or going Forward to
the summary shows it again without importing the file a second time.
"""

from __future__ import annotations

import re
import secrets
import string
from datetime import datetime
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import permission_required
from django.core.exceptions import SuspiciousOperation, ValidationError
from django.core.files.uploadhandler import FileUploadHandler, SkipFile
from django.http import HttpRequest, HttpResponse, QueryDict
from django.http.multipartparser import MultiPartParserError
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HTMX_STOP_POLLING, HttpResponseClientRedirect

from replayhub.ingest.services import (
    PreflightMode,
    import_job_create,
    imports_in_worker,
    runs_import,
)
from replayhub.ingest.verifiers import rollout_settings_problem
from replayhub.models import ImportFormat, ImportJob, Project
from reviews.forms import unclipped
from reviews.views import HtmxHttpRequest

IMPORT_RUNS = "replayhub.add_run"
# The summary of the last file imported in the request, kept in the session
# for the page the import redirects to; the next import replaces it. Its lists
# are capped (importer.REPORT_LIMIT): at 1,000 invalid lines and 1,000
# conflicts the session grows by about 20 KB, 2.4 ms more to read it on each
# of that admin's requests; a usual summary is a few hundred bytes.
LAST_IMPORT = "upload_last_import"
# What the importer looks a named original up by: a commit's hex name, whole
# (40 digits for SHA-1, 64 for SHA-256) or abbreviated to at least 4.
COMMIT = re.compile(r"[0-9a-fA-F]{4,64}")
COMMIT_CHARS = 64


class UploadForm(forms.Form):
    project = forms.ModelChoiceField(
        queryset=Project.objects.all(),
        to_field_name="slug",
        help_text="The project the runs are imported into; a record naming "
        "another project is refused.",
    )
    format = forms.ChoiceField(
        choices=ImportFormat.choices,
        initial=ImportFormat.NATIVE,
        required=False,
        help_text="Run records: ReplayHub's own JSON lines (docs/formats.md). "
        "verifiers: Trace.to_record() lines, each rollout's seeds derived by the "
        "project's rollout settings. Every other format reads one agent's own "
        "file (a Claude Code session, a Codex rollout, an Aider chat history, a "
        "Gemini CLI session, a SWE-agent, mini-swe-agent, OpenHands or ATIF "
        "trajectory, SWE-bench predictions carrying their instance's base_commit "
        "and problem_statement).",
    )
    original = unclipped(
        forms.CharField(
            label="Original commit",
            required=False,
            max_length=COMMIT_CHARS,
            help_text="Only for an agent's own file whose run imported "
            "unreproducible because no commit of the session was found (its run "
            "page says why): the commit that holds the run's change, by its sha "
            "(4 to 64 hexadecimal characters).",
        )
    )
    file = forms.FileField(label="File", allow_empty_file=True)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["file"].help_text = (
            f"Up to {filesizeformat(settings.REPLAYHUB_UPLOAD_MAX_BYTES)}; a prompt "
            f"may be up to {filesizeformat(settings.REPLAYHUB_MAX_PROMPT_BYTES)}. A "
            f"file over {filesizeformat(settings.REPLAYHUB_UPLOAD_INLINE_MAX_BYTES)} "
            "is imported in the background, with its progress on its own page."
        )

    def refuse_size(self, limit: int) -> None:
        """Say beside File that the file is too large, keeping what else was
        posted (and any other field's error)."""
        self.errors.pop("file", None)
        self.add_error(
            "file",
            f"The file is larger than the limit of {filesizeformat(limit)}. Split "
            "it, or import it with manage.py import_runs.",
        )

    def clean_original(self) -> str:
        value: str = self.cleaned_data["original"]
        if not value or COMMIT.fullmatch(value):
            return value.lower()
        if all(char in string.hexdigits for char in value):
            raise ValidationError(
                "A commit is 4 to 64 hexadecimal characters "
                f"(this one has {len(value)})."
            )
        # A branch or a ref never reaches git from here: only a hex name does.
        raise ValidationError(
            "A commit is 4 to 64 hexadecimal characters (0-9, a-f), not a branch "
            "or ref name: give its sha (git rev-parse NAME prints it)."
        )

    def clean(self) -> dict:
        cleaned = super().clean() or {}
        format = cleaned.get("format") or ImportFormat.NATIVE
        if cleaned.get("original") and format in (
            ImportFormat.NATIVE,
            ImportFormat.VERIFIERS,
        ):
            self.add_error(
                "original", "Only an agent's own file takes an original commit."
            )
        project = cleaned.get("project")
        if (
            format == ImportFormat.VERIFIERS
            and project is not None
            and (problem := rollout_settings_problem(project))
        ):
            self.add_error("project", problem)
        return cleaned


# Exempt only so the size check can run before the CSRF check reads the body
# (the upload would already be on disk by then); the inner view checks CSRF.
@csrf_exempt
@require_http_methods(["GET", "POST"])
@permission_required(IMPORT_RUNS, raise_exception=True)
def runs_upload(request: HtmxHttpRequest) -> HttpResponse:
    limit = settings.REPLAYHUB_UPLOAD_MAX_BYTES
    declared = request.META.get("CONTENT_LENGTH", "")
    # The multipart envelope adds a little to the file itself.
    if (
        request.method == "POST"
        and declared.isascii()
        and declared.isdigit()
        and int(declared) > limit + 65536
    ):
        form = UploadForm(_fields_only(request))
        form.refuse_size(limit)
        return _page(request, form, status=413)
    return _runs_upload(request, limit)


class _DiscardFiles(FileUploadHandler):
    """Reads past every file in the body: nothing of it reaches memory or disk."""

    def new_file(self, *args, **kwargs) -> None:
        raise SkipFile

    def receive_data_chunk(self, raw_data: bytes, start: int) -> None:
        return None

    def file_complete(self, file_size: int) -> None:
        return None


def _fields_only(request: HttpRequest) -> QueryDict:
    """The posted fields of a body too large to store, its files skipped; empty
    if the body is malformed."""
    request.upload_handlers = [_DiscardFiles(request)]
    try:
        return request.POST
    except (MultiPartParserError, SuspiciousOperation):
        return QueryDict()


@csrf_protect
def _runs_upload(request: HtmxHttpRequest, limit: int) -> HttpResponse:
    if request.method != "POST":
        return _shown(request)
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _page(request, form, status=400)
    upload = form.cleaned_data["file"]
    if upload.size > limit:
        form.refuse_size(limit)
        return _page(request, form, status=413)
    project = form.cleaned_data["project"]
    format = form.cleaned_data["format"] or ImportFormat.NATIVE
    if upload.size > settings.REPLAYHUB_UPLOAD_INLINE_MAX_BYTES or imports_in_worker(
        project, format
    ):
        job = import_job_create(
            project=project,
            upload=upload,
            actor=request.user,
            format=format,
            original=form.cleaned_data["original"],
        )
        url = reverse("runs_upload_job", args=[job.pk])
        return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    # The summary links to the runs imported from this instant on.
    started = timezone.now()
    # chunks() reads the uploaded file piece by piece: memory stays flat.
    summary = runs_import(
        project=project,
        source=upload.chunks(),
        preflight=PreflightMode.BOUNDED,
        format=format,
        name=upload.name or "",
        original=form.cleaned_data["original"],
    )
    token = secrets.token_urlsafe(8)
    request.session[LAST_IMPORT] = {
        "token": token,
        "summary": summary.to_dict(),
        "filename": upload.name or "",
        "project": project.pk,
        "format": format,
        "started": started.isoformat(),
    }
    url = f"{reverse('runs_upload')}?import={token}"
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _shown(request: HttpRequest) -> HttpResponse:
    """The form, with the summary of the import ``?import=`` names when it is
    the session's last one."""
    token = request.GET.get("import")
    if not token:
        return _page(request, UploadForm())
    last: dict[str, Any] = request.session.get(LAST_IMPORT) or {}
    project = (
        Project.objects.filter(pk=last["project"]).first()
        if last.get("token") == token
        else None
    )
    if project is None:
        return _page(request, UploadForm(), forgotten=True)
    format = last["format"]
    # A fresh form: submitting the same file again is harmless (all duplicates).
    return _page(
        request,
        UploadForm(initial={"project": project, "format": format}),
        summary=last["summary"],
        filename=last["filename"],
        project=project,
        imported_after=datetime.fromisoformat(last["started"]),
        read_as=format,
        read_as_label=ImportFormat(format).label,
    )


def _page(request: HttpRequest, form: UploadForm, *, status: int = 200, **context):
    context.update(
        page="upload",
        form=form,
    )
    return render(request, "reviews/upload.html", context, status=status)


@require_GET
@permission_required(IMPORT_RUNS, raise_exception=True)
def upload_job(request: HtmxHttpRequest, job_id: int) -> HttpResponse:
    """An upload being imported by a worker: its progress, then its summary.

    The progress part polls itself every second and stops (286) once the job
    has finished.
    """
    job = get_object_or_404(ImportJob.objects.select_related("project"), pk=job_id)
    context = {"page": "upload", "job": job, "project": job.project}
    if request.htmx:
        response = render(request, "reviews/upload_job.html#progress", context)
        if job.finished:
            response.status_code = HTMX_STOP_POLLING
        return response
    return render(request, "reviews/upload_job.html", context)
