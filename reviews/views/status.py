"""The status page: an admin asks a worker to answer through the broker and
watches for the answer, and sees the worker hosts that stopped claiming
replays after host failures in a row."""

from __future__ import annotations

from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import (
    require_GET,
    require_POST,
)
from django_htmx.http import HTMX_STOP_POLLING

from replayhub import roles, services
from replayhub.models import (
    Heartbeat,
    WorkerCheck,
)
from reviews.views import HtmxHttpRequest


@require_GET
@permission_required(roles.MANAGE_PROJECTS, raise_exception=True)
def status(request: HttpRequest) -> HttpResponse:
    checks = WorkerCheck.objects.select_related("requested_by")[:10]
    stopped = [
        {"host": row.name.removeprefix(Heartbeat.STOPPED), "at": row.beat_at}
        for row in Heartbeat.objects.filter(name__startswith=Heartbeat.STOPPED)
    ]
    return render(
        request,
        "reviews/status.html",
        {"page": "status", "checks": checks, "stopped": stopped},
    )


@require_POST
@permission_required(roles.MANAGE_PROJECTS, raise_exception=True)
def worker_check_create(request: HtmxHttpRequest) -> HttpResponse:
    check = services.worker_check_request(user=request.user)
    if not request.htmx:
        return redirect("reviews:status")
    return render(request, "reviews/status.html#check", {"check": check})


@require_GET
@permission_required(roles.MANAGE_PROJECTS, raise_exception=True)
def worker_check_detail(request: HttpRequest, check_id: int) -> HttpResponse:
    check = get_object_or_404(WorkerCheck, pk=check_id)
    response = render(request, "reviews/status.html#check", {"check": check})
    if check.answered_at is not None:
        # 286 tells htmx to stop polling: the worker has answered.
        response.status_code = HTMX_STOP_POLLING
    return response
