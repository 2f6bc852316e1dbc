"""The setup phase's first step for a project with an agent profile: its
CLI installed into the environment (``replayhub.agents.install`` says how)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from replayhub.agents import install
from replayhub.gateway import access
from replayhub.gateway.egress import ConnectAttempt
from replayhub.models import Project
from replayhub.sandbox import Bind, Limits, Runner, SandboxOutcome, SandboxSpec


def agent_label(project: Project) -> str:
    """``profile@version`` of the agent the setup installs ("" for none)."""
    profile = project.agent_profile
    return profile.label(project.agent_version) if profile is not None else ""


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
    root = settings.REPLAYHUB_AGENT_CACHE
    plan = install.plan(profile, project.agent_version, Path(root) if root else None)
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
    return outcome, network.attempts if network is not None else []
