"""The text tier in the night: admit text replays within the night's text
budget, and hold the agentic tier to the runs the text tier passed on.

Each text replay reserves the most it can spend (``tiers.text_bound``) on the
night's text share (``shares.reserve``), so concurrent admissions can never
push the text tier past its replays, tokens or money. The agentic tier keeps
its own share. With the text tier gating it, the agentic candidates are the
runs whose latest text replay passed them on (or whose record category is
escalated), never replayed or inconclusive with attempts left — oldest first,
as ``nights.scheduler.candidates`` orders them.
"""

from __future__ import annotations

import logging
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from replayhub.models import (
    Budget,
    Night,
    Preflight,
    Project,
    Provider,
    Run,
    TextReplay,
    TextStatus,
    TextTrigger,
)
from replayhub.nights import scheduler, shares, tiers
from replayhub.nights.arithmetic import Amounts
from replayhub.nights.shares import NightReport
from replayhub.texttier.judge import MAX_SIDE, PROMPT
from replayhub.texttier.replay import BadTarget, resolve
from replayhub.verdicts import Verdict

log = logging.getLogger(__name__)


def policy_of(budget: Budget) -> tiers.TierPolicy:
    return tiers.TierPolicy(
        similarity_below=budget.text_similarity_below,
        score_at_most=budget.text_score_at_most,
        escalate_categories=tuple(
            c for c in budget.escalate_categories or () if isinstance(c, str)
        ),
    )


def gates_agentic(budget: Budget) -> bool:
    return budget.text_enabled and budget.agentic_after_text


def gate_agentic(runs: QuerySet[Run], budget: Budget) -> QuerySet[Run]:
    """``nights.scheduler.candidates`` narrowed to the runs the text tier passed on.

    A run already decided by an agentic replay is not replayed again; one
    whose last agentic replay is inconclusive stays (``candidates`` keeps it
    only with attempts left).
    """
    policy = policy_of(budget)
    latest = TextReplay.objects.filter(
        run=OuterRef("pk"), status=TextStatus.FINISHED, error=""
    ).order_by("-finished_at", "-id")
    runs = runs.annotate(
        text_similarity=Subquery(latest.values("similarity")[:1]),
        text_score=Subquery(latest.values("equivalence_score")[:1]),
    )
    passed = Q(text_similarity__lt=policy.similarity_below)
    if policy.score_at_most is not None:
        passed |= Q(text_score__lte=policy.score_at_most)
    if policy.escalate_categories:
        passed |= Q(raw__category__in=list(policy.escalate_categories))
    return runs.filter(passed).filter(
        Q(last_verdict__isnull=True) | Q(last_verdict=Verdict.INCONCLUSIVE)
    )


def text_candidates(project: Project, night: Night, budget: Budget) -> QuerySet[Run]:
    """Runs the text tier should answer tonight, never-asked first, oldest first.

    Left out: runs preflight ruled out, runs with an answer already, runs
    tried this night (a failure waits for the next night) or in flight, and
    runs whose category goes to the agentic tier regardless.
    """
    texts = TextReplay.objects.filter(run=OuterRef("pk"))
    runs = (
        Run.objects.filter(project=project, preflight=Preflight.READY)
        .annotate(
            answered=Exists(texts.filter(status=TextStatus.FINISHED, error="")),
            tonight=Exists(texts.filter(night=night)),
            active=Exists(texts.exclude(status=TextStatus.FINISHED)),
            asked=Exists(texts),
        )
        .filter(answered=False, tonight=False, active=False)
    )
    categories = policy_of(budget).escalate_categories
    if categories:
        runs = runs.exclude(raw__category__in=list(categories))
    return runs.order_by("asked", "imported_at", "id")


def _price(name: str, model: str) -> tuple[Decimal, Decimal] | None:
    provider = Provider.objects.filter(name=name).only("prices").first()
    price = (provider.prices or {}).get(model) if provider else None
    if not isinstance(price, dict):
        return None
    try:
        return (Decimal(str(price["input"])), Decimal(str(price["output"])))
    except (TypeError, KeyError, ArithmeticError, ValueError):
        return None


def in_window(project: Project, now: datetime) -> bool:
    return scheduler.night_day(project, now) is not None


def night_admit_text(
    *, project: Project, now: datetime | None = None, immediate: bool = False
) -> NightReport:
    """Queue tonight's text replays while the night's text share lasts.

    Whatever does not fit is deferred (counted on the text share), first in
    line at the next admission.
    """
    now = now or timezone.now()
    budget = scheduler.budget_of(project)
    if not budget.text_enabled:
        return NightReport(
            tiers.TEXT, skipped_reason="the text tier is off for this project"
        )
    try:
        # As the budgets page checks them: a provider not registered would
        # fail every call of the night before it is sent.
        target = resolve(budget.text_target)
        judge = resolve(budget.text_judge) if budget.text_judge else None
    except BadTarget as error:
        return NightReport(tiers.TEXT, skipped_reason=f"text tier target: {error}")
    report = scheduler.night_for(
        tier=tiers.TEXT, project=project, now=now, immediate=immediate
    )
    night = report.night
    if night is None or report.skipped_reason:
        return report
    target_price = _price(target.provider, target.model)
    judge_price = _price(judge.provider, judge.model) if judge else None
    runs = text_candidates(project, night, budget).only("id", "prompt", "output")
    with transaction.atomic():
        for run in runs.iterator(chunk_size=500):
            bound = tiers.text_bound(
                prompt_bytes=len(run.prompt.encode("utf-8", "surrogatepass")),
                output_bytes=len(run.output.encode("utf-8", "surrogatepass")),
                max_tokens=settings.REPLAYHUB_TEXT_MAX_TOKENS,
                judged=judge is not None,
                judge_overhead_bytes=len(PROMPT.encode()),
                side_cap_bytes=4 * MAX_SIDE,
                target_price=target_price,
                judge_price=judge_price,
            )
            amount = Amounts(replays=1, tokens=bound.tokens, cost_usd=bound.cost_usd)
            if not shares.reserve(night=night, tier=tiers.TEXT, amount=amount, now=now):
                # Once one does not fit, the rest wait: first in line next
                # time. The admitted ones have a text replay tonight now, so
                # what the query still finds is what was deferred.
                report.deferred = runs.count()
                break
            row = TextReplay.objects.create(
                run=run,
                project=project,
                night=night,
                trigger=TextTrigger.SCHEDULER,
                target_provider=target.provider,
                target_model=target.model,
                judge_provider=judge.provider if judge else "",
                judge_model=judge.model if judge else "",
                reservation=amount.as_json(),
                created_at=now,
            )
            report.admitted.append(row.pk)
        shares.defer(night, tiers.TEXT, report.deferred)
    log.info(
        "night %s of %s: text tier admitted %d, deferred %d",
        night.date,
        project.slug,
        len(report.admitted),
        report.deferred,
    )
    return report
