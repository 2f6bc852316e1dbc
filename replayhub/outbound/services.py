"""Outbound workflows: configuring a forge and webhooks, queueing a delivery
once, and one attempt to send it.

A delivery is queued by creating its row under its key (``Delivery.key``,
unique): a second queueing of the same message finds the row and sends
nothing, whichever worker or receiver asks. ``delivery_send`` is what the
``deliver`` task runs: it claims the row with a conditional UPDATE, makes one
attempt, and says whether (and in how long) to try again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.text import capfirst

from replayhub.celery import Task, enqueue
from replayhub.git.mirrors import credential_env_problem
from replayhub.models import (
    Delivery,
    DeliveryStatus,
    DeliveryTarget,
    Forge,
    Project,
    Replay,
    Webhook,
    WebhookFormat,
)
from replayhub.models.projects import credential_policy
from replayhub.outbound import events, statuses
from replayhub.outbound.addresses import (
    AddressRefused,
    Unresolved,
    networks,
    resolve,
)
from replayhub.outbound.post import Unreachable, post

log = logging.getLogger(__name__)

# The longest wait between two attempts.
MAX_BACKOFF_SECONDS = 600
# The longest an attempt may take, answer read (the task's soft time limit);
# its claim outlives it.
ATTEMPT_SECONDS = 3 * settings.REPLAYHUB_OUTBOUND_TIMEOUT_SECONDS
# A pending delivery held by nothing for this long is sent again by the sweep:
# longer than the longest wait and an attempt's claim.
SWEEP_AFTER = timedelta(minutes=15)


class OutboundInvalid(Exception):
    """A forge or webhook setting refused: every problem at once, each as
    ``(field, sentence)`` in ``problems``. It stands for the first, so a
    command that reports one line reports that one; a sentence about an
    option begins with it (``--events: …``)."""

    def __init__(self, problems: list[tuple[str, str]]):
        super().__init__(problems[0][1])
        self.problems = problems


class NotSendable(Exception):
    """A delivery that cannot be sent as configured: not worth a retry."""


def allowed_networks():
    return networks(settings.REPLAYHUB_OUTBOUND_ALLOW_PRIVATE)


def url_problem(url: str) -> str:
    """Why the workers may not post to ``url`` ("" when they may). A host that
    does not resolve from here may be named: each delivery checks again."""
    try:
        resolve(url, allowed_networks())
    except Unresolved:
        return ""
    except AddressRefused as exc:
        return str(exc)
    return ""


def env_problem(name: str, url: str) -> str:
    """Why ``name`` may not hold a token or key sent with requests to ``url``:
    the repository credentials' checks and allow-list."""
    return credential_env_problem(name, url) or credential_policy().problem(name)


def _variable_problem(name: str, url: str) -> str:
    """``env_problem``; beside a URL of a scheme no variable is sent to (the
    URL's own problem), only the name's problems, as for an https:// URL."""
    if urlsplit(url).scheme.lower() not in ("http", "https"):
        url = "https://host.invalid/"
    return env_problem(name, url)


def forge_problems(
    *,
    kind: str | None,
    repo: str | None,
    token_env: str | None,
    api_url: str | None = "",
) -> list[tuple[str, str]]:
    """Every ``(field, problem)`` of a forge's settings. A value that is None
    was refused before (a form's field) and is not checked, nor what depends
    on it: a repository without its forge, an address without its forge or
    its own value. The token's variable is then checked as for https://."""
    if kind is not None and kind not in statuses.DEFAULT_API:
        return [("kind", f"--forge: one of {', '.join(statuses.DEFAULT_API)}.")]
    if api_url is not None and kind is not None:
        api_url = api_url or statuses.DEFAULT_API[kind]
    api_url = (api_url or "").rstrip("/")
    # The address before the token: a token's rules depend on the URL's scheme.
    return _found(
        (
            "repo",
            statuses.repo_problem(kind, repo) if kind and repo is not None else "",
        ),
        ("api_url", url_problem(api_url) if api_url else ""),
        (
            "token_env",
            "" if token_env is None else _variable_problem(token_env, api_url),
        ),
    )


def forge_set(
    *, project: Project, kind: str, repo: str, token_env: str, api_url: str = ""
) -> Forge:
    """Name the project's forge; raises OutboundInvalid with every problem."""
    if problems := forge_problems(
        kind=kind, repo=repo, token_env=token_env, api_url=api_url
    ):
        raise OutboundInvalid(problems)
    forge, _ = Forge.objects.update_or_create(
        project=project,
        defaults={
            "kind": kind,
            "api_url": (api_url or statuses.DEFAULT_API[kind]).rstrip("/"),
            "repo": repo,
            "token_env": token_env,
        },
    )
    return forge


def webhook_problems(
    *,
    url: str | None,
    events_wanted: list[str] | None,
    format: str | None = WebhookFormat.CLOUDEVENTS,
    secret_env: str | None = "",
) -> list[tuple[str, str]]:
    """Every ``(field, problem)`` of a webhook's settings. A CloudEvents
    webhook must be signed; a Slack one may not be (Slack's URL is its own
    secret). A value that is None was refused before (a form's field) and is
    not checked, nor what depends on it; the key's variable is then checked
    as for https://."""
    format_problem = (
        ""
        if format is None or format in WebhookFormat.values
        else f"--format: one of {', '.join(WebhookFormat.values)}."
    )
    events_problem = (
        "" if events_wanted is None else events.events_problem(events_wanted)
    )
    unsigned = format == WebhookFormat.CLOUDEVENTS and secret_env == ""
    # The address before the key: a key's rules depend on the URL's scheme.
    return _found(
        ("format", format_problem),
        ("events", events_problem and f"--events: {events_problem}"),
        (
            "secret_env",
            "--secret-env: a CloudEvents webhook is signed." if unsigned else "",
        ),
        ("url", "" if url is None else url_problem(url)),
        (
            "secret_env",
            _variable_problem(secret_env, url or "") if secret_env else "",
        ),
    )


def webhook_add(
    *,
    project: Project,
    url: str,
    events_wanted: list[str],
    format: str = WebhookFormat.CLOUDEVENTS,
    secret_env: str = "",
) -> Webhook:
    """Add a webhook; raises OutboundInvalid with every problem
    (``webhook_problems``)."""
    if problems := webhook_problems(
        url=url, events_wanted=events_wanted, format=format, secret_env=secret_env
    ):
        raise OutboundInvalid(problems)
    return Webhook.objects.create(
        project=project,
        url=url,
        events=list(dict.fromkeys(events_wanted)),
        format=format,
        secret_env=secret_env,
    )


def _found(*checked: tuple[str, str]) -> list[tuple[str, str]]:
    """The ``(field, problem)`` pairs that have a problem, in order."""
    return [(field, problem) for field, problem in checked if problem]


def where(url: str) -> str:
    """A URL shown without its path, query or credentials: a Slack URL's path
    is its secret, and a query or a user part may hold one."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}/…"


def hook_name(pk: int, url: str) -> str:
    """A webhook as pages name it: its number, which tells apart two to one
    host, and its address as ``where`` shows it (its path may be a secret)."""
    return f"webhook #{pk} to {where(url)}"


def sent_to(delivery: Delivery) -> str:
    """Where a delivery went, as the project page's Deliveries say it."""
    hook = delivery.webhook
    if hook is None:
        return delivery.get_target_display()
    name = hook_name(hook.pk, hook.url)
    return capfirst(name)


# --- queueing ------------------------------------------------------------------


def _key(*parts: object) -> str:
    return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()


def _queue(**fields) -> Delivery | None:
    """Create the delivery and send it to a worker after commit; None when
    its key was queued before (the message goes out once)."""
    try:
        with transaction.atomic():
            delivery = Delivery.objects.create(**fields)
    except IntegrityError:
        return None
    enqueue(Task.DELIVER, delivery.pk)
    return delivery


def page_url(name: str, *args: object) -> str:
    """The absolute URL of a page, or "" when REPLAYHUB_BASE_URL is not set."""
    base = settings.REPLAYHUB_BASE_URL.rstrip("/")
    return f"{base}{reverse(name, args=args)}" if base else ""


@dataclass(frozen=True)
class Settled:
    """A reviewer's decision, as a status says it; ``undo`` for a decision
    taken back (``verdict`` is then the one standing again)."""

    review_id: int
    decision: str
    verdict: str


def status_queue(*, replay_id: int, settled: Settled | None = None) -> None:
    """Queue the commit status of a finished replay (or of a decision on it)
    on its project's forge; nothing without a forge or an original commit."""
    replay = (
        Replay.objects.select_related("project__forge", "run")
        .filter(pk=replay_id)
        .first()
    )
    if replay is None or not replay.verdict:
        return
    forge = getattr(replay.project, "forge", None)
    sha = replay.run.original_commit
    if forge is None or not sha:
        return
    verdict = settled.verdict if settled else replay.verdict
    state = statuses.state_for(forge.kind, verdict)
    # A decision, and its undoing, each say their state once.
    source = (
        f"{settled.decision}:{settled.review_id}" if settled else f"replay:{replay.pk}"
    )
    body = statuses.status_body(
        forge.kind,
        state=state,
        context=f"replayhub/{replay.project.slug}",
        description=statuses.description(
            verdict,
            replay.reason_code,
            decision=settled.decision if settled else "",
            before=replay.verdict,
        ),
        target_url=page_url("reviews:replay_detail", replay.pk),
    )
    _queue(
        project=replay.project,
        target=DeliveryTarget.FORGE,
        event="commit.status",
        key=_key("forge", forge.kind, forge.api_url, forge.repo, sha, state, source),
        commit=sha,
        summary=f"{sha[:12]} {state} (replay {replay.pk})",
        body=body,
    )


def event_queue(
    *, project: Project, event: str, ident: str, data: dict, text: str
) -> int:
    """Queue ``event`` to each of the project's webhooks that takes it, once
    per (webhook, event, ``ident``); how many were queued."""
    queued = 0
    now = timezone.now()
    for hook in Webhook.objects.filter(project=project).order_by("id"):
        if event not in hook.events:
            continue
        key = _key("webhook", hook.pk, event, ident)
        if hook.format == WebhookFormat.SLACK:
            body = events.slack(text)
        else:
            body = events.cloudevent(
                event=event,
                id=key,
                source=page_url("reviews:project_detail", project.slug)
                or f"/replayhub/projects/{project.slug}",
                time=now.isoformat(),
                data=data,
                subject=ident,
            )
        queued += bool(
            _queue(
                project=project,
                target=DeliveryTarget.WEBHOOK,
                webhook=hook,
                event=event,
                key=key,
                summary=f"{event} {ident}"[:200],
                body=body,
            )
        )
    return queued


# --- sending ---------------------------------------------------------------------


def delivery_send(*, delivery_id: int, now: datetime | None = None) -> float | None:
    """One attempt at a delivery; the seconds to wait before the next one, or
    None when it is settled (delivered, failed for good) or another worker
    holds it. 5xx, 408, 429 and network errors are tried again with a
    doubling wait, up to REPLAYHUB_OUTBOUND_ATTEMPTS attempts in all."""
    now = now or timezone.now()
    timeout = settings.REPLAYHUB_OUTBOUND_TIMEOUT_SECONDS
    held = now + timedelta(seconds=ATTEMPT_SECONDS + 60)
    if not Delivery.objects.claim(delivery_id, now=now, until=held):
        return None
    delivery = Delivery.objects.select_related("project", "webhook").get(pk=delivery_id)
    try:
        url, body, headers = _request(delivery)
        address = resolve(url, allowed_networks())
        answer = post(url, body, headers, address=address, timeout=timeout)
    except (NotSendable, AddressRefused) as exc:
        return _settle(delivery, DeliveryStatus.FAILED, None, str(exc))
    except Unreachable as exc:
        return _settle(delivery, DeliveryStatus.PENDING, None, str(exc))
    if answer.delivered:
        status = DeliveryStatus.DELIVERED
    elif answer.transient:
        status = DeliveryStatus.PENDING
    else:
        status = DeliveryStatus.FAILED
    return _settle(delivery, status, answer.status, answer.first_line)


def delivery_cut(*, delivery_id: int, seconds: float) -> float | None:
    """End an attempt the time limit cut short, like a network error."""
    delivery = Delivery.objects.get(pk=delivery_id)
    return _settle(
        delivery, DeliveryStatus.PENDING, None, f"no whole answer within {seconds} s"
    )


def _settle(
    delivery: Delivery, status: str, http_status: int | None, answer: str
) -> float | None:
    again = status == DeliveryStatus.PENDING
    if again and delivery.attempts >= settings.REPLAYHUB_OUTBOUND_ATTEMPTS:
        status, again = DeliveryStatus.FAILED, False
        answer = f"{answer} (gave up after {delivery.attempts} attempts)"
    base = settings.REPLAYHUB_OUTBOUND_BACKOFF_SECONDS
    wait = min(base * 2 ** (delivery.attempts - 1), MAX_BACKOFF_SECONDS)
    Delivery.objects.settle(
        delivery.pk,
        status=status,
        http_status=http_status,
        answer=answer,
        # The retry's message is due in ``wait``: the sweep leaves the row
        # alone until it is well past. Half the wait, so that the retry,
        # however early its timer fires, finds the row free to claim.
        hold_until=timezone.now() + timedelta(seconds=wait / 2),
    )
    # Not delivered: the reason the page shows, as the log may hold it.
    reason = "" if status == DeliveryStatus.DELIVERED else _loggable(answer, delivery)
    log.info(
        "delivery %s (%s) attempt %s: %s %s%s",
        delivery.pk,
        delivery.summary,
        delivery.attempts,
        http_status or "-",
        status,
        f": {reason}" if reason else "",
    )
    return float(wait) if again else None


# Any address in a reason: logged as ``where`` shows it.
_URL = re.compile(r"https?://[^\s'\"<>]+", re.IGNORECASE)


def _loggable(answer: str, delivery: Delivery) -> str:
    """The reason the page shows, for the log: one line, bounded, with no
    address's path, query or credentials (a webhook's path may be its secret)."""
    text = " ".join(answer.split())
    hook = delivery.webhook
    if hook is not None:
        parts = urlsplit(hook.url)
        for secret in (hook.url, parts.path, parts.query):
            if len(secret) > 1:
                text = text.replace(secret, "…")
    return _URL.sub(lambda found: where(found.group()), text)[:300] or "no reason given"


def delivery_sweep(*, now: datetime | None = None) -> list[int]:
    """Send again the pending deliveries nothing has held for SWEEP_AFTER (a
    lost message, a worker lost mid-attempt); their ids. Run by the beat."""
    before = (now or timezone.now()) - SWEEP_AFTER
    # Oldest first: the order they were meant to go in.
    ids = list(
        Delivery.objects.lost(before=before).order_by("pk").values_list("pk", flat=True)
    )
    for delivery_id in ids:
        enqueue(Task.DELIVER, delivery_id)
    return ids


def _secret(name: str, url: str) -> str:
    """The value of the variable ``name`` on this worker, checked against the
    allow-list again (it may have changed since the setting was saved)."""
    if problem := env_problem(name, url):
        raise NotSendable(problem)
    value = os.environ.get(name, "")
    if not value:
        raise NotSendable(f"{name} is not set on this worker.")
    return value


def _request(delivery: Delivery) -> tuple[str, bytes, dict[str, str]]:
    """The URL, body and headers of a delivery, its token or signature added."""
    body = json.dumps(delivery.body, separators=(",", ":")).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "ReplayHub",
    }
    if delivery.target == DeliveryTarget.FORGE:
        forge = Forge.objects.filter(project_id=delivery.project_id).first()
        if forge is None:
            raise NotSendable("the project names no forge now.")
        url = statuses.status_url(
            forge.kind, forge.api_url, forge.repo, delivery.commit
        )
        headers.update(statuses.auth_headers(forge.kind, _secret(forge.token_env, url)))
        return url, body, headers
    hook = delivery.webhook
    assert hook is not None
    if hook.format == WebhookFormat.CLOUDEVENTS:
        headers["Content-Type"] = "application/cloudevents+json"
    if hook.secret_env:
        key = _secret(hook.secret_env, hook.url).encode()
        headers[events.SIGNATURE_HEADER] = events.signature(key, body)
    return hook.url, body, headers
