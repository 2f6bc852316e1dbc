"""Workflows across models, or that enqueue work: keyword-only functions.

The import chain runs one way: views, commands and tasks call these services;
services call the domain (``replay``, ``nights``, ``texttier``, ``rollouts``,
``verdicts``) and the models. Only services modules enqueue tasks, always
after the transaction commits.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import uuid
from dataclasses import asdict
from datetime import datetime, timedelta
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from replayhub import signals
from replayhub.celery import REPLAY_QUEUE, Task, enqueue, queue_length
from replayhub.gateway.playback import TapePlayer
from replayhub.git.scratch import remove_tree
from replayhub.logs import replay_context
from replayhub.models import (
    Comparison,
    EgressAttempt,
    Heartbeat,
    ModelCall,
    Project,
    Replay,
    ReplayStatus,
    ReviewBand,
    Run,
    Tape,
    TestOutcome,
    Tier,
    Trigger,
    WorkerCheck,
)
from replayhub.nights import scheduler, shares, tiers
from replayhub.nights.arithmetic import Amounts
from replayhub.nights.replicate_tier import night_admit_replicates
from replayhub.nights.tape_tier import night_admit_tape, without_taped
from replayhub.replay import tapes
from replayhub.replay.execute import execute
from replayhub.replay.services import (
    DATABASE_AWAY,
    LeaseKeeper,
    lease_beat,
    once_the_database_answers,
    replay_again,
    replay_retry_later,
)
from replayhub.replay.storable import storable
from replayhub.replay.workspace import Report, Unforeseen, check_dict
from replayhub.rollouts.replay import execute_rollout, task_for
from replayhub.testgate import memory
from replayhub.testgate.paths import KIND_TEXT
from replayhub.texttier.night import (
    gate_agentic,
    gates_agentic,
    in_window,
    night_admit_text,
)
from replayhub.verdicts import Facts, Reason, Ruling, decide

log = logging.getLogger(__name__)


def worker_check_request(*, user) -> WorkerCheck:
    check = WorkerCheck.objects.create(requested_by=user)
    enqueue(Task.ANSWER_WORKER_CHECK, check.pk)
    return check


def lease_owner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def replay_create(*, run: Run, trigger: str, user=None, **budget) -> Replay:
    """A new queued attempt of ``run``; the attempt number counts its replays.

    ``budget`` carries what admission decided: ``night``, ``reservation`` and
    ``caps``.
    """
    attempt = Replay.objects.filter(run=run).count() + 1
    return Replay.objects.create(
        run=run,
        project_id=run.project_id,
        trigger=trigger,
        requested_by=user,
        attempt=attempt,
        **budget,
    )


def replay_request(
    *, run: Run, trigger: str = Trigger.COMMAND, user=None, **budget
) -> Replay:
    """Queue a replay of ``run``; a worker gets it once the transaction commits."""
    replay = replay_create(
        run=run, trigger=trigger, user=user, enqueued_at=timezone.now(), **budget
    )
    enqueue(Task.RUN_REPLAY, replay.pk)
    return replay


def replay_requeue_stale(*, older_than: timedelta, now=None) -> list[int]:
    """Send again the queued replays whose message was handed over long ago.

    A broker that restarts without persistence loses its messages; the replay
    rows say what should still run. A duplicate message is harmless (only a
    queued replay can be claimed), and ``enqueued_at`` moves on so one replay is
    sent again at most once per ``older_than``.
    """
    now = now or timezone.now()
    sent_before = now - older_than
    stale = list(
        Replay.objects.filter(
            status=ReplayStatus.QUEUED, enqueued_at__lt=sent_before
        ).values_list("pk", flat=True)[:10_000]
    )
    for replay_id in stale:
        if Replay.objects.requeue(replay_id, sent_before=sent_before, now=now):
            enqueue(Task.RUN_REPLAY, replay_id, on_commit=False)
    if stale:
        log.warning("sent %d queued replays to the broker again", len(stale))
    return stale


def replay_requeue_orphaned(*, older_than: timedelta, now=None) -> list[int]:
    """Send again the queued replays whose message is gone: queued at least
    ``older_than`` ago while the broker's replay queue is empty.

    A message is lost when a task met an error it was not retried on, or the
    broker restarted without its data. Only an empty queue proves it: a
    message waiting behind others is in the queue, so a long night is never
    sent twice. One pass sends each orphan once and stamps ``enqueued_at``;
    the queue is then not empty until the workers have taken them, so the
    next passes send nothing (no flood). A message a worker holds for a
    retry's countdown is not in the queue: its replay may be sent twice, and
    the second claim finds it taken.
    """
    now = now or timezone.now()
    try:
        waiting = queue_length(REPLAY_QUEUE)
    except Exception as exc:  # the broker is down: nothing can be sent anyway
        log.warning("replay queue unreadable: %s", one_line(exc))
        return []
    if waiting:
        return []
    return replay_requeue_stale(older_than=older_than, now=now)


def beat_heartbeat(*, now=None) -> None:
    """Record that the beat's periodic job ran (read by ``/healthz``)."""
    Heartbeat.objects.update_or_create(
        name=Heartbeat.BEAT, defaults={"beat_at": now or timezone.now()}
    )


def replay_claim(*, replay_id: int, owner: str) -> bool:
    """Take a queued replay for this worker. A conditional UPDATE, so only one
    wins. True too when it runs leased to ``owner`` already: a claim whose
    reply a database restart lost, made again by the task's retry."""
    if Replay.objects.claim(replay_id, owner=owner):
        return True
    running = Replay.objects.filter(pk=replay_id, status=ReplayStatus.RUNNING)
    return running.filter(lease_owner=owner).exists()


def replay_heartbeat(*, replay_id: int, owner: str, phase: str | None = None) -> bool:
    """Extend the lease (and record the phase); False when the lease was lost."""
    return lease_beat(replay_id=replay_id, owner=owner, phase=phase)


def replay_execute(*, replay_id: int, owner: str | None = None):
    """Claim and run one replay here and return its ``replay.workspace.Report``.

    None when the replay is not queued (another worker has it, or it is done) or
    when the lease was lost before the result could be stored.
    """
    with replay_context(replay_id):
        return _replay_execute(replay_id=replay_id, owner=owner)


def _replay_execute(*, replay_id: int, owner: str | None):
    owner = owner or lease_owner_name()
    if not replay_claim(replay_id=replay_id, owner=owner):
        log.info("replay %s is not queued; nothing to do", replay_id)
        return None
    replay = Replay.objects.select_related("run", "project", "night", "seed").get(
        pk=replay_id
    )
    if _night_over(replay):
        replay_cancel_after_window(replay=replay, owner=owner)
        return None
    with LeaseKeeper(replay_id=replay_id, owner=owner):

        def on_phase(phase: str) -> object:
            return replay_heartbeat(replay_id=replay_id, owner=owner, phase=phase)

        report: Report
        database_lost = False
        try:
            rollout = task_for(replay)
            if rollout is not None:
                report = execute_rollout(
                    project=replay.project,
                    task=rollout,
                    replay_id=replay.pk,
                    caps=replay.caps,
                    on_phase=on_phase,
                )
            else:
                player: TapePlayer | None = None
                if replay.tier == Tier.TAPE:
                    source = tapes.to_play(replay.run)
                    player = source.player(then_live=replay.project.tape_then_live)
                report = execute(
                    project=replay.project,
                    run=replay.run,
                    replay_id=replay.pk,
                    caps=replay.caps,
                    on_phase=on_phase,
                    player=player,
                )
                if player is not None:
                    report.tape_play.update(player.evidence())
        except Exception as error:
            # Every failure the execution knows of is a verdict already; one it
            # did not foresee is ReplayHub's, and still ends the replay here
            # rather than leaving it running until its lease expires, with the
            # model calls and usage the agent had run up.
            log.exception("replay %s: the execution failed", replay_id)
            report, cause = Unforeseen.unwrap(error)
            report.decision = _harness_error(
                f"the execution failed ({one_line(cause)})"
            )
            # Not the run's fault: with nothing paid for yet, it runs again.
            database_lost = isinstance(cause, DATABASE_AWAY) and not report.model_calls
    ended = partial(replay_retry_later, replay=replay, report=report, owner=owner)
    if database_lost:
        ended = partial(replay_again, replay=replay, owner=owner)
    if once_the_database_answers(ended, replay_id=replay_id):
        return None
    ended = partial(replay_finish, replay=replay, outcome=report, owner=owner)
    if not once_the_database_answers(ended, replay_id=replay_id):
        log.warning("replay %s lost its lease; its result is discarded", replay_id)
        return None
    return report


def _night_over(replay: Replay) -> bool:
    # Only what the scheduler admitted is bound to its night's window; an
    # explicit reproduce or a reviewer's rerun always runs.
    return (
        replay.trigger == Trigger.SCHEDULER
        and replay.night is not None
        and replay.night.window_end <= timezone.now()
    )


def replay_cancel_after_window(*, replay: Replay, owner: str) -> None:
    """The night ended before a worker reached this replay: no new replay starts.

    Its reservation goes back to the night, and the run is deferred, so it is
    first in line next night.
    """
    now = timezone.now()
    with transaction.atomic():
        if not Replay.objects.cancel(replay.pk, owner=owner):
            return
        scheduler.settle(replay=replay, actual=Amounts(), now=now)
        if replay.replicate or replay.tier == Tier.TAPE:
            # The run stays its tier's (tape, replicate): next night plays it.
            if replay.night_id is not None:
                shares.defer_one(replay.night_id, scheduler.share_tier(replay))
            log.info("tape replay %s not started: its night has ended", replay.pk)
            return
        Run.objects.filter(pk=replay.run_id, deferred_at__isnull=True).update(
            deferred_at=now
        )
        if replay.night_id is not None:
            shares.defer_one(replay.night_id, tiers.AGENTIC)
    log.info("replay %s not started: its night's window has ended", replay.pk)


def replay_reap_expired(*, now=None) -> list[int]:
    """End replays whose worker vanished and queue a fresh attempt while allowed.

    The lost attempt is kept as ``inconclusive / worker_lost`` evidence (worker
    loss is a harness-health signal); a new attempt is queued when the run has
    attempts left. Returns the ids of the reaped replays. Each replay is reaped
    on its own: one that cannot be ended is logged and left for the next pass,
    and the others are reaped all the same.
    """
    reaped = []
    now = now or timezone.now()
    for replay in Replay.objects.lease_expired(now).select_related("run", "project"):
        try:
            ended = _reap(replay, now=now)
        except Exception:
            log.exception("replay %s could not be reaped", replay.pk)
            continue
        if ended:
            reaped.append(replay.pk)
            log.warning("replay %s: worker lost (%s)", replay.pk, replay.lease_owner)
    return reaped


def _reap(replay: Replay, *, now: datetime) -> bool:
    decision = decide(
        Facts(
            harness_failure=Reason.WORKER_LOST,
            harness_detail=f"no heartbeat from {replay.lease_owner}",
        )
    )
    with transaction.atomic():
        # The lease owner must still be the dead one: a late heartbeat wins.
        if not replay_finish(
            replay=replay,
            outcome=decision,
            owner=replay.lease_owner,
            expired_before=now,
        ):
            return False
        if replay.attempt < replay.project.max_attempts:
            replay_request(
                run=replay.run, trigger=Trigger.RETRY, seed_id=replay.seed_id
            )
    # The dead worker could not clean up; on its host this removes the rest.
    try:
        remove_tree(Path(settings.REPLAYHUB_WORK_DIR) / f"replay-{replay.pk}")
    except OSError as error:
        log.warning("replay %s: its workspace was not removed: %s", replay.pk, error)
    return True


def replay_finish(
    *,
    replay: Replay,
    outcome: Report | Ruling,
    owner: str,
    expired_before: datetime | None = None,
) -> bool:
    """End a running replay with its verdict, from any path; False if it was not
    ``owner``'s to end (the lease was lost, or a heartbeat beat the reaper).

    ``outcome`` is what the execution found, or a bare ``Ruling`` when the
    replay ended without executing (its worker was lost). Everything is
    written in one transaction: the replay's verdict and evidence, the
    comparison, the test runs, the run's provenance, and the night's budget.

    What the agent shaped is made storable first (:func:`storable`; the
    evidence names the fields escaped). Should the store fail all the same,
    nothing of it is kept and a second, minimal finish ends the replay
    ``inconclusive / harness_error`` with the error's first line: no failure
    to store leaves a replay running.
    """
    report = outcome if isinstance(outcome, Report) else None
    escaped: list[str] = []
    dropped: list[str] = []
    tape = None
    if report is not None:
        # The tape is stored compressed, as bytes: it needs no escaping.
        if report.tape:
            tape = Tape.of(report.tape, truncated=report.tape_truncated)
        report = dataclasses.replace(report, tape=[])
        report, escaped, dropped = storable(report)
    decision = report.decision if report else outcome
    assert isinstance(decision, Ruling)
    provenance = report.provenance if report else replay.provenance
    actual = report.actual() if report else Amounts()
    result = _finished_fields(replay, decision, provenance)
    if report is not None:
        result["evidence"].update(_report_evidence(report, escaped, dropped))
        result.update(
            agent_exit_code=report.agent.exit_code,
            agent_output=report.agent.output,
            agent_output_truncated=report.agent.output_truncated,
            usage=report.usage,
            tokens=actual.tokens,
            cost_usd=actual.cost_usd,
            sandbox_seconds=report.sandbox_seconds,
        )
    try:
        with transaction.atomic():
            if not Replay.objects.finish(
                replay.pk, owner=owner, expired_before=expired_before, **result
            ):
                return False
            if report is not None:
                _store_findings(replay, report)
            if tape is not None:
                tape.replay = replay
                tape.save()
            scheduler.settle(replay=replay, actual=actual, now=timezone.now())
            Replay.objects.band_sometimes_divergent(replay.run_id)
    except DATABASE_AWAY:
        raise  # not the findings' fault: stored again once the database answers
    except Exception as error:
        log.exception("replay %s: its findings could not be stored", replay.pk)
        return _finish_unstored(
            replay=replay,
            owner=owner,
            expired_before=expired_before,
            error=error,
            actual=actual,
        )
    log.info(
        "replay %s finished: %s / %s", replay.pk, decision.verdict, decision.reason_code
    )
    signals.send_after_commit(signals.replay_finished, Replay, replay_id=replay.pk)
    return True


def _finished_fields(replay: Replay, decision: Ruling, provenance: dict) -> dict:
    retries_exhausted = replay.attempt >= replay.project.max_attempts
    return {
        "verdict": decision.verdict,
        "reason_code": decision.reason_code,
        "reason": decision.reason,
        "evidence": {
            "checks": [check_dict(c) for c in decision.checks],
            "agent": {},
            "usage_reported": {},
            "warnings": provenance.get("warnings", []),
        },
        "provenance": provenance,
        "review_band": ReviewBand.for_verdict(decision.verdict, retries_exhausted),
    }


def _report_evidence(report: Report, escaped: list[str], dropped: list[str]) -> dict:
    evidence: dict[str, Any] = {
        "agent": report.agent_summary(),
        "usage_reported": report.usage_reported,
        **_test_evidence(report),
        **report.extra_evidence(),
    }
    if report.usage_refused:
        evidence["usage_refused"] = report.usage_refused
    if report.tree_files is not None:
        evidence["tree_files"] = report.tree_files
    if report.environment:
        evidence["environment"] = report.environment
    if report.unstorable_count:
        evidence["unstorable_paths"] = report.unstorable_paths
        evidence["unstorable_count"] = report.unstorable_count
    if report.nested_repositories:
        evidence["nested_repositories"] = report.nested_repositories
    if report.ignored_paths:
        evidence["ignored_paths"] = report.ignored_paths
    if report.egress_counts.total > len(report.egress):
        # More attempts than were kept one by one: the page shows the counts.
        evidence["egress_counts"] = report.egress_counts.rows()[:200]
        evidence["egress_total"] = report.egress_counts.total
    if report.refused_counts:
        evidence["refused_calls"] = report.refused_counts
    if report.tape_play:
        evidence["tape"] = report.tape_play
    if escaped:
        evidence["escaped_text"] = escaped
    if dropped:
        evidence["dropped_numbers"] = dropped
    return evidence


def _finish_unstored(
    *,
    replay: Replay,
    owner: str,
    expired_before: datetime | None,
    error: Exception,
    actual: Amounts,
) -> bool:
    """End ``replay`` without its findings, whose store failed.

    Everything stored is made storable first, so the failure is ReplayHub's:
    ``harness_error``. The night is charged what the replay spent; should that
    be what failed, the sandbox time alone.
    """
    line = one_line(error)
    decision = _harness_error(f"its findings could not be stored ({line})")
    result = _finished_fields(replay, decision, replay.provenance)
    result["evidence"]["store_error"] = line
    now = timezone.now()
    with transaction.atomic():
        if not Replay.objects.finish(
            replay.pk, owner=owner, expired_before=expired_before, **result
        ):
            return False
        try:
            with transaction.atomic():
                scheduler.settle(replay=replay, actual=actual, now=now)
        except Exception:
            time_only = dataclasses.replace(actual, tokens=0, cost_usd=Decimal(0))
            scheduler.settle(replay=replay, actual=time_only, now=now)
    log.warning("replay %s finished without its findings: %s", replay.pk, line)
    signals.send_after_commit(signals.replay_finished, Replay, replay_id=replay.pk)
    return True


def _harness_error(detail: str) -> Ruling:
    return decide(Facts(harness_failure=Reason.HARNESS_ERROR, harness_detail=detail))


def one_line(error: BaseException) -> str:
    """The error's type and the first line of its message, storable, at most
    300 characters: enough to name a failure in a reason."""
    lines = str(error).strip().splitlines()
    text = type(error).__name__ + (f": {lines[0]}" if lines else "")
    return storable(text[:300])[0]


# What a test-gate attempt keeps: the fields TestOutcome has columns for.
_OUTCOME_FIELDS = {f.name for f in TestOutcome._meta.concrete_fields} - {"cases"}


def _store_findings(replay: Replay, report: Report) -> None:
    if report.comparison is not None:
        found = report.comparison.to_dict()
        found.pop("base_tree")
        Comparison.objects.create(replay=replay, **found)
    if report.gate is not None:
        TestOutcome.objects.bulk_create(
            TestOutcome(
                replay=replay,
                cases=_cases(a.cases),
                **{k: v for k, v in asdict(a).items() if k in _OUTCOME_FIELDS},
            )
            for a in report.gate.attempts
        )
        memory.remember(
            project=replay.project,
            replay_id=replay.pk,
            gate=report.gate,
            trees=report.trees,
            key=report.cache_key,
        )
    ModelCall.objects.bulk_create(
        ModelCall(replay=replay, **_model_call_row(call)) for call in report.model_calls
    )
    EgressAttempt.objects.bulk_create(
        EgressAttempt(replay=replay, **_egress_row(attempt))
        for attempt in report.egress
    )
    if report.provenance and not replay.run.provenance:
        Run.objects.filter(pk=replay.run_id).update(provenance=report.provenance)


_CALL_FIELDS = {f.name for f in ModelCall._meta.concrete_fields} - {"id", "replay"}
_EGRESS_FIELDS = {f.name for f in EgressAttempt._meta.concrete_fields} - {
    "id",
    "replay",
}


def _model_call_row(call) -> dict:
    row = {k: v for k, v in asdict(call).items() if k in _CALL_FIELDS}
    for name in ("input_tokens", "output_tokens", "cached_tokens"):
        row[name] = row.get(name) or 0
    for name in ("model_requested", "model_answered"):
        row[name] = str(row.get(name) or "")[:200]
    row["status"] = str(row.get("status", ""))[:16]
    row["error"] = str(row.get("error") or "")[:300]
    return row


def _egress_row(attempt) -> dict:
    return {k: v for k, v in asdict(attempt).items() if k in _EGRESS_FIELDS}


def _cases(cases) -> list | None:
    """Test cases as compact rows: [id, outcome, seconds, failure excerpt]."""
    if cases is None:
        return None
    return [[c.id, c.outcome, c.duration_s, c.message] for c in cases]


def _test_evidence(report: Report) -> dict:
    """The test files' side of the evidence: what the replay changed, and what
    could interfere with a test run."""
    plan = report.plan
    if plan is None:
        return {}
    return {
        "test_changes": {
            **plan.changes.to_dict(),
            "summary": plan.changes.summary(),
        },
        "reference_tree": plan.reference_tree,
        "interference": [
            {**asdict(hit), "what": KIND_TEXT.get(hit.kind, hit.kind)}
            for hit in plan.interference
        ],
    }


def night_run(
    *,
    project: Project,
    now: datetime | None = None,
    immediate: bool = False,
    agentic: bool = True,
) -> shares.NightReport:
    """Admit this night's replays for ``project``, tier by tier: the tape
    tier's first (runs with a tape, no model spend), then the text tier's,
    then (``agentic``) the agentic tier's — never a run the tape tier is to
    replay, and only runs the text tier passed on when the project's policy
    says so — and last the replicates of runs with nothing in flight. A worker
    sends them to their queues once the admission commits."""
    budget = scheduler.budget_of(project)
    tape = night_admit_tape(project=project, now=now, immediate=immediate)
    text = night_admit_text(project=project, now=now, immediate=immediate)
    if text.admitted and text.night is not None:
        enqueue(Task.DISPATCH_TEXT_NIGHT, text.night.pk)

    def gate(runs):
        if budget.tape_enabled:
            runs = without_taped(runs, project)
        if gates_agentic(budget):
            runs = gate_agentic(runs, budget)
        return runs

    if agentic:
        report = scheduler.night_admit(
            project=project, now=now, immediate=immediate, gate=gate
        )
    else:
        report = shares.NightReport(tiers.AGENTIC, night=text.night or tape.night)
    more = night_admit_replicates(project=project, now=now, immediate=immediate)
    report.others = {tiers.TAPE: tape, tiers.TEXT: text, tiers.REPLICATE: more}
    night = report.night or tape.night or more.night
    if (report.admitted or tape.admitted or more.admitted) and night is not None:
        enqueue(Task.DISPATCH_NIGHT, night.pk)
    return report


def nights_tick(*, now: datetime | None = None) -> list[shares.NightReport]:
    """What beat runs every few minutes: start nights that began, close ended ones.

    Each night's selection runs once: the night is claimed by a conditional
    UPDATE of ``scheduled_at``, so two beats (or a beat and a command) cannot
    both spend its budget.
    """
    now = now or timezone.now()
    reports = []
    projects = Project.objects.filter(
        Q(agentic_enabled=True)
        | Q(budget__text_enabled=True)
        | Q(budget__tape_enabled=True)
        | Q(budget__replicate_threshold__isnull=False)
    )
    for project in projects:
        if scheduler.night_claim(project=project, now=now):
            reports.append(night_run(project=project, now=now))
            continue
        budget = scheduler.budget_of(project)
        if budget.text_enabled and in_window(project, now):
            # Tiered: every tick admits the text replays the budget now has
            # room for and, when the text tier gates the agentic tier, the
            # agentic replays of runs it has passed on since. Without the
            # gate the agentic tier keeps its one selection per night.
            reports.append(
                night_run(project=project, now=now, agentic=gates_agentic(budget))
            )
        elif budget.replicate_threshold is not None and in_window(project, now):
            # The replicates the verdicts since call for; the other tiers
            # keep their one selection per night.
            more = night_admit_replicates(project=project, now=now)
            if more.admitted and more.night is not None:
                enqueue(Task.DISPATCH_NIGHT, more.night.pk)
            reports.append(more)
    scheduler.night_close_ended(now=now)
    return reports
