"""The text tier's workflows: one text replay (command, run page, suite, night)
and its charge to the night's text share. Keyword-only, as every service."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from replayhub.celery import Task, enqueue
from replayhub.models import (
    Project,
    Run,
    TextReplay,
    TextStatus,
    TextSuite,
    TextTrigger,
)
from replayhub.nights import shares, tiers
from replayhub.nights.arithmetic import Amounts
from replayhub.texttier import suites
from replayhub.texttier.replay import (
    BadTarget,
    Target,
    check_registered,
    execute,
    policy,
)

log = logging.getLogger(__name__)

# What PostgreSQL's text columns refuse; a model may well answer with it.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_TEXT_FIELDS = ("output", "judge_rationale", "judge_answer", "error", "judge_error")

__all__ = [
    "AlreadyAsked",
    "BadTarget",
    "Target",
    "text_replay_create",
    "text_replay_execute",
]


def text_replay_create(
    *,
    run: Run,
    target: Target,
    judge: Target | None = None,
    trigger: str = TextTrigger.COMMAND,
    user=None,
    **extra: Any,
) -> TextReplay:
    """A queued text replay of ``run``; ``BadTarget`` for an unknown provider.

    ``extra`` carries what a suite or the night decided: ``suite``, ``night``,
    ``reservation``.
    """
    check_registered(target, judge)
    return TextReplay.objects.create(
        run=run,
        project_id=run.project_id,
        trigger=trigger,
        requested_by=user,
        target_provider=target.provider,
        target_model=target.model,
        judge_provider=judge.provider if judge else "",
        judge_model=judge.model if judge else "",
        **extra,
    )


class AlreadyAsked(Exception):
    """The same model is already answering the run; the message says so in
    one sentence."""


def text_replay_request(
    *, run: Run, target: Target, judge: Target | None = None, user=None
) -> TextReplay:
    """Queue a text replay for a worker (the run page's button). Raises
    AlreadyAsked while a text replay of ``run`` asking ``target`` is queued
    or running: a second press is not a second question."""
    with transaction.atomic():
        # Two presses at once wait for each other here; the second one then
        # sees the first one's row.
        Run.objects.select_for_update().filter(pk=run.pk).first()
        pending = (
            TextReplay.objects.filter(
                run=run,
                target_provider=target.provider,
                target_model=target.model,
            )
            .exclude(status=TextStatus.FINISHED)
            .order_by("id")
            .first()
        )
        if pending is not None:
            raise AlreadyAsked(
                f"Not queued again: text replay #{pending.pk} already asks "
                f"{target} and is {pending.get_status_display().lower()}; "
                "its result appears below."
            )
        row = text_replay_create(
            run=run, target=target, judge=judge, trigger=TextTrigger.PAGE, user=user
        )
        enqueue(Task.RUN_TEXT_REPLAY, row.pk)
    return row


def _storable(fields: dict[str, Any]) -> dict[str, Any]:
    for name in _TEXT_FIELDS:
        if isinstance(fields.get(name), str):
            fields[name] = _UNSTORABLE.sub("\ufffd", fields[name])
    return fields


def text_replay_execute(*, text_replay_id: int) -> TextReplay | None:
    """Claim a queued text replay, run it, store what it found (an error too)
    and charge it to the night. None when another caller claimed it first."""
    if not TextReplay.objects.claim(text_replay_id):
        return None
    row = TextReplay.objects.select_related("run").get(pk=text_replay_id)
    judge = Target(row.judge_provider, row.judge_model) if row.judge_model else None
    try:
        fields = execute(
            run=row.run,
            target=Target(row.target_provider, row.target_model),
            judge=judge,
        )
    except Exception as error:  # the row must end, whatever went wrong
        log.exception("text replay %s failed", row.pk)
        fields = {"error": f"internal error: {type(error).__name__}"}
    fields = _storable(fields)
    with transaction.atomic():
        TextReplay.objects.finish(row.pk, **fields)
        row.refresh_from_db()
        text_replay_settle(row=row, now=timezone.now())
    if row.suite_id:
        suite_finish_if_done(suite_id=row.suite_id)
    return row


def text_replay_reap_stale(*, now: datetime | None = None) -> list[int]:
    """End the text replays a lost worker left running.

    A text replay runs at most two calls, each bounded by its timeout and
    retries; one still running well past that lost its worker. It ends as a
    failure (a row for every attempt) and settles its reservation.
    """
    now = now or timezone.now()
    how = policy()
    per_call = how.timeout * (how.retries + 1) + how.backoff * 2 ** (how.retries + 1)
    running_before = now - timedelta(seconds=2 * per_call + 60)
    lost = list(
        TextReplay.objects.filter(
            status=TextStatus.RUNNING, started_at__lt=running_before
        ).values_list("pk", flat=True)
    )
    for pk in lost:
        with transaction.atomic():
            if TextReplay.objects.finish(
                pk, error="the worker was lost before the answer was stored"
            ):
                text_replay_settle(row=TextReplay.objects.get(pk=pk), now=now)
        suite_id = TextReplay.objects.filter(pk=pk).values_list("suite_id", flat=True)
        if found := suite_id.first():
            suite_finish_if_done(suite_id=found)
    if lost:
        log.warning("ended %d text replays whose worker was lost", len(lost))
    return lost


def text_replay_requeue_stale(
    *, older_than: timedelta, now: datetime | None = None
) -> list[int]:
    """Send again the text replays still queued whose message went to the
    broker more than ``older_than`` ago: a broker that restarted without its
    data lost it, and the row (which also refuses the same question again)
    would wait for ever. A second message is harmless (only a queued row can
    be claimed); each row is sent again at most once per ``older_than``."""
    now = now or timezone.now()
    sent_before = now - older_than
    stale = list(
        TextReplay.objects.filter(
            status=TextStatus.QUEUED, enqueued_at__lt=sent_before
        ).values_list("pk", flat=True)[:10_000]
    )
    sent = [
        pk
        for pk in stale
        if TextReplay.objects.requeue(pk, sent_before=sent_before, now=now)
    ]
    for pk in sent:
        enqueue(Task.RUN_TEXT_REPLAY, pk, on_commit=False)
    if sent:
        log.warning("sent %d queued text replays to the broker again", len(sent))
    return sent


def text_replay_settle(*, row: TextReplay, now: datetime) -> None:
    """Give back the row's reservation and add what it spent to the night's
    text share, once (``shares.settle``). A row the night did not admit is
    charged to the project's night running at ``now``, if any."""
    night_id = shares.charged_night(
        project_id=row.project_id, night_id=row.night_id, now=now
    )
    if night_id is None or not TextReplay.objects.settle(row.pk, night_id=night_id):
        return
    shares.settle(
        night_id,
        tiers.TEXT,
        release=Amounts.from_dict(row.reservation or {}),
        actual=Amounts(
            replays=1, tokens=row.tokens, cost_usd=row.cost_usd or Decimal(0)
        ),
    )


@dataclass(frozen=True)
class SuiteFilters:
    """Which of a project's runs a suite replays. ``include_failed``: also runs
    whose original failed its tests (``original_tests_passed`` false)."""

    model: str = ""
    since: date | None = None
    include_failed: bool = False
    max: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "model": self.model or None,
            "since": self.since.isoformat() if self.since else None,
            "include_failed": self.include_failed,
            "max": self.max,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SuiteFilters:
        """The filters a suite stored (``as_json``), to run it again."""
        since = data.get("since")
        most = data.get("max")
        return cls(
            model=str(data.get("model") or ""),
            since=date.fromisoformat(since) if isinstance(since, str) else None,
            include_failed=bool(data.get("include_failed")),
            max=most if isinstance(most, int) and most > 0 else None,
        )


def suite_runs(*, project: Project, filters: SuiteFilters):
    """The runs a suite replays, newest first."""
    runs = Run.objects.filter(project=project)
    if filters.model:
        runs = runs.filter(model=filters.model)
    if filters.since:
        # The run's own start when recorded, else when it was imported.
        runs = runs.filter(
            Q(started_at__date__gte=filters.since)
            | Q(started_at__isnull=True, imported_at__date__gte=filters.since)
        )
    if not filters.include_failed:
        runs = runs.exclude(original_tests_passed=False)
    runs = runs.order_by(
        F("started_at").desc(nulls_last=True), "-imported_at", "-id"
    ).only("id", "project_id", "external_id", "prompt", "output")
    return runs[: filters.max] if filters.max else runs


def _skip_reason(run: Run) -> str:
    if not run.prompt:
        return "no recorded prompt"
    if not run.output:
        return "no recorded output to compare with"
    return ""


def suite_create(
    *,
    project: Project,
    target: Target,
    judge: Target | None = None,
    filters: SuiteFilters = SuiteFilters(),
    user=None,
) -> TextSuite:
    """A suite not yet started: its runs are selected when it starts
    (``suite_select``). ``BadTarget`` for an unknown provider."""
    check_registered(target, judge)
    return TextSuite.objects.create(
        project=project,
        target=str(target),
        judge=str(judge) if judge else "",
        filters=filters.as_json(),
        requested_by=user,
    )


Planned = tuple[Run, str, TextReplay | None]


def suite_select(*, suite_id: int) -> list[Planned] | None:
    """Select the suite's runs and queue a text replay of each one with
    something to compare, once: ``(run, skipped_because, row)`` in the order
    they run, or None when the suite was selected before.

    The suite's row is locked while its runs are selected, so a redelivered
    start selects nothing twice; a suite with nothing to replay is finished
    at once.
    """
    with transaction.atomic():
        suite = (
            TextSuite.objects.select_for_update()
            .select_related("project")
            .get(pk=suite_id)
        )
        if suite.finished_at or suite.total or suite.text_replays.exists():
            return None
        target = Target.parse(suite.target)
        judge = Target.parse(suite.judge) if suite.judge else None
        filters = SuiteFilters.from_json(suite.filters or {})
        runs = list(suite_runs(project=suite.project, filters=filters))
        plan: list[Planned] = []
        for run in runs:
            skipped = _skip_reason(run)
            row = None
            if not skipped:
                row = text_replay_create(
                    run=run,
                    target=target,
                    judge=judge,
                    trigger=TextTrigger.SUITE,
                    user=suite.requested_by,
                    suite=suite,
                )
            plan.append((run, skipped, row))
        TextSuite.objects.filter(pk=suite.pk).update(
            total=len(runs), skipped=sum(bool(skipped) for _, skipped, _ in plan)
        )
    suite_finish_if_done(suite_id=suite_id)
    return plan


def suite_finish_if_done(*, suite_id: int) -> bool:
    """Write the suite's summary once none of its text replays is queued or
    running; True for the caller that wrote it."""
    rows = TextReplay.objects.filter(suite_id=suite_id)
    if rows.exclude(status=TextStatus.FINISHED).exists():
        return False
    suite = TextSuite.objects.filter(pk=suite_id, finished_at=None).first()
    if suite is None:
        return False
    results = [suites.Result(skipped=True)] * suite.skipped + [
        suites.Result(
            failed=bool(error), similarity=similarity, score=equivalence_score
        )
        for error, similarity, equivalence_score in rows.values_list(
            "error", "similarity", "equivalence_score"
        )
    ]
    summary = suites.summarize(results)
    # Two last rows ending at once may both get here: one writes.
    return bool(
        TextSuite.objects.filter(pk=suite_id, finished_at=None).update(
            finished_at=timezone.now(), **summary.as_dict()
        )
    )


def suite_run(
    *,
    project: Project,
    target: Target,
    judge: Target | None = None,
    filters: SuiteFilters = SuiteFilters(),
    user=None,
    progress: Callable[[int, int, Run, str, TextReplay | None], None] | None = None,
) -> TextSuite:
    """Replay every matching run as text, one after another in this process,
    past failures (``manage.py replay_suite``).

    ``progress(done, total, run, skipped_because, row)`` is called after each
    run. The suite's summary is stored when the last run is done.
    """
    suite = suite_create(
        project=project, target=target, judge=judge, filters=filters, user=user
    )
    plan = suite_select(suite_id=suite.pk) or []
    for done, (run, skipped, queued) in enumerate(plan, start=1):
        row = None
        if queued is not None:
            # None when another process claimed it first: said as failed.
            row = text_replay_execute(text_replay_id=queued.pk)
        if progress:
            progress(done, len(plan), run, skipped, row)
    suite.refresh_from_db()
    return suite


def suite_start(
    *,
    project: Project,
    target: Target,
    judge: Target | None = None,
    filters: SuiteFilters = SuiteFilters(),
    user=None,
) -> TextSuite:
    """A new suite, started by a worker (``suite_dispatch``) once this
    transaction commits. ``BadTarget`` for a provider not registered."""
    suite = suite_create(
        project=project, target=target, judge=judge, filters=filters, user=user
    )
    enqueue(Task.RUN_TEXT_SUITE, suite.pk)
    return suite


def suite_again(*, suite: TextSuite, user=None) -> TextSuite:
    """A new suite of ``suite``'s project, models and filters, started as
    :func:`suite_start` starts one. ``BadTarget`` when a provider it names is
    gone."""
    return suite_start(
        project=suite.project,
        target=Target.parse(suite.target),
        judge=Target.parse(suite.judge) if suite.judge else None,
        filters=SuiteFilters.from_json(suite.filters or {}),
        user=user,
    )


def suite_dispatch(*, suite_id: int) -> None:
    """A worker's start of a suite: select its runs (once) and send each
    queued text replay of it to the workers. Safe to deliver twice: a
    duplicate message for a row is harmless, as only a queued row is
    claimed, and a start lost after selecting sends them again."""
    suite_select(suite_id=suite_id)
    queued = TextReplay.objects.filter(suite_id=suite_id, status=TextStatus.QUEUED)
    for text_replay_id in queued.values_list("pk", flat=True):
        enqueue(Task.RUN_TEXT_REPLAY, text_replay_id)
