"""The gVisor runner: its OCI bundle, and real runsc sandboxes checked from
inside."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from replayhub.sandbox import Limits, SandboxSpec, SandboxUnavailable, get_runner
from replayhub.sandbox.gvisor import GvisorRunner
from tests.conftest import ROOT, child_env, processes_mentioning
from tests.sandbox.conftest import REQUIRE_SANDBOX

LIMITS = Limits(
    wall_seconds=30,
    memory_bytes=256 * 1024**2,
    max_processes=64,
    tmpfs_bytes=16 * 1024**2,
    file_size_bytes=10**6,
)


@pytest.fixture(scope="session")
def gvisor() -> GvisorRunner:
    runner = GvisorRunner()
    try:
        runner.check()
    except SandboxUnavailable as error:
        if REQUIRE_SANDBOX and shutil.which("runsc"):
            raise
        pytest.skip(str(error))
    return runner


def test_the_bundle_runs_unprivileged_without_network_on_a_read_only_root(
    tmp_path: Path,
) -> None:
    runner = GvisorRunner(cgroups="yes")
    config = runner.bundle_config(
        SandboxSpec(argv=("a", "; b"), workspace=tmp_path, limits=LIMITS),
        tmp_path / "rootfs",
        "r1",
    )

    process = config["process"]
    assert process["user"] == {"uid": 65534, "gid": 65534}
    assert process["args"] == ["a", "; b"]
    assert all(not caps for caps in process["capabilities"].values())
    assert process["noNewPrivileges"] and config["root"]["readonly"]
    assert {"type": "RLIMIT_NPROC", "soft": 64, "hard": 64} in process["rlimits"]
    assert config["linux"]["resources"]["memory"]["limit"] == 256 * 1024**2
    assert {"type": "network"} in config["linux"]["namespaces"]
    writable = [
        m["destination"]
        for m in config["mounts"]
        if m["type"] == "bind" and "rw" in m["options"]
    ]
    assert writable == ["/workspace"]


def test_without_runsc_the_runner_is_unavailable_and_runs_nothing(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran-on-host"
    runner = get_runner("gvisor", runsc_path="/nonexistent/runsc")
    with pytest.raises(SandboxUnavailable):
        runner.run(SandboxSpec(argv=("touch", str(marker)), workspace=tmp_path))
    assert not marker.exists()


# What the sandbox got, read from inside (gVisor has no /sys/class/net and
# no /proc/self/limits: /proc/net/dev lists the interfaces, Python the rlimit).
INSIDE = r"""
echo "uid=$(id -u) gid=$(id -g)"
grep -E '^Cap(Eff|Prm|Bnd):' /proc/self/status
if (echo x > /probe) 2>/dev/null; then echo "root=writable"
else echo "root=read-only"; fi
for m in /tmp /home/sandbox /dev/shm; do
  echo "tmpfs $m $(awk -v m=$m '$2 == m && $3 == "tmpfs" {print $4}' /proc/mounts)"
done
echo "memtotal=$(awk '/^MemTotal/ {print $2}' /proc/meminfo)"
echo "nproc=$(python3 -c 'import resource as r; print(r.getrlimit(r.RLIMIT_NPROC)[0])')"
echo "interfaces=$(awk -F: 'NR > 2 {gsub(/ /, "", $1); print $1}' /proc/net/dev)"
awk '$3 !~ /^(tmpfs|proc|sysfs|devpts)$/ && $4 ~ /^rw/ { print "writable " $2 }' \
  /proc/mounts
echo "kernel=$(dmesg 2>/dev/null | head -1 | cut -c1-40)"
echo "cwd=$(pwd) home=$HOME"
"""


def test_inside_gvisor_the_limits_and_isolation_are_in_force(
    gvisor: GvisorRunner, workspace: Path
) -> None:
    outcome = gvisor.run(
        SandboxSpec(argv=("sh", "-c", INSIDE), workspace=workspace, limits=LIMITS)
    )

    assert outcome.exit_code == 0, outcome.output
    lines = outcome.output.splitlines()
    assert "uid=65534 gid=65534" in lines
    for cap in ("CapEff", "CapPrm", "CapBnd"):
        assert f"{cap}:\t0000000000000000" in lines
    assert "root=read-only" in lines
    for place in ("/tmp", "/home/sandbox", "/dev/shm"):
        (line,) = [x for x in lines if x.startswith(f"tmpfs {place} ")]
        assert f"size={16 * 1024**2}" in line or "size=16m" in line, line
    if gvisor.uses_cgroups:
        assert f"memtotal={256 * 1024}" in lines
    assert "nproc=64" in lines
    assert "interfaces=lo" in lines
    assert [x for x in lines if x.startswith("writable ")] == ["writable /workspace"]
    # The kernel answering is gVisor's, not the host's.
    assert any(x.startswith("kernel=") and "gVisor" in x for x in lines), lines
    assert "cwd=/workspace home=/home/sandbox" in lines


def test_workspace_writes_come_back_owned_by_the_sandbox_uid(
    gvisor: GvisorRunner, workspace: Path
) -> None:
    outcome = gvisor.run(
        SandboxSpec(
            argv=("sh", "-c", "echo out; echo err >&2; echo hi > f; exit 3"),
            workspace=workspace,
        )
    )

    assert outcome.exit_code == 3
    assert sorted(outcome.output.splitlines()) == ["err", "out"]
    assert (workspace / "f").read_text() == "hi\n"
    assert (workspace / "f").stat().st_uid == 65534


def test_the_wall_clock_ends_the_sandbox(gvisor: GvisorRunner, workspace: Path) -> None:
    outcome = gvisor.run(
        SandboxSpec(
            argv=("sh", "-c", "echo started; sleep 60"),
            workspace=workspace,
            limits=Limits(2),
        )
    )

    assert outcome.timed_out and outcome.limit_fired == "wall_time"
    assert "started" in outcome.output and outcome.duration_s < 10


def test_a_killed_worker_leaves_no_sandbox_running(
    gvisor: GvisorRunner, workspace: Path, marker: str
) -> None:
    # The worker's temporary files in a folder of its own, so that only its
    # sandbox is looked for and its scratch removed (another test worker may
    # be running gVisor sandboxes meanwhile); one the sandbox's user may pass
    # through, as it passes through /tmp.
    scratch = Path(tempfile.mkdtemp(prefix="replayhub-test-tmp-"))
    scratch.chmod(0o711)
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import django; django.setup()\n"
            "from pathlib import Path\n"
            "from replayhub.sandbox import Limits, SandboxSpec\n"
            "from replayhub.sandbox.gvisor import GvisorRunner\n"
            "GvisorRunner().run(SandboxSpec(argv=('sleep', '300'), "
            f"workspace=Path({str(workspace)!r}), limits=Limits(600), "
            f"env={{'MARKER': {marker!r}}}))",
        ],
        cwd=ROOT,
        env=child_env(TMPDIR=str(scratch)),
    )
    try:
        # A bound for a machine's speed, not the product's: the child's
        # Django and runsc's start beside the whole suite on 2 cores took
        # over 30 s once. The wait ends as soon as the sandbox runs.
        deadline = time.monotonic() + 120
        while not _sandboxes(scratch) and time.monotonic() < deadline:
            if worker.poll() is not None:
                break
            time.sleep(0.2)
        assert _sandboxes(scratch), f"the sandbox never started ({worker.poll()=})"
    finally:
        worker.kill()
        worker.wait()

    deadline = time.monotonic() + 10
    while _sandboxes(scratch) and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        assert _sandboxes(scratch) == []
    finally:
        # What a killed worker cannot remove: its run's small scratch folder.
        shutil.rmtree(scratch, ignore_errors=True)


def _sandboxes(scratch: Path) -> list[int]:
    """runsc processes of bundles under ``scratch`` (their paths name them)."""
    return [
        pid
        for pid in processes_mentioning(f"{scratch}/replayhub-gvisor-")
        if "runsc" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    ]
