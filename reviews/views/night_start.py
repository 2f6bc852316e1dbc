"""A project's night started from its budget card: what ``manage.py nightly
--project SLUG --now`` does, said in the command's own lines beside the
button that started it (kept in the session for the page the POST redirects
to, which shows them once and focuses them).

A night already started (a second press, or beat's start) says so with its
real figures: the replays it spent, done and in flight, not only what is
still reserved, which its finished replays have given back."""

from __future__ import annotations

from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from replayhub import roles
from replayhub.models import NightShare, Project
from replayhub.nights import tiers
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
        "lines": _said(project, figures),
        "skipped": bool(figures["skipped"]),
    }
    # No fragment: the page scrolls to the lines, focused, by itself.
    return redirect(reverse("reviews:budgets"))


def _said(project: Project, figures: dict) -> list[str]:
    """The command's lines, the agentic tier's said as a night already
    started when this press found replays admitted tonight."""
    lines = night_lines(figures)
    if figures["skipped"] or not figures["already_admitted"]:
        return lines
    slug = project.slug
    share = NightShare.objects.filter(
        night__project=project, night__date=figures["night"], tier=tiers.AGENTIC
    ).first()
    done = share.used_replays if share else 0
    flying = share.reserved_replays if share else 0
    said = (
        f"{slug} night of {figures['night']} was already started: admitted "
        f"{figures['admitted']} now, deferred {figures['deferred']}; before this "
        f"press {figures['already_admitted']} admitted (replays "
        f"{done + flying}/{figures['limit_replays']}: {done} done, {flying} in "
        "flight)"
    )
    # The agentic tier's line, then its "already admitted" one.
    at = next(
        i
        for i, line in enumerate(lines)
        if line.startswith(f"{slug} night of {figures['night']}:")
    )
    return [*lines[:at], said, *lines[at + 2 :]]


def started(request: HttpRequest, slug: str) -> dict | None:
    """What starting ``slug``'s night said, taken out as it is shown."""
    said = request.session.pop(STARTED_KEY.format(slug), None)
    return said if isinstance(said, dict) else None
