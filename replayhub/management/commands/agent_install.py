"""``manage.py agent_install``: agent CLIs installed on this worker host ahead
of the night, into the installs it keeps (``environments.agent_installs``), so
that the first environment needing each copies it instead of installing it.

The install is the setup phase's own (``agent_setup.run_install``): in the
sandbox, from the worker's agent cache or its registry, under the default
setup limits, on the host's root. A project on a root image or the Docker
runner installs on that root, and keeps its own.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from replayhub import agents
from replayhub.agents.profile import version_problem
from replayhub.environments import agent_installs, build, images
from replayhub.environments.agent_setup import install_plan, run_install
from replayhub.lib.fstree import remove_tree
from replayhub.models import Project
from replayhub.sandbox import Bind, SandboxUnavailable


def _wanted(names: list[str], every: bool) -> list[tuple[str, str]]:
    """(profile, version) pairs from ``NAME[@VERSION]`` words, or every profile
    at its pinned release."""
    if every:
        return [(name, "") for name in agents.PROFILES]
    if not names:
        raise CommandError("name an agent (NAME or NAME@VERSION) or give --all.")
    wanted = []
    for word in names:
        name, _, version = word[:100].partition("@")
        if name not in agents.PROFILES:
            known = ", ".join(agents.PROFILES)
            raise CommandError(f"no agent profile {name!r} (known: {known}).")
        wanted.append((name, version))
    return wanted


class Command(BaseCommand):
    help = (
        "Install agent CLIs into this host's kept installs ahead of their first "
        "replay, as the setup phase would: NAME or NAME@VERSION, or --all."
    )

    def add_arguments(self, parser):
        parser.add_argument("names", nargs="*", metavar="AGENT[@VERSION]")
        parser.add_argument(
            "--all",
            action="store_true",
            help="Every agent profile at its pinned release.",
        )

    def handle(self, *args, names, all, **options):
        failed = 0
        for name, version in _wanted(names, all):
            project = Project(name=f"install-{name}", agent=name, agent_version=version)
            if version and (problem := version_problem(version)):
                raise CommandError(f"{name}@{version}: {problem}")
            line = self._install(project)
            failed += not line.startswith("kept")
            self.stdout.write(f"{name}: {line}")
        if failed:
            raise CommandError(f"{failed} install(s) failed.")

    def _install(self, project: Project) -> str:
        try:
            runner = images.runner_for(project)
        except SandboxUnavailable as exc:
            return f"no sandbox: {exc}"
        _, key = install_plan(project)
        if agent_installs.kept(key):
            return f"kept in {agent_installs.folder()} already"
        started = time.monotonic()
        # Where the setup phase would install: a build folder of the
        # environment cache, and a work folder the sandbox's user can reach.
        store = build.cache()
        env_build = store.new_build(uuid.uuid4().hex * 2)
        work = Path(settings.REPLAYHUB_WORK_DIR) / f"agent-install-{uuid.uuid4().hex}"
        try:
            outcome, _ = run_install(
                project,
                runner,
                env_bind=Bind(env_build / "env", build.ENV_PATH, writable=True),
                work=work,
                env=build.phase_env(),
                limits=build.setup_limits(project),
            )
        except SandboxUnavailable as exc:
            return f"no sandbox: {exc}"
        finally:
            store.discard_build(env_build)
            remove_tree(work)
        seconds = time.monotonic() - started
        if outcome.exit_code != 0 or outcome.timed_out or outcome.limit_fired:
            last = (outcome.output or "").strip().splitlines()[-1:] or ["no output"]
            why = outcome.limit_fired or ("timed out" if outcome.timed_out else "")
            return f"failed ({why or f'exit {outcome.exit_code}'}): {last[0][:200]}"
        return f"kept in {agent_installs.folder()} ({seconds:.0f} s)"
