"""Checks of ReplayHub's own (``manage.py check``, some only with ``--deploy``)."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.db import DatabaseError

from replayhub.health import limit_backend
from replayhub.sandbox import SandboxUnavailable, get_runner


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


@register(Tags.security, deploy=True)
def rollout_rewards_have_a_separate_verifier(app_configs, **kwargs):
    """A rollout project whose rewards come from the harness's own sandbox,
    where the model's tool calls run and could write the reward themselves."""
    from replayhub.models import Project
    from replayhub.rollouts.verifier import UNVERIFIED_WARNING, rewards_unverified

    try:
        projects = list(
            Project.objects.only("slug", "harness_command", "verifier_command")
        )
    except DatabaseError:
        # No database yet, or one not migrated this far: nothing to check.
        return []
    return [
        Warning(
            f"Project {project.slug} {UNVERIFIED_WARNING}",
            hint="Set its verifier command (the admin's Rollouts section): a "
            "program that scores $REPLAYHUB_COMPLETION_FILE in a fresh sandbox "
            "with no network; see docs/architecture.md, Rollout replays.",
            obj=project.slug,
            id="replayhub.W003",
        )
        for project in projects
        if rewards_unverified(project)
    ]


@register()
def environment_store_url_is_a_bucket(app_configs, **kwargs):
    """A store URL that names no bucket would leave every host building its
    own without a word: said at start instead."""
    from replayhub.environments.locations import parse_url

    url = settings.REPLAYHUB_ENV_STORE_URL
    if not url:
        return []
    try:
        parse_url(url)
    except ValueError as error:
        return [
            Error(
                f"REPLAYHUB_ENV_STORE_URL: {error}",
                hint="Set it to s3://bucket/prefix, or leave it empty.",
                id="replayhub.E002",
            )
        ]
    return []
