"""Workflows across models, or that enqueue work: keyword-only functions."""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from .gitops import remove_tree
from .logs import replay_context
from .models import Phase, Replay, ReplayStatus, Run, Trigger, WorkerCheck

log = logging.getLogger(__name__)


def worker_check_request(*, user) -> WorkerCheck:
    from . import tasks

    check = WorkerCheck.objects.create(requested_by=user)
    tasks.answer_worker_check.delay_on_commit(check.pk)
    return check


def lease_owner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _lease_deadline():
    return timezone.now() + timedelta(seconds=settings.REPLAYHUB_LEASE_SECONDS)


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
    from . import tasks

    replay = replay_create(
        run=run, trigger=trigger, user=user, enqueued_at=timezone.now(), **budget
    )
    tasks.run_replay.delay_on_commit(replay.pk)
    return replay


def replay_requeue_stale(*, older_than: timedelta, now=None) -> list[int]:
    """Send again the queued replays whose message was handed over long ago.

    A broker that restarts without persistence loses its messages; the replay
    rows say what should still run. A duplicate message is harmless (only a
    queued replay can be claimed), and ``enqueued_at`` moves on so one replay is
    sent again at most once per ``older_than``.
    """
    from . import tasks

    now = now or timezone.now()
    stale = list(
        Replay.objects.filter(
            status=ReplayStatus.QUEUED, enqueued_at__lt=now - older_than
        ).values_list("pk", flat=True)[:10_000]
    )
    for replay_id in stale:
        sent = Replay.objects.filter(
            pk=replay_id,
            status=ReplayStatus.QUEUED,
            enqueued_at__lt=now - older_than,
        ).update(enqueued_at=now)
        if sent:
            tasks.run_replay.delay(replay_id)
    if stale:
        log.warning("sent %d queued replays to the broker again", len(stale))
    return stale


def replay_claim(*, replay_id: int, owner: str) -> bool:
    """Take a queued replay for this worker. A conditional UPDATE, so only one wins."""
    now = timezone.now()
    return bool(
        Replay.objects.filter(pk=replay_id, status=ReplayStatus.QUEUED).update(
            status=ReplayStatus.RUNNING,
            phase=Phase.PROVISIONING,
            lease_owner=owner,
            lease_expires_at=_lease_deadline(),
            started_at=now,
        )
    )


def replay_heartbeat(*, replay_id: int, owner: str, phase: str | None = None) -> bool:
    """Extend the lease (and record the phase); False when the lease was lost."""
    fields = {"lease_expires_at": _lease_deadline()}
    if phase:
        fields["phase"] = phase
    return bool(
        Replay.objects.filter(
            pk=replay_id, status=ReplayStatus.RUNNING, lease_owner=owner
        ).update(**fields)
    )


class LeaseKeeper:
    """Extends a replay's lease from a background thread while the work runs.

    If the worker dies, the heartbeats stop and the reaper takes the replay back
    once the lease expires.
    """

    def __init__(self, *, replay_id: int, owner: str):
        self.replay_id = replay_id
        self.owner = owner
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        interval = max(settings.REPLAYHUB_LEASE_SECONDS / 3, 0.5)
        try:
            while not self._stop.wait(interval):
                if not replay_heartbeat(replay_id=self.replay_id, owner=self.owner):
                    self.lost = True
                    return
        finally:
            connection.close()


def replay_execute(*, replay_id: int, owner: str | None = None):
    """Claim and run one replay here and return its ``reproduce.Report``.

    None when the replay is not queued (another worker has it, or it is done) or
    when the lease was lost before the result could be stored.
    """
    with replay_context(replay_id):
        return _replay_execute(replay_id=replay_id, owner=owner)


def _replay_execute(*, replay_id: int, owner: str | None):
    from . import reproduce

    owner = owner or lease_owner_name()
    if not replay_claim(replay_id=replay_id, owner=owner):
        log.info("replay %s is not queued; nothing to do", replay_id)
        return None
    replay = Replay.objects.select_related("run", "project", "night").get(pk=replay_id)
    if _night_over(replay):
        replay_cancel_after_window(replay=replay, owner=owner)
        return None
    with LeaseKeeper(replay_id=replay_id, owner=owner):
        report = reproduce.execute(
            project=replay.project,
            run=replay.run,
            replay_id=replay.pk,
            caps=replay.caps,
            on_phase=lambda phase: replay_heartbeat(
                replay_id=replay_id, owner=owner, phase=phase
            ),
        )
    if not reproduce.persist(replay, report, owner=owner):
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
    from . import nightly
    from .budgets import Amounts
    from .models import Night

    now = timezone.now()
    with transaction.atomic():
        cancelled = Replay.objects.filter(
            pk=replay.pk, status=ReplayStatus.RUNNING, lease_owner=owner
        ).update(
            status=ReplayStatus.CANCELLED,
            phase=Phase.DONE,
            lease_owner="",
            lease_expires_at=None,
            finished_at=now,
        )
        if not cancelled:
            return
        nightly.settle(replay=replay, actual=Amounts(), now=now)
        Run.objects.filter(pk=replay.run_id, deferred_at__isnull=True).update(
            deferred_at=now
        )
        Night.objects.filter(pk=replay.night_id).update(deferred=F("deferred") + 1)
    log.info("replay %s not started: its night's window has ended", replay.pk)


def replay_reap_expired(*, now=None) -> list[int]:
    """End replays whose worker vanished and queue a fresh attempt while allowed.

    The lost attempt is kept as ``inconclusive / worker_lost`` evidence (worker
    loss is a harness-health signal); a new attempt is queued when the run has
    attempts left. Returns the ids of the reaped replays.
    """
    from . import reproduce
    from .verdicts import Facts, Reason, decide

    reaped = []
    now = now or timezone.now()
    for replay in Replay.objects.lease_expired(now).select_related("run", "project"):
        decision = decide(
            Facts(
                harness_failure=Reason.WORKER_LOST,
                harness_detail=f"no heartbeat from {replay.lease_owner}",
            )
        )
        with transaction.atomic():
            report = reproduce.Report(decision=decision, provenance=replay.provenance)
            # The lease owner must still be the dead one: a late heartbeat wins.
            if not reproduce.persist(
                replay, report, owner=replay.lease_owner, expired_before=now
            ):
                continue
            if replay.attempt < replay.project.max_attempts:
                replay_request(run=replay.run, trigger=Trigger.RETRY)
        # The dead worker could not clean up; on its host this removes the rest.
        remove_tree(Path(settings.REPLAYHUB_WORK_DIR) / f"replay-{replay.pk}")
        reaped.append(replay.pk)
        log.warning("replay %s: worker lost (%s)", replay.pk, replay.lease_owner)
    return reaped
