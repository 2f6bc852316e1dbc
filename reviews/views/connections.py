"""A project's connections, managed from the app: the ingest tokens producers
push runs with, the forge its commit statuses go to, and its webhooks. The
same workflows, and checks, as ``manage.py ingest_token``, ``project_forge``
and ``project_webhook``, audited (``project_services``); those who may edit
the project may use it, everyone else gets a 403.

A token issued here is shown once, on the page the POST that issued it
redirects to: it waits in the server-side session (never stored with the
token's row, never in a URL, a message, a cookie or a log) until that page
takes it out, so a reload shows it no more and issues nothing; that answer is
not cached. Every POST taken redirects back to the page; a refused forge or
webhook form is the page again (400). Those two forms are sent with htmx, so
a refusal is swapped in place and leaves no history entry that Back would
have to post again; their save taken sends the browser to the page."""

from __future__ import annotations

from collections.abc import Callable

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.text import capfirst
from django.views.decorators.http import require_http_methods
from django_htmx.http import HttpResponseClientRedirect

from replayhub import roles
from replayhub.models import (
    Forge,
    ForgeKind,
    IngestToken,
    Project,
    Webhook,
    WebhookFormat,
)
from replayhub.outbound import statuses
from replayhub.outbound.events import EVENTS
from replayhub.outbound.services import (
    OutboundInvalid,
    forge_problems,
    hook_name,
    webhook_problems,
    where,
)
from reviews.forms import ForgetsPastedKeys
from reviews.project_services import (
    connection_forge_forget,
    connection_forge_set,
    connection_token_issue,
    connection_token_revoke,
    connection_webhook_add,
    connection_webhook_remove,
)
from reviews.views import HtmxHttpRequest, confirmed

# The tokens the page lists, newest first.
TOKENS_SHOWN = 100
# Where an issued token waits, in the server-side session, for the one page
# that shows it.
ISSUED_KEY = "connections.issued"
VARIABLE_HELP = (
    "The name of the variable holding it on the workers, from "
    "REPLAYHUB_REPO_CREDENTIAL_ENVS. Only the name is stored."
)


def place(form: forms.Form, problems: list[tuple[str, str]]) -> None:
    """Each problem beside the field it is about, without the command-line
    option it names (``--events: …``); none beside a field the form refused
    already."""
    for field, message in problems:
        if field in form.errors:
            continue
        option, sep, rest = message.partition(": ")
        if sep and option.startswith("--"):
            message = rest
        form.add_error(field if field in form.fields else None, capfirst(message))


class IssueForm(forms.Form):
    rotate = forms.BooleanField(
        label="Revoke the project's other tokens", required=False
    )


class RowForm(forms.Form):
    """The row a Revoke or Remove button names."""

    id = forms.IntegerField(min_value=1)


class ForgeForm(ForgetsPastedKeys):
    variable_fields = ("token_env",)
    kind = forms.ChoiceField(label="Forge", choices=ForgeKind.choices)
    repo = forms.CharField(
        label="Repository",
        max_length=Forge._meta.get_field("repo").max_length,
        help_text="owner/repo on GitHub; the project's path or id on GitLab.",
    )
    token_env = forms.CharField(
        label="Token variable",
        max_length=Forge._meta.get_field("token_env").max_length,
        help_text=f"The forge's token. {VARIABLE_HELP}",
    )
    api_url = forms.URLField(
        label="API URL",
        required=False,
        assume_scheme="https",
        max_length=Forge._meta.get_field("api_url").max_length,
        help_text="A self-hosted forge's API. Empty: "
        + " or ".join(statuses.DEFAULT_API.values())
        + ".",
    )


class WebhookForm(ForgetsPastedKeys):
    variable_fields = ("secret_env",)
    url = forms.URLField(
        label="URL",
        assume_scheme="https",
        max_length=Webhook._meta.get_field("url").max_length,
        help_text="http:// or https://; a private address is refused.",
    )
    events = forms.MultipleChoiceField(
        label="Events",
        choices=[(event, event) for event in EVENTS],
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Tick at least one event."},
    )
    format = forms.ChoiceField(
        label="Format", choices=WebhookFormat.choices, initial=WebhookFormat.CLOUDEVENTS
    )
    secret_env = forms.CharField(
        label="Signing key variable",
        required=False,
        max_length=Webhook._meta.get_field("secret_env").max_length,
        help_text="Signs each body (X-ReplayHub-Signature-256); needed for "
        f"CloudEvents, not for Slack. {VARIABLE_HELP}",
    )


def _page(
    request: HtmxHttpRequest,
    project: Project,
    *,
    forge_form: ForgeForm | None = None,
    webhook_form: WebhookForm | None = None,
    issued: tuple[IngestToken, str] | None = None,
) -> HttpResponse:
    forge = Forge.objects.filter(project=project).first()
    if forge_form is None:
        initial = (
            {
                "kind": forge.kind,
                "repo": forge.repo,
                "token_env": forge.token_env,
                "api_url": forge.api_url,
            }
            if forge
            else {}
        )
        forge_form = ForgeForm(initial=initial, prefix="forge")
    webhooks = [
        (hook, where(hook.url), hook_name(hook.pk, hook.url))
        for hook in Webhook.objects.filter(project=project)
    ]
    refused = forge_form.errors or (webhook_form is not None and webhook_form.errors)
    return render(
        request,
        "reviews/project_connections.html",
        {
            "page": "projects",
            "project": project,
            "tokens": IngestToken.objects.filter(project=project)[:TOKENS_SHOWN],
            "issue_form": IssueForm(),
            # Revoking the others is offered only when there are some.
            "active_tokens": IngestToken.objects.active()
            .filter(project=project)
            .exists(),
            "issued": issued,
            "forge": forge,
            "forge_form": forge_form,
            "webhooks": webhooks,
            "webhook_form": webhook_form or WebhookForm(prefix="webhook"),
        },
        status=400 if refused else 200,
    )


def _back(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    url = reverse("reviews:project_connections", args=[project.slug])
    # A form sent with htmx (forge, webhook): the browser goes there.
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _row(request: HtmxHttpRequest, model: type[IngestToken] | type[Webhook], project):
    form = RowForm(request.POST)
    if not form.is_valid():
        raise Http404("No such row.")
    return get_object_or_404(model, pk=form.cleaned_data["id"], project=project)


def _issue(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    form = IssueForm(request.POST)
    rotate = form.is_valid() and form.cleaned_data["rotate"]
    row, token = connection_token_issue(
        actor=request.user, project=project, rotate=rotate
    )
    if rotate:
        messages.info(request, f"The other tokens of {project.slug} are revoked.")
    request.session[f"{ISSUED_KEY}.{project.pk}"] = {"id": row.pk, "token": token}
    return _back(request, project)


def _shown(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    """The page, with the token issued just before when it waits in the
    session: taken out as it is shown, so it is shown once."""
    waiting = request.session.pop(f"{ISSUED_KEY}.{project.pk}", None)
    issued = None
    if isinstance(waiting, dict):
        row = IngestToken.objects.filter(
            pk=int(waiting.get("id") or 0), project=project
        ).first()
        if row is not None:
            issued = (row, str(waiting.get("token", "")))
    response = _page(request, project, issued=issued)
    if issued is not None:
        # The one place the token is: this answer, kept by no cache.
        add_never_cache_headers(response)
    return response


def _revoke(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    token = _row(request, IngestToken, project)
    if not confirmed(request, f"revoke rhi_{token.prefix}_…"):
        return _back(request, project)
    connection_token_revoke(actor=request.user, token=token)
    messages.success(request, f"Token {token.prefix} revoked: the API refuses it.")
    return _back(request, project)


def _forge(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    form = ForgeForm(request.POST, prefix="forge")
    if form.is_valid():
        data = form.cleaned_data
        try:
            connection_forge_set(
                actor=request.user,
                project=project,
                kind=data["kind"],
                repo=data["repo"],
                token_env=data["token_env"],
                api_url=data["api_url"],
            )
        except OutboundInvalid as refusal:
            place(form, refusal.problems)
        else:
            messages.success(request, f"Forge of {project.slug} saved.")
            return _back(request, project)
    else:
        # The service's checks of the fields that did validate: every
        # problem is said at once.
        data = form.cleaned_data
        place(
            form,
            forge_problems(
                kind=data.get("kind"),
                repo=data.get("repo"),
                token_env=data.get("token_env"),
                api_url=data.get("api_url"),
            ),
        )
    return _page(request, project, forge_form=form)


def _forget(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    if connection_forge_forget(actor=request.user, project=project):
        messages.success(request, f"{project.slug} sets no commit status now.")
    return _back(request, project)


def _webhook(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    form = WebhookForm(request.POST, prefix="webhook")
    if form.is_valid():
        data = form.cleaned_data
        try:
            hook = connection_webhook_add(
                actor=request.user,
                project=project,
                url=data["url"],
                events_wanted=data["events"],
                format=data["format"],
                secret_env=data["secret_env"],
            )
        except OutboundInvalid as refusal:
            place(form, refusal.problems)
        else:
            name = hook_name(hook.pk, hook.url)
            messages.success(request, f"{capfirst(name)} added.")
            return _back(request, project)
    else:
        data = form.cleaned_data
        place(
            form,
            webhook_problems(
                url=data.get("url"),
                events_wanted=data.get("events"),
                format=data.get("format"),
                secret_env=data.get("secret_env"),
            ),
        )
    return _page(request, project, webhook_form=form)


def _remove(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    hook = _row(request, Webhook, project)
    name = hook_name(hook.pk, hook.url)
    if not confirmed(request, f"remove {name}"):
        return _back(request, project)
    connection_webhook_remove(actor=request.user, hook=hook)
    messages.success(request, f"{capfirst(name)} removed.")
    return _back(request, project)


ACTIONS: dict[str, Callable[[HtmxHttpRequest, Project], HttpResponse]] = {
    "issue": _issue,
    "revoke": _revoke,
    "forge": _forge,
    "forget": _forget,
    "webhook": _webhook,
    "remove": _remove,
}


@require_http_methods(["GET", "POST"])
@permission_required(roles.MANAGE_PROJECTS, raise_exception=True)
def project_connections(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """The page; a POST names what it does in ``form``."""
    project = get_object_or_404(Project, slug=slug)
    if request.method == "GET":
        return _shown(request, project)
    action = ACTIONS.get(request.POST.get("form", ""))
    if action is None:
        return _back(request, project)
    return action(request, project)
