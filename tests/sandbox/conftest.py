"""Fixtures for the sandbox tests: a real bubblewrap runner and host-side probes."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from replayhub.sandbox import Limits, SandboxOutcome, SandboxSpec
from replayhub.sandbox.bwrap import BwrapRunner
from tests.conftest import processes_mentioning
from tests.sandbox.engines import Podman, podman_available

REQUIRE_SANDBOX = os.environ.get("REPLAYHUB_REQUIRE_SANDBOX") == "1"

RunInSandbox = Callable[..., SandboxOutcome]


@pytest.fixture(scope="session")
def runner() -> BwrapRunner:
    return BwrapRunner()


@pytest.fixture(scope="session")
def podman() -> Iterator[Podman]:
    """podman's Docker-compatible service and a test image, for the session."""
    if not podman_available():
        if REQUIRE_SANDBOX:
            pytest.fail("podman is not installed (REPLAYHUB_REQUIRE_SANDBOX=1)")
        pytest.skip("podman is not installed")
    engine = Podman.start()
    yield engine
    engine.stop()


def _reachable_tmpdir(prefix: str) -> Path:
    # Under /tmp rather than pytest's tmp_path: as root the sandbox runs as
    # nobody, and bwrap must be able to reach the paths it binds
    # (/tmp/pytest-of-root is mode 0700).
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)
    return path


@pytest.fixture
def workspace() -> Iterator[Path]:
    path = _reachable_tmpdir("replayhub-sandbox-ws-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A host dir the sandbox could reach if it were bound (it is not, by default)."""
    path = _reachable_tmpdir("replayhub-sandbox-host-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def marker() -> str:
    return f"replayhub-marker-{uuid.uuid4().hex}"


@pytest.fixture
def run_in_sandbox(runner: BwrapRunner, workspace: Path) -> RunInSandbox:
    def run(
        *argv: str,
        env: dict[str, str] | None = None,
        binds: tuple = (),
        **limits: object,
    ) -> SandboxOutcome:
        limits.setdefault("wall_seconds", 30)
        spec = SandboxSpec(
            argv=argv,
            workspace=workspace,
            env=env or {},
            binds=binds,
            limits=Limits(**limits),  # type: ignore[arg-type]
        )
        return runner.run(spec)

    return run


@pytest.fixture
def survivors() -> Callable[[str], list[int]]:
    """Processes still mentioning the marker once a run has returned.

    Allows a short grace period for the kernel to finish tearing down pid
    namespaces when the runner is not root (no extra reaper layer then).
    """

    def check(marker: str) -> list[int]:
        deadline = time.monotonic() + 2
        while (found := processes_mentioning(marker)) and time.monotonic() < deadline:
            time.sleep(0.05)
        return found

    return check


def orphaned_zombies() -> set[int]:
    """Zombie bwrap/unshare processes left to the host's pid 1 to reap."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
        if state == "Z" and ppid == "1" and comm in {"bwrap", "unshare"}:
            found.add(int(entry.name))
    return found
