"""The budgets page: each project's nightly budget, caps, tonight's usage, history."""

from __future__ import annotations

from dataclasses import dataclass
from zoneinfo import available_timezones

from django import forms
from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from replayhub import nightly, roles
from replayhub.models import Budget, Night, Project

from . import services
from .models import AuditEvent

HISTORY_NIGHTS = 14


class BudgetForm(forms.ModelForm):
    class Meta:
        model = Budget
        fields = services.BUDGET_FIELDS

    def __init__(self, *args, show_money: bool, **kwargs):
        super().__init__(*args, **kwargs)
        if not show_money:
            del self.fields["max_cost_usd"]

    def clean_timezone(self) -> str:
        name = self.cleaned_data["timezone"]
        if name not in available_timezones():
            raise forms.ValidationError(f"{name!r} is not a known time zone.")
        return name

    def clean(self):
        data = super().clean()
        for name in ("window_start_hour", "window_end_hour"):
            if data.get(name) is not None and not 0 <= data[name] <= 23:
                self.add_error(name, "An hour is 0 to 23.")
        return data


class CapsForm(forms.ModelForm):
    class Meta:
        model = Project
        fields = services.CAP_FIELDS
        labels = {
            "agentic_enabled": "Agentic replays by the scheduler",
            "time_limit_seconds": "Agent time limit (s)",
            "test_time_limit_seconds": "Test run time limit (s)",
            "memory_limit_mb": "Memory (MiB)",
            "max_processes": "Processes",
            "max_tokens": "Tokens per replay",
            "max_turns": "Turns per replay",
        }

    def clean_time_limit_seconds(self) -> int:
        value = self.cleaned_data["time_limit_seconds"]
        if value < 1:
            raise forms.ValidationError("The time limit must be at least 1 second.")
        return value

    def clean_max_attempts(self) -> int:
        value = self.cleaned_data["max_attempts"]
        if value < 1:
            raise forms.ValidationError("At least one attempt.")
        return value


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


def project_card(project: Project, request: HttpRequest, forms_=None) -> dict:
    """Everything one project's card shows."""
    show_money = request.user.has_perm(roles.VIEW_MONEY)
    budget = nightly.budget_of(project)
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
        "nights": nights,
        "budget_form": budget_form,
        "caps_form": caps_form,
        "history": changes(project, show_money=show_money),
    }


def changes(project: Project, *, show_money: bool) -> list[dict]:
    """The latest budget edits as (field, before, after) rows; money only if allowed."""
    events = AuditEvent.objects.filter(
        object_type="project", object_id=str(project.pk), action="budget.update"
    ).select_related("actor")[:5]
    out = []
    for event in events:
        fields = [
            (name, event.before.get(name), value)
            for name, value in event.after.items()
            if show_money or name != "max_cost_usd"
        ]
        if fields:
            out.append({"event": event, "fields": fields})
    return out


@require_GET
@permission_required(roles.VIEW_BUDGETS, raise_exception=True)
def budgets_page(request: HttpRequest) -> HttpResponse:
    cards = [project_card(p, request) for p in Project.objects.all()]
    return render(request, "reviews/budgets.html", {"page": "budgets", "cards": cards})


@require_POST
@permission_required(roles.MANAGE_BUDGETS, raise_exception=True)
def budget_edit(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(Project, slug=slug)
    budget = nightly.budget_of(project)
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
