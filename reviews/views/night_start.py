"""A project's night started from its budget card: what ``manage.py nightly
--project SLUG --now`` does, said in the command's own lines."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from replayhub import roles
from replayhub.models import Project
from replayhub.nights.admitted import night_lines
from reviews.project_services import night_start


@require_POST
@permission_required(roles.MANAGE_BUDGETS, raise_exception=True)
def budget_night_start(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(Project, slug=slug)
    figures = night_start(actor=request.user, project=project)
    said = messages.info if figures["skipped"] else messages.success
    for line in night_lines(figures):
        said(request, line)
    return redirect(f"{reverse('reviews:budgets')}#budget-{project.slug}")
