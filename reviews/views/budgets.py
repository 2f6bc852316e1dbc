"""The budgets page: each project's nightly budget, caps, tonight's usage, history."""

from __future__ import annotations

from dataclasses import dataclass
from zoneinfo import available_timezones

from django import forms
from django.contrib.auth.decorators import permission_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from replayhub import roles
from replayhub.models import Budget, Night, Project, Run
from replayhub.nights import scheduler
from replayhub.project_setup import SETTING, bound_problem
from replayhub.texttier.night import text_candidates
from reviews import services
from reviews.models import AuditEvent
from reviews.views import HtmxHttpRequest

HISTORY_NIGHTS = 14
# Deferred runs listed per tier on a card (the counts are whole).
DEFERRED_SHOWN = 10


# Every number an admin types has a floor and a sane ceiling, with its unit
# for the message: (least, most, unit). A ceiling catches a slipped digit
# before it reaches the scheduler.
BUDGET_BOUNDS: dict[str, tuple[int, int, str]] = {
    "max_replays": (0, 100_000, " replays"),
    "max_sandbox_minutes": (0, 10_000_000, " minutes"),
    "max_tokens": (0, 100_000_000_000, " tokens"),
    "max_cost_usd": (0, 1_000_000, " USD"),
    "window_start_hour": (0, 23, ""),
    "window_end_hour": (0, 23, ""),
    "tape_max_replays": (0, 100_000, " replays"),
    "tape_max_sandbox_minutes": (0, 10_000_000, " minutes"),
}
# The tape tier's share; left blank (or out of an older client's post), the
# saved share stands.
TAPE_SHARE = ("tape_max_replays", "tape_max_sandbox_minutes")
# The replay's caps keep the bounds of the one table of replay settings.
CAP_BOUNDS: dict[str, tuple[int, int, str]] = {
    name: SETTING[name].bounds for name in services.CAP_FIELDS if name in SETTING
}


class BoundedForm(forms.ModelForm):
    """A model form whose numbers are checked against ``bounds``, field by field."""

    bounds: dict[str, tuple[int, int, str]] = {}

    def clean(self):
        data = super().clean()
        # BaseForm.clean returns cleaned_data; None is only an override's choice.
        assert data is not None
        for name, (least, most, unit) in self.bounds.items():
            if name not in self.fields or name in self.errors:
                continue
            if problem := bound_problem(data.get(name), least, most, unit):
                self.add_error(name, problem)
        return data


class BudgetForm(BoundedForm):
    bounds = BUDGET_BOUNDS

    class Meta:
        model = Budget
        fields = services.BUDGET_FIELDS
        labels = {
            "max_replays": "Replays per night",
            "max_sandbox_minutes": "Sandbox minutes per night",
            "max_tokens": "Tokens per night",
            "max_cost_usd": "Money per night (USD)",
            "window_start_hour": "Window starts (hour)",
            "window_end_hour": "Window ends (hour)",
            "tape_enabled": "Tape tier first (runs with a tape)",
            "tape_max_replays": "Tape replays per night",
            "tape_max_sandbox_minutes": "Tape sandbox minutes per night",
        }

    def __init__(self, *args, show_money: bool, **kwargs):
        super().__init__(*args, **kwargs)
        if not show_money:
            del self.fields["max_cost_usd"]
        for name in TAPE_SHARE:
            self.fields[name].required = False

    def clean_tape_max_replays(self) -> int:
        return self._share("tape_max_replays")

    def clean_tape_max_sandbox_minutes(self) -> int:
        return self._share("tape_max_sandbox_minutes")

    def _share(self, name: str) -> int:
        value = self.cleaned_data.get(name)
        return getattr(self.instance, name) if value is None else value

    def clean_timezone(self) -> str:
        name = self.cleaned_data["timezone"]
        if name not in available_timezones():
            raise forms.ValidationError(f"{name!r} is not a known time zone.")
        return name

    def clean(self):
        data = super().clean()
        start, end = data.get("window_start_hour"), data.get("window_end_hour")
        if (
            start is not None
            and start == end
            and "window_end_hour" not in self.errors
            and "window_start_hour" not in self.errors
        ):
            self.add_error(
                "window_end_hour",
                "The window must last at least one hour: it starts and ends at "
                f"{start}:00.",
            )
        return data


class CapsForm(BoundedForm):
    bounds = CAP_BOUNDS

    class Meta:
        model = Project
        fields = services.CAP_FIELDS
        labels = {
            "agentic_enabled": "Agentic replays by the scheduler",
            "time_limit_seconds": "Agent time limit (s)",
            "test_time_limit_seconds": "Test run time limit (s)",
            "memory_limit_mb": "Memory (MiB)",
            "max_processes": "Processes",
            "max_disk_mb": "Disk (MiB)",
            "max_files": "Files",
            "max_tokens": "Tokens per replay",
            "max_turns": "Turns per replay",
        }


@dataclass
class Bar:
    label: str
    used: float
    reserved: float
    limit: float
    unit: str

    @property
    def used_pct(self) -> float:
        return min(100.0, 100 * self.used / self.limit) if self.limit else 0.0

    @property
    def reserved_pct(self) -> float:
        room = 100.0 - self.used_pct
        return min(room, 100 * self.reserved / self.limit) if self.limit else 0.0


def bars(night: Night, *, show_money: bool) -> list[Bar]:
    out = [
        Bar(
            "Replays",
            night.used_replays,
            night.reserved_replays,
            night.limit_replays,
            "",
        ),
        Bar(
            "Sandbox minutes",
            round(night.used_sandbox_seconds / 60, 1),
            round(night.reserved_sandbox_seconds / 60, 1),
            round(night.limit_sandbox_seconds / 60, 1),
            "min",
        ),
        Bar("Tokens", night.used_tokens, night.reserved_tokens, night.limit_tokens, ""),
    ]
    if show_money:
        out.append(
            Bar(
                "Money",
                float(night.used_cost_usd),
                float(night.reserved_cost_usd),
                float(night.limit_cost_usd),
                "USD",
            )
        )
    return out


def text_bars(night: Night, *, show_money: bool) -> list[Bar]:
    """The text tier's spend of the night, against its own limits."""
    out = [
        Bar(
            "Text replays",
            night.text_used_replays,
            night.text_reserved_replays,
            night.text_limit_replays,
            "",
        ),
        Bar(
            "Text tokens",
            night.text_used_tokens,
            night.text_reserved_tokens,
            night.text_limit_tokens,
            "",
        ),
    ]
    if show_money:
        out.append(
            Bar(
                "Text money",
                float(night.text_used_cost_usd),
                float(night.text_reserved_cost_usd),
                float(night.text_limit_cost_usd),
                "USD",
            )
        )
    return out


def tape_bars(night: Night) -> list[Bar]:
    """The tape tier's spend of the night, against its own share."""
    return [
        Bar(
            "Tape replays",
            night.tape_used_replays,
            night.tape_reserved_replays,
            night.tape_limit_replays,
            "",
        ),
        Bar(
            "Tape sandbox minutes",
            round(night.tape_used_sandbox_seconds / 60, 1),
            round(night.tape_reserved_sandbox_seconds / 60, 1),
            round(night.tape_limit_sandbox_seconds / 60, 1),
            "min",
        ),
    ]


def project_card(project: Project, request: HttpRequest, forms_=None) -> dict:
    """Everything one project's card shows."""
    show_money = request.user.has_perm(roles.VIEW_MONEY)
    # Read only: a page view never creates the row (an unsaved one shows the
    # defaults; saving the form creates it).
    budget = Budget.objects.filter(project=project).first() or Budget(project=project)
    nights = list(
        Night.objects.filter(project=project).order_by("-date")[:HISTORY_NIGHTS]
    )
    now = timezone.now()
    tonight = next(
        (n for n in nights if n.window_start <= now < n.window_end), None
    ) or (nights[0] if nights else None)
    budget_form, caps_form = forms_ or (
        BudgetForm(instance=budget, prefix="budget", show_money=show_money),
        CapsForm(instance=project, prefix="caps"),
    )
    return {
        "project": project,
        "budget": budget,
        "tonight": tonight,
        "bars": bars(tonight, show_money=show_money) if tonight else [],
        "text_bars": text_bars(tonight, show_money=show_money) if tonight else [],
        "tape_bars": tape_bars(tonight) if tonight else [],
        "deferred_runs": Run.objects.filter(project=project, deferred_at__isnull=False)
        .only("id", "external_id", "title", "deferred_at")
        .order_by("deferred_at", "id")[:DEFERRED_SHOWN],
        "text_deferred_runs": (
            text_candidates(project, tonight, budget).only(
                "id", "external_id", "title"
            )[:DEFERRED_SHOWN]
            if tonight is not None and tonight.text_deferred
            else []
        ),
        "nights": nights,
        "budget_form": budget_form,
        "caps_form": caps_form,
        "history": changes(project, show_money=show_money),
    }


OWNERS = {"budget": "per night", "caps": "per replay"}


def _label(owner: str, name: str) -> str:
    form: type[BoundedForm] = BudgetForm if owner == "budget" else CapsForm
    label = form._meta.labels.get(name) if form._meta.labels else None
    return label or f"{name.replace('_', ' ')} ({OWNERS[owner]})"


def changes(project: Project, *, show_money: bool) -> list[dict]:
    """The latest budget edits as (label, before, after) rows; money only if allowed.

    Each field is listed under its owner (the night's budget or the replay's
    caps): both have a ``max_tokens``. Events recorded before owners were kept
    apart list their fields by name.
    """
    events = AuditEvent.objects.filter(
        object_type="project", object_id=str(project.pk), action="budget.update"
    ).select_related("actor")[:5]
    out = []
    for event in events:
        fields = []
        for owner, after in event.after.items():
            if owner in OWNERS and isinstance(after, dict):
                before = event.before.get(owner) or {}
                fields += [
                    (_label(owner, name), before.get(name), value)
                    for name, value in after.items()
                    if show_money or name != "max_cost_usd"
                ]
            elif show_money or owner != "max_cost_usd":
                fields.append((owner, event.before.get(owner), after))
        if fields:
            out.append({"event": event, "fields": fields})
    return out


@require_GET
@permission_required(roles.VIEW_BUDGETS, raise_exception=True)
def budgets_page(request: HttpRequest) -> HttpResponse:
    cards = [project_card(p, request) for p in Project.objects.all()]
    return render(request, "reviews/budgets.html", {"page": "budgets", "cards": cards})


@require_http_methods(["GET", "POST"])
@permission_required(roles.VIEW_BUDGETS, raise_exception=True)
def budget_edit(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(Project, slug=slug)
    if request.method != "POST":
        # The form's address, opened again after a refused save: the page.
        return redirect(f"{reverse('reviews:budgets')}#budget-{project.slug}")
    if not request.user.has_perm(roles.MANAGE_BUDGETS):
        raise PermissionDenied
    budget = scheduler.budget_of(project)
    show_money = request.user.has_perm(roles.VIEW_MONEY)
    budget_form = BudgetForm(
        request.POST, instance=budget, prefix="budget", show_money=show_money
    )
    caps_form = CapsForm(request.POST, instance=project, prefix="caps")
    status = 200
    if budget_form.is_valid() and caps_form.is_valid():
        changed = services.budget_update(
            project=Project.objects.get(pk=project.pk),
            budget=Budget.objects.get(pk=budget.pk),
            actor=request.user,
            budget_data=budget_form.cleaned_data,
            cap_data=caps_form.cleaned_data,
        )
        if not request.htmx:
            return redirect("reviews:budgets")
        project.refresh_from_db()
        card = project_card(project, request)
        card["saved"] = "Saved." if changed else "Nothing changed."
    else:
        status = 400
        card = project_card(project, request, forms_=(budget_form, caps_form))
        if not request.htmx:
            cards = [
                card if p.pk == project.pk else project_card(p, request)
                for p in Project.objects.all()
            ]
            return render(
                request,
                "reviews/budgets.html",
                {"page": "budgets", "cards": cards},
                status=status,
            )
    return render(request, "reviews/budgets.html#card", {"card": card}, status=status)
