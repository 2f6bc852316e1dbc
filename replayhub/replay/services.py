"""A replay sent back to the queue, and a worker's host that stops itself.

``replay_retry_later`` puts a night's replay that met a remote out of reach
or a sick host back in the queue under the rules of ``replay.retries``,
keeping its night and its reservation (nothing was spent: the agent never
ran). Its earlier tries are kept in its ``evidence`` while it waits
(``TRIES``), so the ruling that stands at last can say how often and over
how long it was tried.

A worker's host counts its host failures in a row (``host_failed``, or a
work folder short of space when a replay is offered); after
``REPLAYHUB_HOST_FAILURES_TO_STOP`` it stops claiming replays until the
worker is restarted: a ``Heartbeat`` row ``stopped:<host>`` says so on the
status page, every replay offered to it is sent back to the queue for
another host, and its worker is asked to stop consuming the replay queue
(where the broker carries control messages: Redis; the row holds on any).
The count is each worker process's own, so a host with several processes
stops when one of them has seen that many failures in a row.

A database out of reach for a moment (a restart, a failover) costs a replay
running on a worker neither its lease nor its result: a missed heartbeat is
tried again (``lease_beat``), its result is stored once the database answers
(``once_the_database_answers``), and one whose execution met the outage
before anything was paid for runs again (``replay_again``).
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from replayhub.celery import REPLAY_QUEUE, Task, app, enqueue
from replayhub.models import Heartbeat, Replay, ReplayStatus, Trigger
from replayhub.replay import retries
from replayhub.replay.workspace import Report
from replayhub.verdicts import Reason

log = logging.getLogger(__name__)

# The key of a waiting replay's ``evidence`` that holds its earlier tries.
TRIES = "tries"
# The database out of reach for a moment: a restart, a failover.
DATABASE_AWAY = (OperationalError, InterfaceError)
T = TypeVar("T")


def lease_beat(*, replay_id: int, owner: str, phase: str | None = None) -> bool:
    """Extend ``replay_id``'s lease (and record the phase); False when the
    lease was lost. True when the database is out of reach for a moment: the
    lease holds until it expires, and the next beat tries again on a new
    connection."""
    try:
        return Replay.objects.heartbeat(replay_id, owner=owner, phase=phase)
    except DATABASE_AWAY as error:
        log.warning("replay %s: a heartbeat missed the database: %s", replay_id, error)
        connection.close()
        return True


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
                if not lease_beat(replay_id=self.replay_id, owner=self.owner):
                    self.lost = True
                    return
        finally:
            connection.close()


def once_the_database_answers(step: Callable[[], T], *, replay_id: int) -> T:
    """``step()`` (storing a replay's result), tried again while the database
    is out of reach, for as long as a lease lasts: a database restart does
    not cost a replay its result, nor the night a second attempt. Past that,
    the error stands and the reaper rules on the replay."""
    wait = 1.0
    deadline = time.monotonic() + settings.REPLAYHUB_LEASE_SECONDS
    while True:
        try:
            return step()
        except DATABASE_AWAY as error:
            if time.monotonic() + wait > deadline:
                raise
            log.warning(
                "replay %s: its result waits for the database (%s); again in %g s",
                replay_id,
                error,
                wait,
            )
            connection.close()
            time.sleep(wait)
            wait = min(wait * 2, 8.0)


def replay_retry_later(
    *, replay: Replay, report: Report, owner: str, now: datetime | None = None
) -> bool:
    """Queue ``replay`` again when its ruling is one to try again later; True
    when it went back (its message is sent after the back-off).

    Otherwise the ruling on ``report`` stands, its reason saying how often and
    over how long the replay was tried when it was tried more than once.
    Either way this host's failures in a row are counted.
    """
    now = now or timezone.now()
    decision = report.decision
    if decision.reason_code == Reason.HOST_FAILED:
        host_count(failed=True)
    elif decision.reason_code not in retries.RETRIED:
        # The host provisioned the replay. A remote out of reach, or a
        # sandbox one project asks for, says nothing of the host's health.
        host_count(failed=False)
    earlier = replay.evidence.get(TRIES) if isinstance(replay.evidence, dict) else None
    earlier = earlier if isinstance(earlier, dict) else {}
    tries = int(earlier.get("count", 0)) + 1
    since = _when(earlier.get("since")) or replay.started_at or now
    spent = report.agent.duration_s > 0 or bool(report.model_calls)
    delay = None
    if not spent:
        delay = retries.next_try(
            reason=decision.reason_code,
            tries=tries,
            now=now,
            window_end=night_window_end(replay),
            first=settings.REPLAYHUB_RETRY_FIRST_SECONDS,
            cap=settings.REPLAYHUB_RETRY_MAX_SECONDS,
            host_tries=settings.REPLAYHUB_HOST_TRIES,
        )
    if delay is None:
        if decision.reason_code in retries.RETRIED:
            hosts_used = (
                decision.reason_code in retries.ON_ANOTHER_HOST
                and tries >= settings.REPLAYHUB_HOST_TRIES
            )
            reason = retries.tried_reason(
                decision.reason,
                tries=tries,
                seconds=(now - since).total_seconds(),
                window_closed=not hosts_used,
            )
            report.decision = replace(decision, reason=reason)
        return False
    tried = {"count": tries, "since": since.isoformat(), "last": decision.reason}
    with transaction.atomic():
        due = now + timedelta(seconds=delay)
        if not Replay.objects.release(
            replay.pk, owner=owner, due_at=due, evidence={TRIES: tried}
        ):
            return False
        enqueue(Task.RUN_REPLAY, replay.pk, countdown=delay)
    log.warning(
        "replay %s: %s after try %d; tried again in %g s",
        replay.pk,
        decision.reason_code,
        tries,
        delay,
    )
    return True


def replay_again(*, replay: Replay, owner: str) -> bool:
    """Queue ``replay`` again at once, keeping its night and reservation: its
    execution met the database out of reach, which says nothing of the run
    (the caller sends back only a replay with no model call paid for). False
    when it is no longer ``owner``'s."""
    with transaction.atomic():
        if not Replay.objects.release(
            replay.pk, owner=owner, due_at=timezone.now(), evidence=replay.evidence
        ):
            return False
        enqueue(Task.RUN_REPLAY, replay.pk)
    log.warning("replay %s: queued again, the database went away mid-replay", replay.pk)
    return True


def night_window_end(replay: Replay) -> datetime | None:
    """When the night that admitted ``replay`` closes; None when no night did
    (an explicit reproduce, a reviewer's rerun, a retry of a lost worker)."""
    if replay.trigger != Trigger.SCHEDULER or replay.night is None:
        return None
    return replay.night.window_end


def _when(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


@dataclass
class HostHealth:
    """This worker process's host failures in a row."""

    in_a_row: int = 0


THIS_PROCESS = HostHealth()


def host_name() -> str:
    return settings.REPLAYHUB_HOST_NAME


def stopped_row_name(host: str) -> str:
    return (Heartbeat.STOPPED + host)[: Heartbeat._meta.get_field("name").max_length]


def host_count(*, failed: bool) -> None:
    """One more host failure in a row for this process, or the row broken
    (anything else: the host provisioned, or the fault was not its own);
    the host stops at ``REPLAYHUB_HOST_FAILURES_TO_STOP``."""
    THIS_PROCESS.in_a_row = THIS_PROCESS.in_a_row + 1 if failed else 0
    if THIS_PROCESS.in_a_row >= settings.REPLAYHUB_HOST_FAILURES_TO_STOP:
        host = host_name()
        Heartbeat.objects.update_or_create(
            name=stopped_row_name(host), defaults={"beat_at": timezone.now()}
        )
        log.error(
            "%s stops claiming replays after %d host failures in a row",
            host,
            THIS_PROCESS.in_a_row,
        )


def short_of_disk(free_bytes: int, *, minimum_mb: int) -> str:
    """Why a work folder with ``free_bytes`` free takes no replay ("" when
    it has room): less than ``minimum_mb`` MiB free."""
    if free_bytes >= minimum_mb * 1024 * 1024:
        return ""
    return (
        f"only {free_bytes // (1024 * 1024)} MiB free in the work folder "
        f"(REPLAYHUB_MIN_FREE_DISK_MB is {minimum_mb})"
    )


def host_declines(*, replay_id: int, worker: str = "") -> str:
    """Why this host takes no replay now ("" when it takes one): it stopped
    after host failures in a row, or its work folder is short of space.

    A declined replay is not claimed: its message is sent again, after the
    first back-off, for another worker to take. ``worker`` is the Celery
    worker's node name; a stopped host's worker is asked to stop consuming
    the replay queue.
    """
    host = host_name()
    stopped = Heartbeat.objects.filter(name=stopped_row_name(host)).exists()
    why = "stopped after host failures in a row" if stopped else ""
    if not why:
        try:
            # A new host's work folder is made by its first replay.
            work = Path(settings.REPLAYHUB_WORK_DIR)
            work.mkdir(parents=True, exist_ok=True)
            free = shutil.disk_usage(work).free
        except OSError as error:
            why = f"the work folder cannot be read: {error}"
        else:
            why = short_of_disk(free, minimum_mb=settings.REPLAYHUB_MIN_FREE_DISK_MB)
        if not why:
            return ""
        host_count(failed=True)
        stopped = THIS_PROCESS.in_a_row >= settings.REPLAYHUB_HOST_FAILURES_TO_STOP
    # A message for a replay no longer waiting (done, or taken) goes no further.
    if Replay.objects.filter(pk=replay_id, status=ReplayStatus.QUEUED).exists():
        enqueue(
            Task.RUN_REPLAY,
            replay_id,
            on_commit=False,
            countdown=settings.REPLAYHUB_RETRY_FIRST_SECONDS,
        )
    log.warning("%s declined replay %s: %s", host, replay_id, why)
    if stopped and worker:
        _stop_consuming(worker)
    return why


def _stop_consuming(worker: str) -> None:
    try:
        app.control.cancel_consumer(REPLAY_QUEUE, destination=[worker])
    except Exception as error:  # a transport without control messages
        log.warning("%s could not stop consuming: %s", worker, error)


def host_restarted() -> None:
    """A worker starting on this host starts its count again: whoever
    restarted it has seen to the host."""
    THIS_PROCESS.in_a_row = 0
    Heartbeat.objects.filter(name=stopped_row_name(host_name())).delete()
