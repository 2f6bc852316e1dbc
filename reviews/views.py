from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HTMX_STOP_POLLING

from replayhub import services
from replayhub.models import Project, WorkerCheck

from . import roles


@require_GET
@permission_required(roles.VIEW_REPLAYS, raise_exception=True)
def queue(request: HttpRequest) -> HttpResponse:
    return render(request, "reviews/queue.html", {"page": "queue"})


@require_GET
@permission_required(roles.VIEW_TRENDS, raise_exception=True)
def trends(request: HttpRequest) -> HttpResponse:
    return render(request, "reviews/trends.html", {"page": "trends"})


@require_GET
@permission_required(roles.VIEW_BUDGETS, raise_exception=True)
def budgets(request: HttpRequest) -> HttpResponse:
    return render(request, "reviews/budgets.html", {"page": "budgets"})


@require_GET
@permission_required(roles.VIEW_PROJECTS, raise_exception=True)
def projects(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "reviews/projects.html",
        {"page": "projects", "projects": Project.objects.all()},
    )


@require_GET
@permission_required(roles.MANAGE_PROJECTS, raise_exception=True)
def status(request: HttpRequest) -> HttpResponse:
    checks = WorkerCheck.objects.select_related("requested_by")[:10]
    return render(request, "reviews/status.html", {"page": "status", "checks": checks})


@require_POST
@permission_required(roles.MANAGE_PROJECTS, raise_exception=True)
def worker_check_create(request: HttpRequest) -> HttpResponse:
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
