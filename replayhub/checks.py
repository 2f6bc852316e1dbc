"""Deploy checks of ReplayHub's own (``manage.py check --deploy``)."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from .health import limit_backend
from .sandbox import SandboxUnavailable, get_runner


@register(Tags.security, deploy=True)
def secret_key_is_not_the_development_default(app_configs, **kwargs):
    if settings.SECRET_KEY == settings.DEV_SECRET_KEY:
        return [
            Error(
                "SECRET_KEY is the development default.",
                hint="Set SECRET_KEY in the environment to a long random value.",
                id="replayhub.E001",
            )
        ]
    return []


@register(Tags.security, deploy=True)
def sandbox_caps_are_the_kernels(app_configs, **kwargs):
    """The default runner's caps, as a worker on this machine would get them.

    Without a cgroup, memory and processes are capped per process (rlimits)
    and by a watchdog that samples them, which a fast fork or allocation can
    outrun; the Docker runner applies the engine's seccomp profile, not the
    sandbox's own filter. Where no sandbox works at all (a web container),
    ``/healthz`` says so and nothing is warned here.
    """
    try:
        runner = get_runner(settings.REPLAYHUB_DEFAULT_RUNNER)
        runner.check()
        backend = limit_backend(runner)
    except SandboxUnavailable:
        return []
    found = []
    if backend == "rlimit":
        found.append(
            Warning(
                "The sandbox caps memory and processes with rlimits only.",
                hint="Give the worker a writable cgroup (a systemd host, or a "
                "cgroup mount the worker container may write), or use the "
                "Docker runner; see docs/deploy.md.",
                id="replayhub.W001",
            )
        )
    if runner.name == "docker":
        found.append(
            Warning(
                "The Docker runner's sandboxes run without the sandbox's own "
                "seccomp filter (the engine's default profile applies).",
                hint="Use the bubblewrap runner where its filter matters; see "
                "docs/deploy.md.",
                id="replayhub.W002",
            )
        )
    return found
