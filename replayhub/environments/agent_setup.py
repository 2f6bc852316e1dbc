"""The setup phase's first step for a project with an agent profile: its
CLI installed into the environment (``replayhub.agents.install`` says how)."""

from __future__ import annotations

import time
from pathlib import Path

from django.conf import settings

from replayhub.agents import install
from replayhub.agents.profile import INSTALL_DIR
from replayhub.environments import agent_installs, images
from replayhub.gateway import access
from replayhub.gateway.egress import ConnectAttempt
from replayhub.models import Project
from replayhub.sandbox import Bind, Limits, Runner, SandboxOutcome, SandboxSpec


def agent_label(project: Project) -> str:
    """``profile@version`` of the agent the setup installs ("" for none)."""
    profile = project.agent_profile
    return profile.label(project.agent_version) if profile is not None else ""


def install_plan(project: Project) -> tuple[install.InstallPlan, str]:
    """How the project's agent CLI installs here, and the key its finished
    install is kept under on this host."""
    profile = project.agent_profile
    assert profile is not None
    root = settings.REPLAYHUB_AGENT_CACHE
    plan = install.plan(profile, project.agent_version, Path(root) if root else None)
    key = agent_installs.install_key(
        spec=profile.spec(project.agent_version),
        argv=plan.argv,
        cache=plan.cache,
        root=images.root_label(project),
    )
    return plan, key


def run_install(
    project: Project,
    runner: Runner,
    *,
    env_bind: Bind,
    work: Path,
    env: dict[str, str],
    limits: Limits,
) -> tuple[SandboxOutcome, list[ConnectAttempt]]:
    """The project's agent CLI installed into the environment ``env_bind``
    mounts writable (``agents.install``),
    in a sandbox of its own under the setup phase's limits: from the
    worker's agent cache, bound read-only, or else from its registry, whose
    hosts only this sandbox's proxy allows."""
    profile = project.agent_profile
    assert profile is not None
    plan, key = install_plan(project)
    spec = profile.spec(project.agent_version)
    installed = env_bind.source / Path(INSTALL_DIR).relative_to(env_bind.dest)
    started = time.monotonic()
    with agent_installs.one_at_a_time(key):
        if agent_installs.take(key, installed):
            said = f"{spec} copied from this host's earlier install ({key[:12]})\n"
            return _copied(said, time.monotonic() - started, runner), []
        binds = [env_bind]
        if plan.cache is not None:
            binds.append(Bind(plan.cache, install.CACHE_PATH))
        empty = work / "agent-install"
        empty.mkdir(parents=True)
        outcome, network = access.run_phase(
            runner,
            SandboxSpec(
                argv=plan.argv,
                workspace=empty,
                env=env,
                limits=limits,
                binds=tuple(binds),
            ),
            needs=access.Needs(egress=plan.egress, proxy=True),
            directory=work / "net-install",
            phase="setup",
            loopback_direct=False,
        )
        if outcome.exit_code == 0 and not (outcome.timed_out or outcome.limit_fired):
            agent_installs.keep(key, installed)
    return outcome, network.attempts if network is not None else []


def _copied(output: str, seconds: float, runner: Runner) -> SandboxOutcome:
    """What the setup phase reports for an install copied, not run."""
    return SandboxOutcome(
        exit_code=0,
        output=output,
        output_truncated=False,
        timed_out=False,
        limit_fired="",
        duration_s=seconds,
        runner=runner.name,
        isolation=runner.isolation,
    )
