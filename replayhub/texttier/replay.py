"""One text replay: ask the target model, compare, optionally ask the judge.

The calls are made from the host (a worker or a command), with the key read
from the environment variable the ``Provider`` row names; the key never
reaches the database, a log line or a page.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings

from replayhub.gateway.providers import Upstream
from replayhub.models import Provider, Run
from replayhub.texttier.client import CallPolicy, Completion, complete
from replayhub.texttier.judge import (
    MAX_RATIONALE,
    Unparseable,
    judge_prompt,
    parse_judgement,
)
from replayhub.texttier.similarity import jaccard

_PROVIDER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


class BadTarget(ValueError):
    """A ``PROVIDER:MODEL`` that names no registered provider, or is malformed."""


@dataclass(frozen=True)
class Target:
    provider: str
    model: str

    @classmethod
    def parse(cls, spec: str) -> Target:
        """``PROVIDER:MODEL``; the model may hold colons (``llama3:8b``)."""
        provider, sep, model = (spec or "").strip().partition(":")
        if not sep or not _PROVIDER.fullmatch(provider) or not model.strip():
            raise BadTarget(f"{spec!r} is not PROVIDER:MODEL")
        if len(model) > 200:
            raise BadTarget("the model name is longer than 200 characters")
        return cls(provider, model.strip())

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}"


class NoSuchProvider(BadTarget):
    """A well-formed ``PROVIDER:MODEL`` whose provider is not registered."""


# The most registered providers a refusal names.
PROVIDERS_SAID = 10


def _registered() -> str:
    """The registered providers, as a refusal names them."""
    names = list(
        Provider.objects.order_by("name").values_list("name", flat=True)[
            : PROVIDERS_SAID + 1
        ]
    )
    if not names:
        return "none is registered yet"
    more = ", …" if len(names) > PROVIDERS_SAID else ""
    return f"providers: {', '.join(names[:PROVIDERS_SAID])}{more}"


def spelled(provider: str) -> str | None:
    """The registered provider's own name for ``provider`` typed in any case
    (names are slugs: "STAND-IN" is "stand-in"), an exact match first; None
    when none is registered."""
    names = list(
        Provider.objects.filter(name__iexact=provider)
        .order_by("name")
        .values_list("name", flat=True)[:PROVIDERS_SAID]
    )
    if provider in names:
        return provider
    return names[0] if names else None


def _unregistered(provider: str) -> NoSuchProvider:
    return NoSuchProvider(
        f"no provider named {provider!r} (register it on the "
        f"Providers page, or with manage.py provider_add; {_registered()})"
    )


def check_registered(*targets: Target | None) -> None:
    """Refuse a target whose provider is not registered (``provider_add``),
    in any case, naming the providers that are."""
    for target in targets:
        if target and spelled(target.provider) is None:
            raise _unregistered(target.provider)


def resolve(spec: str) -> Target:
    """The target a text replay of ``spec`` calls, its provider named as
    registered: ``BadTarget`` when it is not PROVIDER:MODEL,
    ``NoSuchProvider`` when its provider is not registered in any case (both
    mean every call would fail before it is sent). The model is the
    provider's to refuse: a provider keeps no list of the models
    it offers (its prices name only those priced, and an unpriced model is
    called all the same)."""
    target = Target.parse(spec)
    name = spelled(target.provider)
    if name is None:
        raise _unregistered(target.provider)
    return Target(name, target.model)


def policy() -> CallPolicy:
    return CallPolicy(
        timeout=float(settings.REPLAYHUB_TEXT_TIMEOUT_SECONDS),
        retries=settings.REPLAYHUB_TEXT_RETRIES,
        backoff=settings.REPLAYHUB_TEXT_BACKOFF_MS / 1000,
        max_tokens=settings.REPLAYHUB_TEXT_MAX_TOKENS,
    )


class CallFailed(Exception):
    """A call could not even be sent; ``str`` is the reason, key-free."""


def _upstream(name: str) -> Upstream:
    # The name as registered (one query), else as typed in another case.
    provider = (
        Provider.objects.filter(name=name).first()
        or Provider.objects.filter(name__iexact=name).order_by("name").first()
    )
    if provider is None:
        raise CallFailed(f"provider {name!r} is not registered")
    key = os.environ.get(provider.key_env, "")
    if not key:
        raise CallFailed(
            f"provider {name}'s key variable ${provider.key_env} is not set here"
        )
    try:
        return Upstream(
            name=provider.name,
            kind=provider.kind,
            base_url=provider.base_url,
            key=key,
            prices=provider.prices or {},
        )
    except ValueError as error:
        raise CallFailed(str(error)) from None


def _call(target: Target, prompt: str, how: CallPolicy) -> Completion:
    try:
        upstream = _upstream(target.provider)
    except CallFailed as error:
        return Completion(
            text=None, error=str(error), status=None, attempts=0, duration_ms=0
        )
    return complete(upstream, model=target.model, prompt=prompt, policy=how)


def _add_cost(total: Decimal | None, part: Completion) -> Decimal | None:
    """Unknown stays unknown: a call that used tokens without a price."""
    if part.cost_usd is None:
        return None if part.input_tokens or part.output_tokens else total
    return None if total is None else total + part.cost_usd


def execute(
    *, run: Run, target: Target, judge: Target | None, how: CallPolicy | None = None
) -> dict[str, Any]:
    """The fields a finished text replay stores, failures included."""
    how = how or policy()
    if not run.prompt:
        return {"error": "the run has no recorded prompt"}
    answer = _call(target, run.prompt, how)
    fields: dict[str, Any] = {
        "http_status": answer.status,
        "attempts": answer.attempts,
        "duration_ms": answer.duration_ms,
        "input_tokens": answer.input_tokens,
        "output_tokens": answer.output_tokens,
        "cost_usd": _add_cost(Decimal(0), answer),
    }
    if not answer.ok:
        fields["error"] = answer.error or "the call failed"
        return fields
    output = answer.text or ""
    fields["output"] = output
    fields["similarity"] = jaccard(run.output, output)
    if judge is None:
        return fields
    verdict = _call(
        judge,
        judge_prompt(task=run.prompt, original=run.output, replayed=output),
        how,
    )
    fields["judge_input_tokens"] = verdict.input_tokens
    fields["judge_output_tokens"] = verdict.output_tokens
    fields["duration_ms"] += verdict.duration_ms
    fields["cost_usd"] = _add_cost(fields["cost_usd"], verdict)
    if not verdict.ok:
        fields["judge_error"] = f"the judge's call failed: {verdict.error}"[:500]
        return fields
    try:
        judgement = parse_judgement(verdict.text or "")
    except Unparseable as error:
        fields["judge_error"] = f"unparseable answer: {error}"
        fields["judge_answer"] = (verdict.text or "")[: MAX_RATIONALE * 4]
        return fields
    fields["equivalence_score"] = judgement.score
    fields["judge_rationale"] = judgement.rationale
    return fields
