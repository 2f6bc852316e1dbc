"""A project's night started from its budget card: what ``manage.py nightly
--project SLUG --now`` does, said in the command's own lines beside the
button that started it (kept in the session for the page the POST redirects
to, which shows them once and focuses them)."""

from __future__ import annotations

from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from replayhub import roles
from replayhub.models import Project
from replayhub.nights.admitted import night_lines
from reviews.project_services import night_start

# Where a start's lines wait for the budgets page, per project.
STARTED_KEY = "night_started.{}"


@require_POST
@permission_required(roles.MANAGE_BUDGETS, raise_exception=True)
def budget_night_start(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(Project, slug=slug)
    figures = night_start(actor=request.user, project=project)
    request.session[STARTED_KEY.format(project.slug)] = {
        "lines": night_lines(figures),
        "skipped": bool(figures["skipped"]),
    }
    # No fragment: the page scrolls to the lines, focused, by itself.
    return redirect(reverse("reviews:budgets"))


def started(request: HttpRequest, slug: str) -> dict | None:
    """What starting ``slug``'s night said, taken out as it is shown."""
    said = request.session.pop(STARTED_KEY.format(slug), None)
    return said if isinstance(said, dict) else None
