"""A project's page (its runs, filterable, with links to their replays), the
admin's "Replay now", and registering or editing a project in the browser."""

from __future__ import annotations

from datetime import datetime, time

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Count, Exists, F, Max, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Least
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import (
    require_GET,
    require_http_methods,
    require_POST,
)
from django_htmx.http import HttpResponseClientRedirect

from replayhub import roles
from replayhub.models import (
    VERDICT_CHOICES,
    Delivery,
    Forge,
    Preflight,
    Project,
    Replay,
    ReplayStatus,
    Run,
    TestRecord,
)
from replayhub.outbound.services import sent_to
from replayhub.project_setup import (
    ProjectInvalid,
    branch_check,
    project_fields,
    sandbox_fields,
)
from replayhub.rollouts.verifier import UNVERIFIED_WARNING, rewards_unverified
from reviews.forms import BackForm
from reviews.models import Label, Review
from reviews.project_services import (
    ProjectInUse,
    ReplayRefused,
    policy_of,
    project_holdings,
    project_remove,
    project_save,
    replay_now,
)
from reviews.together.blind import blind_projects, hidden_from
from reviews.views import HtmxHttpRequest
from reviews.views.project_form import (
    ProjectForm,
    saved_text,
    stale_refusal,
    stored_fingerprint,
)

START_REPLAY = "replayhub.add_replay"
ADD_PROJECT = "replayhub.add_project"
RUNS_PER_PAGE = 50
# The last commit statuses and webhook deliveries the project page lists.
DELIVERIES_SHOWN = 20
NEVER = "never"


class RunFilterForm(forms.Form):
    """The project page's filters; a field that fails validation filters nothing."""

    preflight = forms.ChoiceField(
        choices=[("", "Any preflight"), *Preflight.choices], required=False
    )
    status = forms.ChoiceField(
        choices=[
            ("", "Any replay status"),
            (NEVER, "Never replayed"),
            *ReplayStatus.choices,
        ],
        required=False,
    )
    verdict = forms.ChoiceField(
        choices=[("", "Any verdict"), *VERDICT_CHOICES], required=False
    )
    model = forms.CharField(required=False, max_length=200)
    since = forms.DateField(required=False, label="Imported from")
    until = forms.DateField(required=False, label="Imported until")
    # The upload summary's link: the runs imported from this instant on.
    imported_after = forms.DateTimeField(required=False, widget=forms.HiddenInput)
    page = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)

    def runs(self, project: Project):
        data = getattr(self, "cleaned_data", {})
        latest = Replay.objects.filter(run=OuterRef("pk")).order_by(
            "-created_at", "-id"
        )
        rows = Run.objects.filter(project=project).annotate(
            replay_id=Subquery(latest.values("id")[:1]),
            replay_status=Subquery(latest.values("status")[:1]),
            replay_verdict=Subquery(latest.values("verdict")[:1]),
        )
        if data.get("preflight"):
            rows = rows.filter(preflight=data["preflight"])
        if data.get("status") == NEVER:
            rows = rows.filter(replay_id__isnull=True)
        elif data.get("status"):
            rows = rows.filter(replay_status=data["status"])
        if data.get("verdict"):
            rows = rows.filter(replay_verdict=data["verdict"])
        if data.get("model"):
            rows = rows.filter(model__icontains=data["model"].strip())
        zone = timezone.get_current_timezone()
        if data.get("since"):
            start = datetime.combine(data["since"], time.min)
            rows = rows.filter(imported_at__gte=timezone.make_aware(start, zone))
        if data.get("until"):
            end = datetime.combine(data["until"], time.max)
            rows = rows.filter(imported_at__lte=timezone.make_aware(end, zone))
        if data.get("imported_after"):
            rows = rows.filter(imported_at__gte=data["imported_after"])
        return rows.order_by("-imported_at", "-id")


@require_http_methods(["GET"])
@permission_required(roles.VIEW_PROJECTS, raise_exception=True)
def project_detail(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(Project, slug=slug)
    form = RunFilterForm(request.GET)
    form.is_valid()
    runs = form.runs(project)
    blind = project.pk in blind_projects()
    by_verdict = getattr(form, "cleaned_data", {}).get("verdict")
    if blind and by_verdict and request.user.has_perm(roles.DECIDE):
        # Listing by verdict would tell a blind reviewer the verdicts.
        judged = Review.objects.filter(
            replay_id=OuterRef("replay_id"), reviewer_id=request.user.pk
        )
        runs = runs.filter(Exists(judged))
    paginator = Paginator(runs, RUNS_PER_PAGE)
    page = paginator.get_page(getattr(form, "cleaned_data", {}).get("page") or 1)
    hidden = hidden_from(
        request.user, [(run.replay_id, project.pk) for run in page if run.replay_id]
    )
    query = request.GET.copy()
    query.pop("page", None)
    can_edit = request.user.has_perm(roles.MANAGE_PROJECTS)
    # A status's state tells a verdict: shown to those who configure them.
    recent = Delivery.objects.recent(project).select_related("webhook")
    # Each with where it went, a webhook by the name the connections page gives.
    deliveries = (
        [(sent, sent_to(sent)) for sent in recent[:DELIVERIES_SHOWN]]
        if can_edit
        else []
    )
    # With none listed, the empty state says whether anything will be sent.
    sends = bool(deliveries) or (
        can_edit
        and (
            Forge.objects.filter(project=project).exists() or project.webhooks.exists()
        )
    )
    return render(
        request,
        "reviews/project_detail.html",
        {
            "page": "projects",
            "project": project,
            "form": form,
            "runs": page,
            "hidden": hidden,
            "query": query.urlencode(),
            "filtered": any(v for k, v in request.GET.items() if k != "page"),
            "can_start_replay": request.user.has_perm(START_REPLAY),
            "can_edit_project": can_edit,
            "deliveries": deliveries,
            "sends": sends,
            "policy": policy_of(project),
            # The whole policy: its second-opinion rules and gold rate would
            # tell a reviewer what blind review and gold items hide.
            "whole_policy": can_edit or request.user.has_perm(roles.VIEW_AGREEMENT),
            "labels": Label.objects.filter(project=project),
        },
    )


@require_http_methods(["GET", "POST"])
@permission_required(START_REPLAY, raise_exception=True)
def run_replay_now(request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run, pk=run_id, project__slug=slug)
    if request.method != "POST":
        return redirect("reviews:project_detail", slug=slug)
    try:
        started = replay_now(run=run, actor=request.user)
    except ReplayRefused as exc:
        messages.error(request, f"Not started: {exc}")
        if back := BackForm(request.POST).path():
            return redirect(back)
        return redirect("reviews:project_detail", slug=slug)
    charged = (
        f" (reserved on the night of {started.night.date})" if started.night else ""
    )
    messages.success(
        request, f"Replay {started.replay.pk} of {run.external_id} queued{charged}."
    )
    return redirect("reviews:replay_detail", replay_id=started.replay.pk)


def _project_form_page(
    request: HttpRequest,
    form: ProjectForm,
    project: Project | None,
    status=200,
    removal: dict | None = None,
    stale: dict | None = None,
) -> HttpResponse:
    # What removing the project would delete with it, said beside the button.
    held = project_holdings(project) if project is not None else None
    context = {"page": "projects", "form": form, "project": project, "held": held}
    if project is not None:
        # The stored values the form is rendered from (``stale``), as stored
        # (a refused save may have written into ``project``).
        fresh = Project.objects.get(pk=project.pk)
        context |= {"stored": stored_fingerprint(fresh), "stale": stale}
    return render(
        request,
        "reviews/project_form.html",
        {**context, "removal": removal or {}},
        status=status,
    )


def _save(request: HtmxHttpRequest, project: Project | None) -> HttpResponse:
    form = ProjectForm(request.POST)
    form.is_valid()
    rollouts = form.check_rollouts(project)
    if not form.is_valid():
        # Check the rest too: every problem is shown at once, not one a submit.
        values = form.values()
        branch = values.pop("default_branch")
        for check in (
            lambda: project_fields(editing=project, **values),
            lambda: sandbox_fields(**form.sandbox_values()),
            lambda: branch_check(values["repo"], branch),
        ):
            try:
                check()
            except ProjectInvalid as exc:
                form.add_problems(exc)
    else:
        try:
            updated = project_save(
                actor=request.user,
                data=form.values(),
                sandbox=form.sandbox_values(),
                rollouts=rollouts,
                project=project,
            )
        except ProjectInvalid as exc:
            form.add_problems(exc)
        else:
            saved = updated.project
            messages.success(
                request,
                f"Registered project {saved.slug}."
                if project is None
                else saved_text(form, saved.slug, updated.changes),
            )
            if rewards_unverified(saved):
                messages.warning(request, f"{saved.slug} {UNVERIFIED_WARNING}")
            url = reverse("reviews:project_detail", args=[saved.slug])
            # Sent with htmx (a refused save was swapped in place, leaving no
            # history entry to post again on Back): the browser goes there.
            return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    return _project_form_page(request, form, project, status=400)


@require_http_methods(["GET", "POST"])
@permission_required(ADD_PROJECT, raise_exception=True)
def project_create(request: HtmxHttpRequest) -> HttpResponse:
    if request.method == "POST":
        return _save(request, None)
    return _project_form_page(request, ProjectForm(), None)


@require_http_methods(["GET", "POST"])
@permission_required(roles.MANAGE_PROJECTS, raise_exception=True)
def project_edit(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(Project, slug=slug)
    if request.method == "POST":
        with transaction.atomic():
            # The project's row is locked first by each form that edits its
            # values (a budget card too): a check and its save are one.
            project = Project.objects.select_for_update().get(pk=project.pk)
            form = ProjectForm(request.POST)
            if refused := stale_refusal(form, project):
                stale, status = refused
                return _project_form_page(
                    request, form, project, status=status, stale=stale
                )
            return _save(request, project)
    form = ProjectForm(initial=ProjectForm.initial_for(project))
    return _project_form_page(request, form, project)


@require_POST
@permission_required(roles.MANAGE_PROJECTS, raise_exception=True)
def project_delete(request: HttpRequest, slug: str) -> HttpResponse:
    """Remove a project, its runs with it once its name is typed beside the
    count of runs shown (more runs since, or a replay running: it stays)."""
    project = get_object_or_404(Project, slug=slug)
    form = RemoveForm(request.POST)
    typed = form.cleaned_data["name"] if form.is_valid() else ""
    sure = request.POST.get("sure") == "yes"
    if not sure:
        refused = f"Nothing removed: tick “Yes, remove project {project.slug}” first."
    elif typed and typed != project.slug:
        refused = f"Nothing removed: type its name, {project.slug}."
    else:
        runs = form.cleaned_data.get("runs") or 0 if typed else 0
        try:
            held = project_remove(
                actor=request.user, project=project, runs_confirmed=runs
            )
        except ProjectInUse as exc:
            refused = str(exc)
        else:
            refused = ""
    if refused:
        # Said beside the removal's own form, which keeps what was typed.
        edit = ProjectForm(initial=ProjectForm.initial_for(project))
        removal = {"error": refused, "name": typed, "sure": sure}
        return _project_form_page(request, edit, project, status=400, removal=removal)
    went = (
        f" with its {held.runs:,} run{pluralize(held.runs)}, {held.replays:,} "
        f"replay{pluralize(held.replays)} and {held.decisions:,} "
        f"decision{pluralize(held.decisions)}"
        if held.runs
        else ""
    )
    messages.success(request, f"Removed project {slug}{went}.")
    return redirect("reviews:projects")


class RemoveForm(forms.Form):
    """A removal of a project with runs: its name typed, and the count of
    runs its admin was shown."""

    name = forms.CharField(required=False, max_length=100, strip=True)
    runs = forms.IntegerField(required=False, min_value=0, max_value=10**12)


@require_GET
@permission_required(roles.VIEW_PROJECTS, raise_exception=True)
def project_list(request: HttpRequest) -> HttpResponse:
    # One grouped query: each project's runs by preflight state, and the newest.
    by_state = {
        f"runs_{state}": Count("runs", filter=Q(runs__preflight=state))
        for state in Preflight.values
    }
    listed = Project.objects.annotate(
        runs_total=Count("runs"), last_import=Max("runs__imported_at"), **by_state
    ).order_by("slug")
    return render(
        request,
        "reviews/projects.html",
        {"page": "projects", "projects": listed, "flaky": _flaky_tests()},
    )


FLAKY_SHOWN = 200


def _flaky_tests() -> list[dict]:
    """Tests seen both passing and failing on one tree, most flips first.

    The flip rate is the share of a test's runs, on the trees where it flipped,
    that went the minority's way: 0.5 is a coin toss.
    """
    rows = (
        TestRecord.objects.filter(passed__gt=0, failed__gt=0)
        .values("project__slug", "test_id")
        .annotate(
            minority=Sum(Least("passed", "failed")),
            runs=Sum(F("passed") + F("failed")),
            last_seen=Max("last_seen"),
            replays=Sum("replays"),
        )
        .order_by("-minority", "project__slug", "test_id")[:FLAKY_SHOWN]
    )
    return [{**row, "flip_rate": row["minority"] / row["runs"]} for row in rows]
