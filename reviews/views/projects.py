"""A project's page (its runs, filterable, with links to their replays), the
admin's "Replay now", and registering or editing a project in the browser."""

from __future__ import annotations

import shlex
from datetime import datetime, time

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.paginator import Paginator
from django.db import models
from django.db.models import Count, Exists, F, Max, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Least
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.utils import timezone
from django.views.decorators.http import (
    require_GET,
    require_http_methods,
    require_POST,
)

from replayhub import agents, roles
from replayhub.models import (
    VERDICT_CHOICES,
    Delivery,
    Forge,
    Preflight,
    Project,
    Provider,
    Replay,
    ReplayStatus,
    Run,
    TestRecord,
)
from replayhub.models.project_settings import (
    CAPS,
    PATHS,
    SANDBOX,
    SETTINGS,
    SETUP,
    TESTS,
    Setting,
)
from replayhub.outbound.services import sent_to
from replayhub.project_setup import (
    ProjectInvalid,
    branch_check,
    project_fields,
    sandbox_fields,
)
from replayhub.rollouts.seeds import DRAW_FIELDS, draw_problems
from replayhub.rollouts.verifier import UNVERIFIED_WARNING, rewards_unverified
from reviews.forms import BackForm, ForgetsPastedKeys
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
from reviews.replay_page import together
from reviews.views import confirmed

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


def _words(value: str) -> list[str]:
    return [word for word in value.split() if word]


# The form's groups, in order; the replay settings' fields are in their own.
PROJECT = "Project"
ROLLOUTS = "Rollouts"
GROUPS = (PROJECT, PATHS, CAPS, TESTS, SETUP, SANDBOX, ROLLOUTS)
GROUP_OF = {
    "allowed_paths": PATHS,
    "test_paths": PATHS,
    "setup_command": SETUP,
    "setup_inputs": SETUP,
    "egress_setup": SETUP,
    "harness_command": ROLLOUTS,
    "verifier_command": ROLLOUTS,
    "env_share_group": SETUP,
    "allow_test_interference": TESTS,
    "root_image": SANDBOX,
    "require_image_match": SANDBOX,
    **{setting.field: setting.group for setting in SETTINGS},
}
# The sandbox's settings checked apart from ``project_fields``' (by
# ``sandbox_fields``), with their labels; their help is the model's.
SANDBOX_FIELDS = {
    "env_share_group": "Environment share group",
    "allow_test_interference": "Allow test interference",
    "root_image": "Root image",
    "require_image_match": "Require the record's image",
}
# How a rollout project draws and judges its seeds, with their labels; their
# help is the model's, their check ``draw_problems``, as the commands'.
ROLLOUT_FIELDS = {
    "rollout_mode": "Rollout mode",
    "rollout_anchor": "Anchor",
    "max_anchors": "Anchors drawn per rollout",
    "rollout_seed": "Draw seed",
    "min_source_reward": "Minimum source reward",
    "max_source_reward": "Maximum source reward",
    "max_seed_tokens": "Longest seed (tokens)",
    "pass_threshold": "Pass threshold",
    "verification_turn": "Verification turn",
}
GROUP_OF.update(dict.fromkeys(ROLLOUT_FIELDS, ROLLOUTS))


def _setting_field(setting: Setting) -> forms.Field:
    """The form field of a replay setting: the model's, with the table's label."""
    if setting.kind == "globs":
        return forms.CharField(
            label=setting.label,
            required=False,
            max_length=4000,
            initial=" ".join(setting.default),
            help_text=f"{setting.help} Separated by spaces; empty: none.",
        )
    if setting.kind == "choice":
        field = setting.model_field.formfield(
            label=setting.label, help_text=setting.help
        )
        assert field is not None
        return field
    # A number's bounds are the table's, said by ``setting_problem`` in one
    # message (and kept by the browser): none of the model field's own.
    options = {
        "label": setting.label,
        "help_text": setting.help,
        "required": not setting.optional,
        "initial": setting.default,
    }
    least, most, _ = setting.bounds
    if setting.kind == "money":
        field = forms.DecimalField(decimal_places=4, **options)
        field.widget.attrs.update(min="0.0001", max=most, step="0.0001")
        return field
    field = forms.IntegerField(**options)
    field.widget.attrs.update(min=least, max=most)
    return field


class ProjectForm(ForgetsPastedKeys):
    """The settings ``manage.py project_add`` takes; checked by the same code."""

    variable_fields = ("repo_credential_env",)

    slug = forms.SlugField(max_length=100)
    repo = forms.CharField(
        label="Repository",
        max_length=1000,
        help_text="A path on this host, or an https://, ssh://, git@host:path or "
        "file:// URL that each host mirrors.",
    )
    repo_credential_env = forms.CharField(
        label="Credential variable",
        required=False,
        max_length=128,
        help_text="For an https:// URL: the name of the environment variable "
        "holding its token or password on each host. Only the name is stored.",
    )
    test_command = forms.CharField(
        required=False,
        max_length=2000,
        help_text="Split like a shell would; never run through one. Empty only "
        "in a project of rollouts.",
    )
    agent = forms.ChoiceField(
        choices=[
            (agents.CUSTOM, "Custom: the agent command below"),
            *(
                (p.name, f"{p.title} ({p.package} {p.version})")
                for p in agents.PROFILES.values()
            ),
        ],
        initial=agents.CUSTOM,
        # A post without it (an older page, a script) means custom.
        required=False,
        help_text="A profile is installed by the setup phase and run headless "
        "against the gateway: no agent command.",
    )
    agent_version = forms.CharField(
        label="Agent version",
        required=False,
        max_length=64,
        help_text="The profile's release to install. Empty: its pinned one.",
    )
    agent_command = forms.CharField(
        required=False,
        max_length=2000,
        help_text="Split like a shell would; never run through one, so a $VAR "
        "stays as typed (sh -c '…' expands its own). Only with the custom agent.",
    )
    default_branch = forms.CharField(required=False, max_length=255)
    providers = forms.ModelMultipleChoiceField(
        queryset=Provider.objects.order_by("name"),
        to_field_name="name",
        required=False,
    )
    egress_agent = forms.CharField(
        required=False, max_length=4000, help_text="HOST:PORT, separated by spaces."
    )
    egress_tests = forms.CharField(
        required=False, max_length=4000, help_text="HOST:PORT, separated by spaces."
    )
    allowed_paths = forms.CharField(
        required=False,
        max_length=4000,
        help_text="Globs separated by spaces; empty: anything.",
    )
    test_paths = forms.CharField(
        required=False,
        max_length=4000,
        help_text="Globs separated by spaces; empty: the common layouts.",
    )
    setup_command = forms.CharField(
        required=False,
        max_length=2000,
        help_text="Run once per environment on a clean checkout of the base; what "
        "it leaves in $REPLAYHUB_ENV_DIR is mounted read-only into every later "
        "sandbox. Empty: no setup phase.",
    )
    setup_inputs = forms.CharField(
        required=False,
        max_length=4000,
        help_text="Globs of the files whose contents key the environment, "
        "separated by spaces; empty: the common lockfiles.",
    )
    egress_setup = forms.CharField(
        required=False,
        max_length=4000,
        help_text="HOST:PORT the setup phase may reach (a package index).",
    )
    harness_command = forms.CharField(
        required=False,
        max_length=2000,
        help_text="For rollout records: runs a seed in the sandbox.",
    )
    verifier_command = forms.CharField(
        required=False,
        max_length=2000,
        help_text="Scores a rollout replay's completion in a fresh sandbox with no "
        "network. Empty: the harness's own reward, never enough for equivalent.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for setting in SETTINGS:
            self.fields[setting.field] = _setting_field(setting)
        for name, label in {**SANDBOX_FIELDS, **ROLLOUT_FIELDS}.items():
            model_field = Project._meta.get_field(name)
            assert isinstance(model_field, models.Field)
            field = model_field.formfield(label=label)
            assert field is not None
            if name in ROLLOUT_FIELDS and self.is_bound and name not in self.data:
                # A post without it (an older page, a script) keeps the value.
                field.required = False
            self.fields[name] = field
        self.fields["rollout_mode"].help_text = (
            "continue: replays resume at an anchor; recheck: the final attempt "
            "is verified again."
        )
        self.fields["verification_turn"].widget.attrs["rows"] = 3

    def groups(self) -> list[tuple[str, list]]:
        """The fields to show under each group's legend, in order."""
        found: dict[str, list] = {group: [] for group in GROUPS}
        for field in self:
            found[GROUP_OF.get(field.name, PROJECT)].append(field)
        return [(group, fields) for group, fields in found.items() if fields]

    @classmethod
    def initial_for(cls, project: Project) -> dict:
        initial = {
            "slug": project.slug,
            "repo": project.repo_path,
            "repo_credential_env": project.repo_credential_env,
            "test_command": shlex.join(project.test_command),
            "agent": project.agent,
            "agent_version": project.agent_version,
            "agent_command": shlex.join(project.agent_command),
            "allowed_paths": " ".join(project.allowed_paths),
            "test_paths": " ".join(project.test_paths),
            "default_branch": project.default_branch,
            "providers": list(project.providers.all()),
            "egress_agent": " ".join(project.egress_agent),
            "egress_tests": " ".join(project.egress_tests),
            "setup_command": shlex.join(project.setup_command),
            "setup_inputs": " ".join(project.setup_inputs),
            "egress_setup": " ".join(project.egress_setup),
            "harness_command": shlex.join(project.harness_command),
            "verifier_command": shlex.join(project.verifier_command),
        }
        for setting in SETTINGS:
            value = getattr(project, setting.field)
            initial[setting.field] = (
                " ".join(value) if setting.kind == "globs" else value
            )
        for name in {**SANDBOX_FIELDS, **ROLLOUT_FIELDS}:
            initial[name] = getattr(project, name)
        return initial

    def rollout_values(self, project: Project | None) -> dict:
        """The rollout settings to save: a field the post left out (or that
        did not clean) keeps the project's value, a new project's default."""
        data = getattr(self, "cleaned_data", {})
        kept = project or Project()
        return {
            name: data[name]
            if name in self.data and name in data
            else getattr(kept, name)
            for name in ROLLOUT_FIELDS
        }

    def check_rollouts(self, project: Project | None) -> dict:
        """``rollout_values``, each problem ``draw_problems`` finds beside its
        field (where the field has none of its own already)."""
        values = self.rollout_values(project)
        found = draw_problems(**{name: values[name] for name in DRAW_FIELDS})
        for name, problem in found.items():
            if name not in self.errors:
                self.add_error(name, problem)
        return values

    def sandbox_values(self) -> dict:
        """The sandbox's settings as ``sandbox_fields`` takes them."""
        data = getattr(self, "cleaned_data", {})
        return {
            "root_image": data.get("root_image") or "",
            "require_image_match": bool(data.get("require_image_match")),
            "allow_test_interference": bool(data.get("allow_test_interference")),
            "env_share_group": data.get("env_share_group") or "",
        }

    def values(self) -> dict:
        """The cleaned values as ``project_fields`` takes them. On a form with
        errors, the fields that cleaned (a setting that did not is left out;
        the others stand in empty), so the rest can still be checked."""
        data = getattr(self, "cleaned_data", {})

        def text(name: str) -> str:
            return data.get(name) or ""

        return {
            "slug": text("slug"),
            "repo": text("repo"),
            "repo_credential_env": text("repo_credential_env"),
            "test_command": text("test_command") or None,
            "agent": data.get("agent") or agents.CUSTOM,
            "agent_version": text("agent_version").strip(),
            "agent_command": text("agent_command") or None,
            "allowed_paths": _words(text("allowed_paths")),
            "test_paths": _words(text("test_paths")) or None,
            "egress_agent": _words(text("egress_agent")),
            "egress_tests": _words(text("egress_tests")),
            "providers": [p.name for p in data.get("providers") or []],
            "default_branch": text("default_branch").strip(),
            "setup_command": text("setup_command") or None,
            "setup_inputs": _words(text("setup_inputs")) or None,
            "egress_setup": _words(text("egress_setup")),
            "harness_command": text("harness_command") or None,
            "verifier_command": text("verifier_command") or None,
            "settings": {
                setting.field: _words(data[setting.field])
                if setting.kind == "globs"
                else data[setting.field]
                for setting in SETTINGS
                if setting.field in data
            },
        }

    def add_problems(self, error: ProjectInvalid) -> None:
        """Each problem beside its field, in the form's words; none where the
        field already shows one of the form's own."""
        for problem in getattr(error, "problems", [error]):
            field = problem.field if problem.field in self.fields else None
            if field is not None and field in self.errors:
                continue
            self.add_error(field, problem.detail)


@require_http_methods(["GET"])
@permission_required(roles.VIEW_PROJECTS, raise_exception=True)
def project_detail(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(Project, slug=slug)
    form = RunFilterForm(request.GET)
    form.is_valid()
    runs = form.runs(project)
    blind = project.pk in together.blind_projects()
    by_verdict = getattr(form, "cleaned_data", {}).get("verdict")
    if blind and by_verdict and request.user.has_perm(roles.DECIDE):
        # Listing by verdict would tell a blind reviewer the verdicts.
        judged = Review.objects.filter(
            replay_id=OuterRef("replay_id"), reviewer_id=request.user.pk
        )
        runs = runs.filter(Exists(judged))
    paginator = Paginator(runs, RUNS_PER_PAGE)
    page = paginator.get_page(getattr(form, "cleaned_data", {}).get("page") or 1)
    hidden = together.hidden_from(
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
    request: HttpRequest, form: ProjectForm, project: Project | None, status=200
) -> HttpResponse:
    # What removing the project would delete with it, said beside the button.
    held = project_holdings(project) if project is not None else None
    return render(
        request,
        "reviews/project_form.html",
        {"page": "projects", "form": form, "project": project, "held": held},
        status=status,
    )


def _save(request: HttpRequest, project: Project | None) -> HttpResponse:
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
            saved = project_save(
                actor=request.user,
                data=form.values(),
                sandbox=form.sandbox_values(),
                rollouts=rollouts,
                project=project,
            )
        except ProjectInvalid as exc:
            form.add_problems(exc)
        else:
            messages.success(
                request,
                f"Registered project {saved.slug}."
                if project is None
                else f"Saved project {saved.slug}.",
            )
            if rewards_unverified(saved):
                messages.warning(request, f"{saved.slug} {UNVERIFIED_WARNING}")
            return redirect("reviews:project_detail", slug=saved.slug)
    return _project_form_page(request, form, project, status=400)


@require_http_methods(["GET", "POST"])
@permission_required(ADD_PROJECT, raise_exception=True)
def project_create(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        return _save(request, None)
    return _project_form_page(request, ProjectForm(), None)


@require_http_methods(["GET", "POST"])
@permission_required(roles.MANAGE_PROJECTS, raise_exception=True)
def project_edit(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(Project, slug=slug)
    if request.method == "POST":
        return _save(request, project)
    form = ProjectForm(initial=ProjectForm.initial_for(project))
    return _project_form_page(request, form, project)


@require_POST
@permission_required(roles.MANAGE_PROJECTS, raise_exception=True)
def project_delete(request: HttpRequest, slug: str) -> HttpResponse:
    """Remove a project, its runs with it once its name is typed beside the
    count of runs shown (more runs since, or a replay running: it stays)."""
    project = get_object_or_404(Project, slug=slug)
    if not confirmed(request, f"remove project {project.slug}"):
        return redirect("reviews:project_edit", slug=project.slug)
    form = RemoveForm(request.POST)
    typed = form.cleaned_data["name"] if form.is_valid() else ""
    if typed and typed != project.slug:
        messages.error(request, f"Nothing removed: type its name, {project.slug}.")
        return redirect("reviews:project_edit", slug=project.slug)
    runs = form.cleaned_data.get("runs") or 0 if typed else 0
    try:
        held = project_remove(actor=request.user, project=project, runs_confirmed=runs)
    except ProjectInUse as exc:
        messages.error(request, str(exc))
        return redirect("reviews:project_edit", slug=project.slug)
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
