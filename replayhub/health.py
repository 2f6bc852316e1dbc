"""``/healthz``: can this installation run replays right now?"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

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


@require_GET
@login_not_required
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when the database and the broker answer; the sandbox is reported too.

    No sandbox means replays end ``inconclusive / sandbox_unavailable``, which is
    degraded service, not an outage of the web app: it does not fail the check.
    """
    checks = {
        "database": check_database(),
        "broker": check_broker(),
        "sandbox": check_sandbox(),
    }
    healthy = checks["database"] == "ok" and checks["broker"] == "ok"
    return JsonResponse(
        {"status": "ok" if healthy else "error", **checks},
        status=200 if healthy else 503,
    )
