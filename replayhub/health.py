"""``/healthz``: can this installation run replays right now?"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_safe

from replayhub.sandbox import SandboxUnavailable, get_runner
from replayhub.sandbox.base import RUNNER_KINDS


def check_database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any failure means down; its class names it
        return f"error: {exc.__class__.__name__}"
    return "ok"


def check_broker() -> str:
    from replayhub.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:
        return f"error: {exc.__class__.__name__}"
    return "ok"


def describe_sandbox() -> str:
    """How this machine's default runner isolates a replay and caps its
    memory and processes, then which other runners pass their self-check
    here, in one line (what a worker answers a check with)."""
    others = "; ".join(
        f"{name} {state}"
        for name, state in runner_availability().items()
        if name != settings.REPLAYHUB_DEFAULT_RUNNER
    )
    try:
        runner = get_runner(settings.REPLAYHUB_DEFAULT_RUNNER)
        runner.check()
        backend = limit_backend(runner)
    except SandboxUnavailable as exc:
        return f"unavailable: {exc} Others: {others}"
    kind = f"{runner.name} ({runner.isolation})"
    if backend == "rlimit":
        caps = "rlimits and a watchdog sampling them (no cgroup)"
    else:
        caps = backend
    return f"{kind}: memory and processes capped by {caps}. Others: {others}"


def runner_availability() -> dict[str, str]:
    """Each runner kind's self-check on this worker: "ok" or "unavailable
    (why)". A runner that fails it refuses every run here (no fallback), so
    its replays end ``sandbox_unavailable``; the status page shows which.
    The Docker runner is checked for its engine only (its image is the
    project's)."""
    found = {}
    for name in RUNNER_KINDS:
        try:
            runner = get_runner(name)
            check = getattr(runner, "check_engine", runner.check)
            check()
        except SandboxUnavailable as exc:
            found[name] = f"unavailable ({str(exc).rstrip('.')})"
        else:
            found[name] = "ok"
    return found


def limit_backend(runner) -> str:
    """What caps memory and processes for ``runner``: a cgroup backend's name,
    "rlimit", or "docker" (the engine's cgroups)."""
    return getattr(runner, "limit_backend", runner.name)


def check_sandbox() -> str:
    try:
        get_runner(settings.REPLAYHUB_DEFAULT_RUNNER).check()
    except SandboxUnavailable as exc:
        return f"unavailable: {exc}"
    return "ok"


def queued_without_messages(*, now) -> int | None:
    """How many queued replays have no message, as the beat's sweep
    (``services.replay_requeue_orphaned``) decides: queued long enough while
    the replay queue is empty. None when the broker does not answer."""
    from replayhub.celery import REPLAY_QUEUE, queue_length
    from replayhub.models import Replay, ReplayStatus

    try:
        waiting = queue_length(REPLAY_QUEUE)
    except Exception:  # the broker check reports it
        return None
    if waiting:
        return 0
    after = timedelta(seconds=settings.REPLAYHUB_ORPHAN_AFTER_SECONDS)
    return Replay.objects.filter(
        status=ReplayStatus.QUEUED, enqueued_at__lt=now - after
    ).count()


def check_queue(*, now=None) -> dict[str, object]:
    """Whether the replays can move: queued replays whose message is gone,
    and how long ago the beat's periodic job last ran. ``stalled`` names
    what is stuck, empty when nothing is. ``stopped_hosts`` names the worker
    hosts that stopped claiming after host failures in a row: the others
    carry the replays, so they alone stall nothing."""
    from replayhub.models import Heartbeat, Replay, ReplayStatus

    now = now or timezone.now()
    orphans = queued_without_messages(now=now)
    beat_at = (
        Heartbeat.objects.filter(name=Heartbeat.BEAT)
        .values_list("beat_at", flat=True)
        .first()
    )
    beat_age = None if beat_at is None else int((now - beat_at).total_seconds())
    stalled = []
    if orphans:
        stalled.append("queued rows without messages")
    if beat_age is None:
        # A fresh installation whose beat has not run yet is not stalled
        # until it has replays waiting.
        if Replay.objects.filter(status=ReplayStatus.QUEUED).exists():
            stalled.append("beat stale")
    elif beat_age > settings.REPLAYHUB_BEAT_STALE_SECONDS:
        stalled.append("beat stale")
    stopped = Heartbeat.objects.filter(name__startswith=Heartbeat.STOPPED)
    return {
        "queued_without_messages": orphans,
        "beat_seconds_ago": beat_age,
        "stalled": stalled,
        "stopped_hosts": [
            name.removeprefix(Heartbeat.STOPPED)
            for name in stopped.values_list("name", flat=True)
        ],
    }


@require_safe
@login_not_required
def healthz(request: HttpRequest) -> JsonResponse:
    """One JSON object: 200 when the database and the broker answer and the
    replays can move; 503 otherwise, with ``status`` "error" (a server is
    down) or "stalled" (``stalled`` lists why: queued replays without a
    message, a beat that has not run), so an orchestrator can act.

    No sandbox means replays end ``inconclusive / sandbox_unavailable``, which is
    degraded service, not an outage of the web app: it does not fail the check.
    """
    checks: dict[str, object] = {
        "database": check_database(),
        "broker": check_broker(),
        "sandbox": check_sandbox(),
    }
    healthy = checks["database"] == "ok" and checks["broker"] == "ok"
    status = "ok" if healthy else "error"
    if checks["database"] == "ok":
        queue = check_queue()
        checks.update(queue)
        if healthy and queue["stalled"]:
            status = "stalled"
    return JsonResponse(
        {"status": status, **checks}, status=200 if status == "ok" else 503
    )
