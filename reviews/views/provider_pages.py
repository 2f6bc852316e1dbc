"""The model providers, managed from the app: the list, a provider added or
edited with the same rules as ``manage.py provider_add``
(``gateway.registry``). The key itself is never asked for: only the name of
the workers' variable that holds it. The edit form carries the fingerprint
of the stored values it was opened with (``stale``), as every settings form
does: a save from a page older than another admin's save is refused."""

from __future__ import annotations

import os

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.db import transaction
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from replayhub.gateway.registry import (
    ProviderProblems,
    keys_unset,
    price_lines,
    provider_fields,
)
from replayhub.models import Budget, Project, Provider, ProviderKind
from reviews.forms import ForgetsPastedKeys, unclipped
from reviews.models import AuditEvent
from reviews.views import HtmxHttpRequest, confirmed
from reviews.views.stale import fingerprint, refusal, stored_values

VIEW_PROVIDERS = "replayhub.view_provider"
MANAGE_PROVIDERS = "replayhub.change_provider"
# A price list's size on the form, in characters.
MAX_PRICES_CHARS = 20_000


class ProviderForm(ForgetsPastedKeys):
    variable_fields = ("key_env",)
    name = unclipped(
        forms.CharField(
            max_length=64, help_text="Letters, digits, - and _; projects name it."
        )
    )
    kind = forms.ChoiceField(label="Wire", choices=ProviderKind.choices)
    base_url = forms.CharField(
        label="Base URL",
        max_length=512,
        help_text="The upstream API's base URL, e.g. https://api.anthropic.com",
    )
    key_env = forms.CharField(
        label="Key variable",
        max_length=128,
        help_text="The name of the environment variable on the workers that "
        "holds the key. The key itself is never stored.",
    )
    prices = forms.CharField(
        label="Prices",
        required=False,
        max_length=MAX_PRICES_CHARS,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="One a line: MODEL=IN,OUT or MODEL=IN,OUT,CACHED, in USD per "
        "million tokens.",
    )

    def __init__(self, *args, existing: Provider | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.existing = existing
        if existing is not None:
            self.fields["name"].disabled = True

    def clean(self) -> dict:
        data = super().clean() or {}
        if self.errors:
            return data
        lines = [line.strip() for line in data["prices"].splitlines()]
        try:
            self.provider = provider_fields(
                name=data["name"] if self.existing is None else self.existing.name,
                kind=data["kind"],
                base_url=data["base_url"].strip(),
                key_env=data["key_env"].strip(),
                prices=[line for line in lines if line],
                existing=self.existing,
            )
        except ProviderProblems as exc:
            for field, problem in exc.problems:
                self.add_error(field, problem)
        return data


@require_http_methods(["GET", "POST"])
@permission_required(VIEW_PROVIDERS, raise_exception=True)
def providers(request: HtmxHttpRequest) -> HttpResponse:
    """Every provider, and the form that adds one (for those who may)."""
    may_manage = request.user.has_perm(MANAGE_PROVIDERS)
    form = ProviderForm(request.POST or None) if may_manage else None
    if request.method == "POST":
        if form is None:
            return HttpResponse("You may not add providers.", status=403)
        if form.is_valid():
            provider = Provider.objects.create(**form.provider)
            _audit(request, provider, "added")
            messages.success(request, f"Provider {provider.name} added.")
            return _to_the_list(request)
    listed = Provider.objects.annotate(used_by=Count("projects")).order_by("name")
    return render(
        request,
        "reviews/providers.html",
        {
            "page": "projects",
            "providers": listed,
            "form": form,
            "keys_unset": keys_unset(((p.name, p.key_env) for p in listed), os.environ),
        },
        status=400 if form is not None and form.errors else 200,
    )


@require_http_methods(["GET", "POST"])
@permission_required(MANAGE_PROVIDERS, raise_exception=True)
def provider_edit(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """Edit a provider; a save from a page opened before another admin's
    save is refused (409), the values typed kept (``stale``)."""
    provider = get_object_or_404(Provider, name=name)
    form = ProviderForm(initial=_initial(provider), existing=provider)
    stale, status = None, 400
    if request.method == "POST":
        with transaction.atomic():
            # The provider's row locked first: the check and the save are one.
            provider = Provider.objects.select_for_update().get(pk=provider.pk)
            form = ProviderForm(
                request.POST, initial=_initial(provider), existing=provider
            )
            # Cleaned first: a key pasted for its variable is forgotten before
            # a refusal lists what this form holds.
            valid = form.is_valid()
            refused = refusal(form, _stored_form(provider), f"Provider {provider.name}")
            if refused:
                stale, status = refused
            elif valid:
                return _saved(request, provider, form.provider)
    return render(
        request,
        "reviews/provider_form.html",
        {
            "page": "projects",
            "provider": provider,
            "form": form,
            # The stored values the form is rendered from (``stale``).
            "stored": fingerprint(stored_values([_stored_form(provider)])),
            "stale": stale,
            "used_by": users_of(provider),
            "keys_unset": keys_unset([(provider.name, provider.key_env)], os.environ),
        },
        status=status if request.method == "POST" else 200,
    )


def _stored(provider: Provider) -> dict:
    """A provider's own fields as stored (never a key: it has none)."""
    return {
        "name": provider.name,
        "kind": provider.kind,
        "base_url": provider.base_url,
        "key_env": provider.key_env,
    }


def _initial(provider: Provider) -> dict:
    """The edit form's values, as ``provider`` has them stored."""
    return {**_stored(provider), "prices": price_lines(provider)}


def _stored_form(provider: Provider) -> ProviderForm:
    """The edit form unbound, as the provider's stored values fill it."""
    return ProviderForm(initial=_initial(provider), existing=provider)


def _saved(request: HtmxHttpRequest, provider: Provider, values: dict) -> HttpResponse:
    """``values`` written to ``provider`` and audited, or, when they change
    nothing, said so (as the project form does)."""
    changed = {
        field: value
        for field, value in values.items()
        if getattr(provider, field) != value
    }
    if not changed:
        messages.success(
            request, f"No changes to provider {provider.name}: nothing was saved."
        )
        return _to_the_list(request)
    before = _shown(provider)
    for field, value in changed.items():
        setattr(provider, field, value)
    provider.save()
    _audit(request, provider, "edited", before)
    messages.success(request, f"Provider {provider.name} saved.")
    return _to_the_list(request)


def _to_the_list(request: HtmxHttpRequest) -> HttpResponse:
    """After a save taken, the list. A form sent with htmx (a refused save
    was swapped in place, leaving no history entry that Back would have to
    post again) sends the browser there; a plain post is redirected."""
    url = reverse("reviews:providers")
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def users_of(provider: Provider) -> list[str]:
    """What still names ``provider``: projects (their agents call it) and
    budgets (their text tier's target or judge)."""
    projects = Project.objects.filter(providers=provider)
    named = [f"project {slug}" for slug in projects.values_list("slug", flat=True)]
    prefix = f"{provider.name}:"
    budgets = Budget.objects.filter(
        Q(text_target__startswith=prefix) | Q(text_judge__startswith=prefix)
    )
    named += [
        f"the text tier of {slug}"
        for slug in budgets.values_list("project__slug", flat=True).distinct()
    ]
    return sorted(named)


@require_POST
@permission_required(MANAGE_PROVIDERS, raise_exception=True)
def provider_remove(request: HttpRequest, name: str) -> HttpResponse:
    """Remove a provider nothing names any more; one in use stays, saying
    what uses it."""
    provider = get_object_or_404(Provider, name=name)
    if not confirmed(request, f"remove provider {provider.name}"):
        return redirect("reviews:provider_edit", name=provider.name)
    if users := users_of(provider):
        messages.error(
            request,
            f"Provider {provider.name} is kept: {', '.join(users[:10])} "
            f"{'names' if len(users) == 1 else 'name'} it. Change "
            f"{'that' if len(users) == 1 else 'those'} first.",
        )
        return redirect("reviews:provider_edit", name=provider.name)
    _audit(request, provider, "removed")
    provider.delete()
    messages.success(request, f"Provider {name} removed.")
    return redirect("reviews:providers")


def _audit(
    request: HttpRequest, provider: Provider, done: str, before: dict | None = None
) -> None:
    shown = _shown(provider)
    AuditEvent.objects.create(
        actor=request.user if request.user.is_authenticated else None,
        action=f"provider.{done}",
        object_type="provider",
        object_id=str(provider.pk),
        before=shown if done == "removed" else before or {},
        after={} if done == "removed" else shown,
    )


def _shown(provider: Provider) -> dict:
    """What the audit keeps of a provider: its fields and the models priced."""
    return {**_stored(provider), "models_priced": sorted(provider.prices)}
