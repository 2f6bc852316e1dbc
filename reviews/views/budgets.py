"""The budgets page: each project's nightly budget, caps, tonight's usage, history."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from django import forms
from django.contrib.auth.decorators import permission_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from replayhub import roles
from replayhub.models import Budget, BudgetShare, Night, NightShare, Project, Run
from replayhub.nights import scheduler, shares, tiers
from replayhub.nights.arithmetic import Amounts
from replayhub.nights.replicate_tier import replicate_candidates
from replayhub.nights.tape_tier import tape_candidates
from replayhub.texttier.night import text_candidates
from reviews import services
from reviews.models import AuditEvent
from reviews.project_services import replicates_update
from reviews.templatetags.budget_tags import count, figure, money
from reviews.views import HtmxHttpRequest
from reviews.views.budget_forms import (
    LEGACY_LABELS,
    MONEY,
    SHARE_BOUNDS,
    SHARE_LABELS,
    TIER_TITLES,
    BoundedForm,
    BudgetForm,
    CapsForm,
    ReplicateForm,
    ShareForm,
    refuse_idle_agentic,
    refuse_long_tests,
)
from reviews.views.night_start import started
from reviews.views.stale import (
    CHANGED,
    CHANGED_LINE,
    CURRENT,
    FIELD,
    UNREADABLE_LINE,
    Difference,
    differences,
    fingerprint,
    stored_values,
    verdict,
)

HISTORY_NIGHTS = 14
# Deferred runs listed per tier on a card (the counts are whole).
DEFERRED_SHOWN = 10


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


# Each dimension as a bar shows it: its name and unit, and its figure from the
# night's (sandbox time in minutes, money as a plain number).
DIMENSION_BARS: dict[str, tuple[str, str, Callable[[Any], float]]] = {
    "replays": ("replays", "", int),
    "sandbox_seconds": ("sandbox minutes", "min", lambda s: s / 60),
    "tokens": ("tokens", "", int),
    "cost_usd": ("money", "USD", float),
}


def _dimensions(tier: str, *, show_money: bool) -> list[str]:
    return [d for d in tiers.budgeted(tier) if show_money or d != "cost_usd"]


def bars(share: NightShare, *, show_money: bool) -> list[Bar]:
    """One bar per dimension the share's tier budgets; money only if allowed.
    The agentic tier's bars are the night's plain ones ("Replays"), another
    tier's are named for it ("Tape replays")."""
    out = []
    for dimension in _dimensions(share.tier, show_money=show_money):
        name, unit, figure = DIMENSION_BARS[dimension]
        if share.tier != tiers.AGENTIC:
            name = f"{tiers.LABELS[share.tier]} {name}"
        out.append(
            Bar(
                name[0].upper() + name[1:],
                figure(getattr(share, f"used_{dimension}")),
                figure(getattr(share, f"reserved_{dimension}")),
                figure(getattr(share, f"limit_{dimension}")),
                unit,
            )
        )
    return out


@dataclass
class DeferredRun:
    run: Run
    since: datetime | None = None


def deferred_runs(
    tier: str, project: Project, budget: Budget, tonight: Night | None, count: int
) -> list[DeferredRun]:
    """The runs ``tier`` left for later, first in line next time: the
    agentic tier's are marked on the run (``deferred_at``); the tape and text
    tiers' are their candidates still waiting when tonight deferred some."""
    fields = ("id", "external_id", "title")
    if tier == tiers.AGENTIC:
        runs = (
            Run.objects.filter(project=project, deferred_at__isnull=False)
            .only(*fields, "deferred_at")
            .order_by("deferred_at", "id")[:DEFERRED_SHOWN]
        )
        return [DeferredRun(run, run.deferred_at) for run in runs]
    if tonight is None or not count:
        return []
    if tier == tiers.REPLICATE:
        policy = budget.replicate_policy()
        ids = (
            [c.run_id for c in replicate_candidates(project, policy)] if policy else []
        )
        waiting = Run.objects.filter(pk__in=ids[:DEFERRED_SHOWN])
    elif tier == tiers.TAPE:
        waiting = tape_candidates(project)
    else:
        waiting = text_candidates(project, tonight, budget)
    return [DeferredRun(run) for run in waiting.only(*fields)[:DEFERRED_SHOWN]]


def _tiers_on(budget: Budget) -> dict[str, bool]:
    """Which tiers the night runs (the agentic one: the scheduler's)."""
    return {
        tiers.AGENTIC: budget.project.agentic_enabled,
        tiers.TEXT: budget.text_enabled,
        tiers.TAPE: budget.tape_enabled,
        tiers.REPLICATE: budget.replicate_threshold is not None,
    }


def _shown(budget: Budget, nights: list[Night]) -> list[str]:
    """The tiers a card shows: those that are on (the agentic share, charged
    by explicit replays too, always), and any other that spent or deferred in
    one of the nights shown (a tier turned off since)."""
    on = _tiers_on(budget) | {tiers.AGENTIC: True}
    spent = {
        share.tier
        for night in nights
        for share in night.shares.all()
        if share.deferred
        or share.amounts("used") != Amounts()
        or share.amounts("reserved") != Amounts()
    }
    return [t for t in tiers.SHARE_TIERS if on.get(t) or t in spent]


# The history table's columns: every dimension some shown tier budgets.
HISTORY_LABELS = {
    "replays": "Replays",
    "sandbox_seconds": "Sandbox min",
    "tokens": "Tokens",
    "cost_usd": "Money (USD)",
}


def _figure(bar: Bar) -> str:
    return f"{figure(bar.used, bar.unit)}/{figure(bar.limit, bar.unit)}"


def history(nights: list[Night], shown: list[str], *, show_money: bool) -> dict:
    """The card's table of past nights: a row per shown tier of each night,
    a column per dimension any of them budgets (used/limit; None where the
    tier budgets no such thing), then its deferred count. Rows rather than a
    column group per tier keep the table within a 1024 px screen."""
    dimensions = [
        d
        for d in HISTORY_LABELS
        if any(d in _dimensions(tier, show_money=show_money) for tier in shown)
    ]
    rows = []
    for night in nights:
        by_tier = {share.tier: share for share in night.shares.all()}
        cells = []
        for tier in shown:
            share = by_tier.get(tier) or NightShare(night=night, tier=tier)
            mine = _dimensions(tier, show_money=show_money)
            figures = iter(bars(share, show_money=show_money))
            cells.append(
                {
                    "label": tiers.LABELS[tier],
                    "figures": [
                        _figure(next(figures)) if d in mine else None
                        for d in dimensions
                    ],
                    "deferred": share.deferred,
                }
            )
        rows.append({"night": night, "tiers": cells})
    return {
        "labels": [HISTORY_LABELS[d] for d in dimensions],
        "rows": rows,
        # The night, its status and the tier, the figures, the deferred.
        "span": 4 + len(dimensions),
    }


def _section(
    tier: str, share: NightShare | None, card: dict, *, show_money: bool
) -> dict:
    """One tier of tonight: its bars, its deferred count and runs."""
    count = share.deferred if share else 0
    return {
        "tier": tier,
        "title": TIER_TITLES[tier],
        # A tier turned off may still show what was counted against it.
        "on": _tiers_on(card["budget"])[tier],
        "bars": bars(share, show_money=show_money) if share else [],
        "deferred": count,
        "deferred_runs": deferred_runs(
            tier, card["project"], card["budget"], card["tonight"], count
        ),
    }


def project_card(
    project: Project, request: HttpRequest, forms_=None, replicate_form=None
) -> dict:
    """Everything one project's card shows."""
    show_money = request.user.has_perm(roles.VIEW_MONEY)
    # Read only: a page view never creates the row (an unsaved one shows the
    # defaults; saving the form creates it).
    budget = Budget.objects.filter(project=project).prefetch_related(
        "shares"
    ).first() or Budget(project=project)
    nights = list(
        Night.objects.filter(project=project)
        .prefetch_related("shares")
        .order_by("-date")[:HISTORY_NIGHTS]
    )
    now = timezone.now()
    tonight = next(
        (n for n in nights if n.window_start <= now < n.window_end), None
    ) or (nights[0] if nights else None)
    stored_forms = stored_card_forms(project, budget, show_money=show_money)
    budget_form, caps_form, share_forms = forms_ or stored_forms[:3]
    shown = _shown(budget, nights)
    card = {
        "project": project,
        "budget": budget,
        "tonight": tonight,
        "limits": limits(budget, show_money=show_money),
        "nights": nights,
        "history": history(nights, shown, show_money=show_money),
        "budget_form": budget_form,
        "caps_form": caps_form,
        "share_forms": share_forms,
        "replicate_form": replicate_form or stored_forms[3],
        # The stored values this card's form is rendered from (``stale``).
        "stored": fingerprint(stored_values(_flat(stored_forms))),
        "policy": budget.replicate_policy(),
        # With every tier off, starting a night could only skip it.
        "can_start": any(_tiers_on(budget).values()),
        "changes": changes(project, show_money=show_money),
    }
    tonight_shares = {s.tier: s for s in tonight.shares.all()} if tonight else {}
    card["sections"] = [
        _section(tier, tonight_shares.get(tier), card, show_money=show_money)
        for tier in shown
    ]
    return card


def limits(budget: Budget, *, show_money: bool) -> list[tuple[str, str]]:
    """Each tier's share for those who may read but not edit it: a tier that
    is off says so alone, its numbers unused. The agentic share, off for the
    scheduler, still pays for an explicit "Replay now"."""
    on = _tiers_on(budget)
    out = []
    for tier, share in shares.budget_shares(budget).items():
        facts = _limit_facts(tier, share, show_money=show_money)
        if tier == tiers.AGENTIC and not on[tier]:
            facts = f"off at night; Replay now spends from {facts}"
        elif not on[tier]:
            facts = "off"
        out.append((TIER_TITLES[tier], facts))
    return out


def _limit_facts(tier: str, share: tiers.Share, *, show_money: bool) -> str:
    """A tier's share in one line, for those who may read but not edit it."""
    parts = []
    for name in shares.share_fields(tier):
        if name == "max_cost_usd" and not show_money:
            continue
        value = getattr(share, name)
        unit = SHARE_BOUNDS[name][2]
        parts.append(f"{money(value) if name in MONEY else count(value)}{unit}")
    return ", ".join(parts) + " per night"


def card_forms(project: Project, budget: Budget, *, show_money: bool, data=None):
    """The card's forms, each with a prefix of its own (the project's slug,
    and the tier's): two cards on one page never share a field id, so a
    label never ticks a box on another card."""
    slug = project.slug
    saved = {row.tier: row for row in budget.shares.all()} if budget.pk else {}
    share_forms = [
        ShareForm(
            data,
            instance=saved.get(tier)
            or BudgetShare(
                budget=budget, tier=tier, **asdict(tiers.DEFAULT_SHARES[tier])
            ),
            prefix=f"share-{slug}-{tier}",
            tier=tier,
            show_money=show_money,
        )
        for tier in tiers.SHARE_TIERS
    ]
    return (
        BudgetForm(data, instance=budget, prefix=f"budget-{slug}"),
        CapsForm(data, instance=project, prefix=f"caps-{slug}"),
        share_forms,
    )


def stored_card_forms(project: Project, budget: Budget, *, show_money: bool) -> tuple:
    """The card's forms unbound, as the stored values fill them: its
    ``card_forms`` and its ``ReplicateForm``."""
    budget_form, caps_form, share_forms = card_forms(
        project, budget, show_money=show_money
    )
    replicate_form = ReplicateForm(instance=budget, prefix=f"replicates-{project.slug}")
    return budget_form, caps_form, share_forms, replicate_form


def _flat(forms_: tuple) -> list[forms.BaseForm]:
    """A card's forms in one list, in the order the card shows them."""
    budget_form, caps_form, share_forms, replicate_form = forms_
    return [budget_form, *share_forms, replicate_form, caps_form]


OWNERS = {"budget": "per night", "caps": "per replay"}


def _label(owner: str, name: str) -> str:
    if owner == "budget" and name in LEGACY_LABELS:
        return LEGACY_LABELS[name]
    form: type[BoundedForm] = BudgetForm if owner == "budget" else CapsForm
    label = form._meta.labels.get(name) if form._meta.labels else None
    return label or f"{name.replace('_', ' ')} ({OWNERS[owner]})"


def changes(project: Project, *, show_money: bool) -> list[dict]:
    """The latest budget edits as (label, before, after) rows; money only if allowed.

    Each field is listed under its owner (the night's budget, a tier's share
    of it, or the replay's caps): all have a ``max_tokens``. Events recorded
    before owners were kept apart list their fields by name; those recorded
    before the tiers' shares were rows keep their budget's names.
    """
    events = AuditEvent.objects.filter(
        object_type="project", object_id=str(project.pk), action="budget.update"
    ).select_related("actor")[:5]
    out = []
    for event in events:
        fields = []
        for owner, after in event.after.items():
            before = event.before.get(owner)
            if owner == "shares" and isinstance(after, dict):
                fields += _share_changes(before, after, show_money=show_money)
            elif owner in OWNERS and isinstance(after, dict):
                before = before if isinstance(before, dict) else {}
                fields += [
                    (_label(owner, name), before.get(name), value)
                    for name, value in after.items()
                    if show_money or name not in MONEY
                ]
            elif show_money or owner not in MONEY:
                fields.append((owner, before, after))
        if fields:
            shown = [(label, _said(was), _said(now)) for label, was, now in fields]
            out.append({"event": event, "fields": shown})
    return out


def _said(value: Any) -> Any:
    """A value as people write one: a list as "security, payments" (or
    "none"), a switch as "on" or "off", no value as "not set"; any other
    value as recorded (the page escapes and shortens each)."""
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "not set"
    return value


def _share_changes(before, after: dict, *, show_money: bool) -> list[tuple]:
    before = before if isinstance(before, dict) else {}
    rows = []
    for tier, fields in after.items():
        if tier not in TIER_TITLES or not isinstance(fields, dict):
            continue
        was = before.get(tier) if isinstance(before.get(tier), dict) else {}
        rows += [
            (f"{SHARE_LABELS.get(name, name)}, {tier} tier", was.get(name), value)
            for name, value in fields.items()
            if show_money or name not in MONEY
        ]
    return rows


@require_GET
@permission_required(roles.VIEW_BUDGETS, raise_exception=True)
def budgets_page(request: HttpRequest) -> HttpResponse:
    cards = [project_card(p, request) for p in Project.objects.all()]
    for card in cards:
        card["started"] = started(request, card["project"].slug)
    return render(request, "reviews/budgets.html", {"page": "budgets", "cards": cards})


def problems_of(forms_: Sequence[forms.BaseForm]) -> list[tuple[str, str, str]]:
    """Each refused field of a card's forms: (label, id, its errors), for the
    list said beside the Save button."""
    found = [
        ("", "", " ".join(str(error) for error in form.non_field_errors()))
        for form in forms_
        if form.non_field_errors()
    ]
    for form in forms_:
        # Each tier's share has the same labels: the tier names the field.
        tier = form.tier if isinstance(form, ShareForm) else None
        found += [
            (
                _with_tier(tier, str(field.label)),
                field.id_for_label,
                " ".join(map(str, field.errors)),
            )
            for field in form
            if field.errors
        ]
    return found


def _with_tier(tier: str | None, label: str) -> str:
    """``Money per night (USD)`` of the text tier: ``Text tier — money per
    night (USD)``."""
    if tier is None:
        return label
    return f"{tiers.LABELS[tier]} tier — {label[:1].lower()}{label[1:]}"


@require_http_methods(["GET", "POST"])
@permission_required(roles.VIEW_BUDGETS, raise_exception=True)
def budget_edit(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(Project, slug=slug)
    if request.method != "POST":
        # The form's address, opened again after a refused save: the page.
        return redirect(f"{reverse('reviews:budgets')}#budget-{project.slug}")
    if not request.user.has_perm(roles.MANAGE_BUDGETS):
        raise PermissionDenied
    with transaction.atomic():
        # The project's row is locked first by each form that edits its
        # values (the project form too): a check and its save are one.
        project = Project.objects.select_for_update().get(pk=project.pk)
        card, status = _save_card(request, project)
    if card is None:
        return redirect("reviews:budgets")
    if status != 200 and not request.htmx:
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


def _save_card(request: HtmxHttpRequest, project: Project) -> tuple[dict | None, int]:
    """Save a card's post: the card to show and its status (no card: the
    page, saved). Refused unchanged when the stored values are no longer
    those the form was rendered from (``stale``)."""
    budget = scheduler.budget_of(project)
    show_money = request.user.has_perm(roles.VIEW_MONEY)
    # Before the posted forms are checked, which writes into their instances.
    stored = stored_card_forms(
        Project.objects.get(pk=project.pk),
        Budget.objects.get(pk=budget.pk),
        show_money=show_money,
    )
    forms_ = card_forms(project, budget, show_money=show_money, data=request.POST)
    budget_form, caps_form, share_forms = forms_
    replicate_form = ReplicateForm(
        request.POST,
        instance=Budget.objects.get(pk=budget.pk),
        prefix=f"replicates-{project.slug}",
    )
    posted = (budget_form, caps_form, share_forms, replicate_form)
    found = verdict(request.POST.get(FIELD), fingerprint(stored_values(_flat(stored))))
    if found != CURRENT:
        card = project_card(_fresh(project), request, forms_, replicate_form)
        line = CHANGED_LINE if found == CHANGED else UNREADABLE_LINE
        card["stale"] = {
            "line": line.format(name=f"{project.slug}'s budget"),
            "now": stale_rows(differences(_flat(posted), _flat(stored))),
        }
        return card, 409 if found == CHANGED else 400
    refuse_idle_agentic(caps_form, share_forms)
    refuse_long_tests(caps_form, share_forms)
    if not all(form.is_valid() for form in _flat(posted)):
        card = project_card(_fresh(project), request, forms_, replicate_form)
        card["problems"] = problems_of(
            (budget_form, caps_form, *share_forms, replicate_form)
        )
        return card, 400
    changed = services.budget_update(
        project=Project.objects.get(pk=project.pk),
        budget=Budget.objects.get(pk=budget.pk),
        actor=request.user,
        budget_data=budget_form.cleaned_data,
        cap_data=caps_form.cleaned_data,
        share_data={form.tier: form.cleaned_data for form in share_forms},
    )
    changed |= bool(
        replicates_update(
            actor=request.user, project=project, policy=replicate_form.policy()
        )
    )
    if not request.htmx:
        return None, 200
    card = project_card(_fresh(project), request)
    card["saved"] = "Saved." if changed else "Nothing changed."
    return card, 200


def _fresh(project: Project) -> Project:
    """The project as stored (a checked form writes into its instance)."""
    return Project.objects.get(pk=project.pk)


def stale_rows(found: list[Difference]) -> list[tuple[str, str, str, str]]:
    """Each field whose stored value is not the posted one: (label, id,
    stored value, posted value), its tier naming a share's field."""
    return [
        (
            _with_tier(
                getattr(d.field.form, "tier", None)
                if isinstance(d.field.form, ShareForm)
                else None,
                str(d.field.label),
            ),
            d.field.id_for_label,
            d.now,
            d.posted,
        )
        for d in found
    ]
