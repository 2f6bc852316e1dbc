"""No host fallback: without a working bubblewrap nothing runs at all."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from replayhub.health import runner_availability
from replayhub.sandbox import SandboxSpec, SandboxUnavailable, get_runner
from replayhub.sandbox.bwrap import BwrapRunner
from tests.sandbox.engines import Podman

REQUIRE_SANDBOX = os.environ.get("REPLAYHUB_REQUIRE_SANDBOX") == "1"


def _spec_that_would_leave_a_trace(workspace: Path, trace: Path) -> SandboxSpec:
    return SandboxSpec(argv=("/usr/bin/touch", str(trace)), workspace=workspace)


def test_missing_bwrap_refuses_to_run_and_nothing_runs_on_the_host(
    workspace: Path, shared_dir: Path
) -> None:
    runner = BwrapRunner(bwrap_path="/nonexistent/bwrap")
    trace = shared_dir / "ran-on-the-host"
    with pytest.raises(SandboxUnavailable, match="bubblewrap is not installed"):
        runner.check()
    with pytest.raises(SandboxUnavailable, match="bubblewrap is not installed"):
        runner.run(_spec_that_would_leave_a_trace(workspace, trace))
    assert not trace.exists()


def test_bwrap_missing_from_the_launch_path_refuses_to_run(
    workspace: Path, shared_dir: Path
) -> None:
    runner = BwrapRunner(bwrap_path="bwrap-not-installed-anywhere")
    trace = shared_dir / "ran-on-the-host"
    with pytest.raises(SandboxUnavailable, match="bubblewrap is not installed"):
        runner.run(_spec_that_would_leave_a_trace(workspace, trace))
    assert not trace.exists()


def test_a_bwrap_that_cannot_build_a_sandbox_refuses_to_run(
    workspace: Path, shared_dir: Path
) -> None:
    # Looks like a current bubblewrap but fails, as on a host with user
    # namespaces disabled.
    fake = shared_dir / "bwrap"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --help ]; then echo "--disable-userns --size"; exit 0; fi\n'
        'echo "bwrap: No permissions to create new namespace" >&2\n'
        "exit 1\n"
    )
    fake.chmod(0o755)
    trace = shared_dir / "ran-on-the-host"
    runner = BwrapRunner(bwrap_path=str(fake))
    with pytest.raises(SandboxUnavailable, match="cannot create a sandbox here"):
        runner.run(_spec_that_would_leave_a_trace(workspace, trace))
    assert not trace.exists()


def test_a_bwrap_too_old_for_the_required_flags_refuses_to_run(
    workspace: Path, shared_dir: Path
) -> None:
    runner = BwrapRunner(bwrap_path="/bin/true")
    trace = shared_dir / "ran-on-the-host"
    with pytest.raises(SandboxUnavailable, match="too old"):
        runner.run(_spec_that_would_leave_a_trace(workspace, trace))
    assert not trace.exists()


@pytest.mark.skipif(
    shutil.which("bwrap") is None and not REQUIRE_SANDBOX,
    reason="bubblewrap is not installed (REPLAYHUB_REQUIRE_SANDBOX=1 fails instead)",
)
def test_the_default_runner_works_on_this_host() -> None:
    get_runner().check()


def test_each_runners_self_check_on_this_worker_is_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")

    found = runner_availability()

    assert set(found) == {"bwrap", "docker", "gvisor"}
    assert found["docker"].startswith("unavailable (no Docker engine answers")
    if REQUIRE_SANDBOX:
        assert found["bwrap"] == "ok"


def test_a_docker_engine_that_answers_makes_the_docker_runner_available(
    podman: Podman, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", podman.host)

    assert runner_availability()["docker"] == "ok"
