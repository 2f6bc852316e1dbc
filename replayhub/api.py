"""The HTTP API: producers push runs with an ingest token; people read evidence.

``POST /api/v1/projects/<slug>/runs`` authenticates with a per-project bearer
token and answers with the import summary of ``docs/formats.md``. The ``GET``
endpoints use the browser session and the same permissions as the pages. Every
answer is JSON, errors included: an API answers 401, it never redirects to a
login page.
"""

from __future__ import annotations

import re
import tempfile
from typing import IO, Any

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.files import File
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from replayhub import roles
from replayhub.ingest.importer import READ_SIZE, ImportSummary, read_chunks
from replayhub.ingest.services import (
    PreflightMode,
    import_job_create,
    imports_in_worker,
    runs_import,
)
from replayhub.ingest.tokens import Denied, token_authenticate
from replayhub.ingest.transcripts import atif_export
from replayhub.ingest.verifiers import rollout_settings_problem
from replayhub.lib import boundedjson
from replayhub.models import (
    Budget,
    Comparison,
    ImportFormat,
    ImportJob,
    Project,
    Replay,
    Run,
    Tape,
    TestOutcome,
)
from replayhub.replicates import standing

# Bodies up to this size stay in memory while they are checked; larger ones are
# spooled to a temporary file.
_SPOOL_IN_MEMORY = 1024 * 1024
_BIG_TEXTS = ("diff_of_diffs", "original_patch", "replay_patch")


def _error(status: int, message: str, **extra: Any) -> JsonResponse:
    return JsonResponse({"error": message, **extra}, status=status)


# The token is the credential: no session and no cookie is involved, so there is
# nothing for a cross-site request to ride on.
@login_not_required
@csrf_exempt
@require_POST
def runs_create(request: HttpRequest, slug: str) -> JsonResponse:
    token = token_authenticate(
        authorization=request.headers.get("Authorization", ""), slug=slug
    )
    if isinstance(token, Denied):
        response = _error(token.status, token.message)
        if token.status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="replayhub"'
        return response

    format = request.GET.get("format", ImportFormat.NATIVE)
    if format not in ImportFormat.values:
        return _error(
            400,
            f"format: {format[:40]!r} is not one of {', '.join(ImportFormat.values)}",
        )
    original = request.GET.get("original", "")
    if original and format in (ImportFormat.NATIVE, ImportFormat.VERIFIERS):
        return _error(
            400, "original: only an agent's own file (a transcript format) takes it"
        )
    if len(original) > 64:
        return _error(400, "original: a commit sha is at most 64 characters")
    if format == ImportFormat.VERIFIERS and (
        problem := rollout_settings_problem(token.project)
    ):
        return _error(400, problem)
    limit = settings.REPLAYHUB_API_MAX_BODY_BYTES
    declared = request.META.get("CONTENT_LENGTH", "")
    if not (declared.isascii() and declared.isdigit()):
        return _error(411, "send a Content-Length header (chunked bodies are refused)")
    if int(declared) > limit:
        return _error(413, f"the body is larger than the limit of {limit:,} bytes")
    if int(declared) == 0:
        return _error(400, "the body is empty: send JSONL or a JSON array of records")

    with tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY) as body:
        size = 0
        # Counted while reading too, whatever the header said.
        while chunk := request.read(READ_SIZE):
            size += len(chunk)
            if size > limit:
                return _error(
                    413, f"the body is larger than the limit of {limit:,} bytes"
                )
            body.write(chunk)
        body.seek(0)
        if imports_in_worker(token.project, format):
            return _import_queued(request, token.project, body, format, original)
        summary = runs_import(
            project=token.project,
            source=read_chunks(body),
            allow_array=format == ImportFormat.NATIVE,
            preflight=PreflightMode.BOUNDED,
            format=format,
            # A transcript's file name (a Claude Code session file's names the
            # session it continues).
            name=request.GET.get("name", "")[:255],
            original=original,
        )
        named = _one_run(token.project, body, format, summary)
    payload = summary.to_dict()
    if named is not None:
        payload["run"] = named
    if summary.invalid_total:
        payload["error"] = (
            f"{summary.invalid_total} of the records are invalid and were not "
            f"imported; {_the_others(summary)}"
        )
        return JsonResponse(payload, status=400)
    if summary.conflicts_total:
        payload["error"] = (
            f"{summary.conflicts_total} of the records conflict with stored runs "
            f"of the same external id and were not imported; {_the_others(summary)}"
        )
        return JsonResponse(payload, status=409)
    return JsonResponse(payload, status=201 if summary.imported else 200)


def _the_others(summary: ImportSummary) -> str:
    """What became of the records that were not refused, as the upload page
    says it."""
    if summary.imported:
        return f"the other {summary.imported} were imported"
    if summary.duplicates:
        return "the others were stored already"
    return "nothing was imported"


def _one_run(
    project: Project, body: IO[bytes], format: str, summary: ImportSummary
) -> dict[str, Any] | None:
    """The run a body of one native record was stored as (or already was):
    its id, external id and page, so that a sender (``replayhub-record``) can
    name it. None for any other body: many records, or some refused."""
    if (
        format != ImportFormat.NATIVE
        or summary.imported + summary.duplicates != 1
        or not summary.complete
    ):
        return None
    body.seek(0)
    try:
        # Already read once by the import, within the same limit.
        record = boundedjson.loads(
            body.read(), max_bytes=settings.REPLAYHUB_API_MAX_BODY_BYTES
        )
    except ValueError:
        return None
    if isinstance(record, list) and len(record) == 1:
        record = record[0]
    external_id = record.get("external_id") if isinstance(record, dict) else None
    if not isinstance(external_id, str):
        return None
    found = Run.objects.filter(project=project, external_id=external_id)
    run_id = found.values_list("pk", flat=True).first()
    if run_id is None:
        return None
    return {
        "id": run_id,
        "external_id": external_id,
        "url": reverse("reviews:run_detail", args=[run_id]),
    }


def _import_queued(
    request: HttpRequest, project: Project, body: Any, format: str, original: str
) -> JsonResponse:
    """A transcript for a project on a git remote is completed from the
    project's history, which only a worker fetches: the body is kept as an
    import job and the answer says where to follow it."""
    name = request.GET.get("name", "")[:255] or "upload"
    job = import_job_create(
        project=project,
        upload=File(body, name=name),
        actor=request.user,
        format=format,
        original=original,
    )
    url = reverse("api_import_job", args=[project.slug, job.pk])
    return JsonResponse(
        {"job": job.pk, "status": job.status, "url": url},
        status=202,
        headers={"Location": url},
    )


@login_not_required
@require_GET
def import_job(request: HttpRequest, slug: str, job_id: int) -> JsonResponse:
    """An import job of the token's project: its status and, once done, its
    summary."""
    token = token_authenticate(
        authorization=request.headers.get("Authorization", ""), slug=slug
    )
    if isinstance(token, Denied):
        return _error(token.status, token.message)
    job = ImportJob.objects.filter(pk=job_id, project=token.project).first()
    if job is None:
        return _error(404, f"there is no import job {job_id} in {slug}")
    answer: dict[str, Any] = {"job": job.pk, "status": job.status}
    if job.error:
        answer["error"] = job.error
    if job.summary:
        answer["summary"] = job.summary
    return JsonResponse(answer)


def _session_denied(request: HttpRequest, permission: str) -> JsonResponse | None:
    if not request.user.is_authenticated:
        return _error(401, "log in first: this endpoint uses the browser session")
    if not request.user.has_perm(permission):
        return _error(403, "you do not have permission to read this")
    return None


# Session-authenticated, but answers 401 itself rather than redirecting.
@login_not_required
@require_GET
def run_detail(request: HttpRequest, run_id: int) -> JsonResponse:
    answer = run_data(request, run_id)
    return answer if isinstance(answer, JsonResponse) else JsonResponse(answer)


def run_data(request: HttpRequest, run_id: int) -> dict[str, Any] | JsonResponse:
    """The run endpoint's answer as data, or its error answer: the people's
    side adds to the data without reading back JSON it did not write."""
    if denied := _session_denied(request, "replayhub.view_run"):
        return denied
    run = Run.objects.select_related("project").filter(pk=run_id).first()
    if run is None:
        return _error(404, f"there is no run {run_id}")
    return _run_json(run)


@login_not_required
@require_GET
def replay_detail(request: HttpRequest, replay_id: int) -> JsonResponse:
    answer = replay_data(request, replay_id)
    return answer if isinstance(answer, JsonResponse) else JsonResponse(answer)


def replay_data(request: HttpRequest, replay_id: int) -> dict[str, Any] | JsonResponse:
    """The replay endpoint's answer as data, or its error answer."""
    if denied := _session_denied(request, roles.VIEW_REPLAYS):
        return denied
    full = request.GET.get("full") == "1"
    replay = (
        Replay.objects.select_related("run", "project").filter(pk=replay_id).first()
    )
    if replay is None:
        return _error(404, f"there is no replay {replay_id}")
    return _replay_json(
        replay, full=full, with_money=request.user.has_perm(roles.VIEW_MONEY)
    )


def _run_json(run: Run) -> dict[str, Any]:
    return {
        "id": run.pk,
        "project": run.project.slug,
        "external_id": run.external_id,
        "title": run.title,
        "prompt": run.prompt,
        "provider": run.provider,
        "model": run.model,
        "effort": run.effort,
        "base_sha": run.base_sha or None,
        "original_commit": run.original_commit or None,
        "original_branch": run.original_branch,
        "original_tests_passed": run.original_tests_passed,
        "sandbox": {
            "image": run.sandbox_image or None,
            "config_sha256": run.sandbox_config_sha256 or None,
        },
        "started_at": run.started_at,
        "output": run.output,
        "usage": run.usage,
        "record_sha256": run.record_sha256,
        "imported_at": run.imported_at,
        "preflight": run.preflight,
        "preflight_reason": run.preflight_reason,
        "provenance": run.provenance,
        "raw": run.record,
        "source": run.source,
        "reward": run.reward,
        # A rollout's seeds, in trajectory order (reproduce --seed N).
        "seeds": [
            {
                "number": seed.number,
                "key": seed.key,
                "kind": seed.kind,
                "anchor": seed.anchor,
                "anchor_node": seed.anchor_node,
                "branch": seed.branch,
                "token_count": seed.token_count,
                "snapshot": seed.snapshot or None,
                "messages": seed.messages,
            }
            for seed in run.seeds.order_by("number")
        ],
        "replays": [
            {
                "id": replay.pk,
                "attempt": replay.attempt,
                "tier": replay.tier,
                "status": replay.status,
                "verdict": replay.verdict or None,
                "reason_code": replay.reason_code or None,
                "created_at": replay.created_at,
            }
            for replay in run.replays.order_by("created_at", "pk")
        ],
        "replicates": _replicates_json(run),
    }


def _replicates_json(run: Run) -> dict[str, Any]:
    """The run's samples and standing (``replicates.standing``)."""
    budget = Budget.objects.filter(project_id=run.project_id).first()
    policy = budget.replicate_policy() if budget else None
    return standing.as_json(standing.run_replicates(run, policy), policy)


def _replay_json(replay: Replay, *, full: bool, with_money: bool) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": replay.pk,
        "run": replay.run_id,
        "project": replay.project.slug,
        "external_id": replay.run.external_id,
        "tier": replay.tier,
        "status": replay.status,
        "phase": replay.phase,
        "attempt": replay.attempt,
        "trigger": replay.trigger,
        "verdict": replay.verdict or None,
        "reason_code": replay.reason_code or None,
        "reason": replay.reason,
        "evidence": replay.evidence,
        "provenance": replay.provenance,
        "agent_exit_code": replay.agent_exit_code,
        "usage": replay.usage,
        "tokens": replay.tokens,
        "sandbox_seconds": replay.sandbox_seconds,
        "created_at": replay.created_at,
        "started_at": replay.started_at,
        "finished_at": replay.finished_at,
        "comparison": _comparison_json(replay, full=full),
        "test_outcomes": [
            _outcome_json(outcome, full=full)
            for outcome in TestOutcome.objects.filter(replay=replay)
            .order_by("tree", "attempt")
            .defer(*(() if full else ("output_tail",)))
        ],
    }
    if with_money:
        data["cost_usd"] = replay.cost_usd
    if full:
        data["agent_output"] = replay.agent_output
        data["agent_output_truncated"] = replay.agent_output_truncated
    return data


def _comparison_json(replay: Replay, *, full: bool) -> dict[str, Any] | None:
    # The big texts are loaded only when asked for.
    queryset = Comparison.objects.filter(replay=replay)
    if not full:
        queryset = queryset.defer(*_BIG_TEXTS)
    comparison = queryset.first()
    if comparison is None:
        return None
    data = {
        "identical": comparison.identical,
        "original_tree": comparison.original_tree,
        "replay_tree": comparison.replay_tree,
        "diffstat": comparison.diffstat,
        "files_changed": comparison.files_changed,
        "insertions": comparison.insertions,
        "deletions": comparison.deletions,
        "differing_paths": comparison.differing_paths,
        "replay_paths": comparison.replay_paths,
        "disallowed_paths": comparison.disallowed_paths,
        "hunk_classes": comparison.hunk_classes,
        "substantive_files": comparison.substantive_files,
        "truncated": comparison.truncated,
    }
    if full:
        data.update({name: getattr(comparison, name) for name in _BIG_TEXTS})
    return data


def _outcome_json(outcome: TestOutcome, *, full: bool) -> dict[str, Any]:
    data = {
        "tree": outcome.tree,
        "attempt": outcome.attempt,
        "ran": outcome.ran,
        "passed": outcome.passed,
        "exit_code": outcome.exit_code,
        "tests_executed": outcome.tests_executed,
        "tests_failed": outcome.tests_failed,
        "timed_out": outcome.timed_out,
        "duration_s": outcome.duration_s,
        "output_truncated": outcome.output_truncated,
        "cached": outcome.cached,
    }
    if full:
        data["output_tail"] = outcome.output_tail
        data["cases"] = outcome.cases
    return data


# -- ATIF exports ------------------------------------------------------------
# A run's conversation or a replay's own tape as an ATIF trajectory, a
# download. It holds no verdict, reason or review: what blind review keeps
# from a reviewer is never in it (the page shows the same tape to them).


@login_not_required
@require_GET
def run_atif(request: HttpRequest, run_id: int) -> HttpResponse:
    if denied := _session_denied(request, "replayhub.view_run"):
        return denied
    run = Run.objects.select_related("project").filter(pk=run_id).first()
    if run is None:
        return _error(404, f"there is no run {run_id}")
    record = run.record
    steps, source = atif_export.run_steps(record)
    if not steps:
        return _error(404, f"run {run_id} has no conversation or tape to export")
    name, version = atif_export.agent_of(record)
    origin = atif_export.Origin(
        run_id=run.pk,
        project=run.project.slug,
        external_id=run.external_id,
        source=source,
        agent_name=name,
        agent_version=version,
        model=run.model,
    )
    totals = atif_export.run_totals(
        run.usage, with_money=request.user.has_perm(roles.VIEW_MONEY)
    )
    return _atif_download(
        atif_export.document(
            steps, origin, totals, limit=settings.REPLAYHUB_TAPE_BYTES
        ),
        f"{run.project.slug}-run-{run.pk}.atif.json",
    )


@login_not_required
@require_GET
def replay_atif(request: HttpRequest, replay_id: int) -> HttpResponse:
    if denied := _session_denied(request, roles.VIEW_REPLAYS):
        return denied
    replay = (
        Replay.objects.select_related("run", "project").filter(pk=replay_id).first()
    )
    if replay is None:
        return _error(404, f"there is no replay {replay_id}")
    try:
        exchanges = replay.tape.read()
    except (Tape.DoesNotExist, ValueError):
        exchanges = []
    if not exchanges:
        return _error(404, f"replay {replay_id} has no tape to export")
    run = replay.run
    name, version = atif_export.agent_of(run.record)
    origin = atif_export.Origin(
        run_id=run.pk,
        project=replay.project.slug,
        external_id=run.external_id,
        source=f"its own tape (a {replay.tier} replay)",
        replay_id=replay.pk,
        agent_name=name,
        agent_version=version,
    )
    with_money = request.user.has_perm(roles.VIEW_MONEY)
    totals = atif_export.tape_totals(
        exchanges, float(replay.cost_usd) if with_money else None
    )
    return _atif_download(
        atif_export.document(
            atif_export.steps_from_exchanges(exchanges),
            origin,
            totals,
            limit=settings.REPLAYHUB_TAPE_BYTES,
        ),
        f"{replay.project.slug}-replay-{replay.pk}.atif.json",
    )


def _atif_download(document: dict[str, Any], filename: str) -> HttpResponse:
    response = HttpResponse(
        atif_export.encode(document), content_type="application/json"
    )
    # A slug and an id; anything else a slug might hold is not written.
    safe = re.sub(r"[^A-Za-z0-9._-]", "-", filename)
    response["Content-Disposition"] = f'attachment; filename="{safe}"'
    return response
