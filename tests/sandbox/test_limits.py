"""Resource limits end runs that misbehave, and nothing outlives a run."""

from __future__ import annotations

import os
import shutil
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from replayhub.sandbox import SandboxOutcome
from replayhub.sandbox.bwrap import BwrapRunner
from tests.conftest import processes_mentioning
from tests.sandbox.conftest import RunInSandbox, orphaned_zombies

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None
    and os.environ.get("REPLAYHUB_REQUIRE_SANDBOX") != "1",
    reason="bubblewrap is not installed (REPLAYHUB_REQUIRE_SANDBOX=1 fails instead)",
)

IS_ROOT = os.geteuid() == 0
MiB = 1024**2


def python(source: str, *args: str) -> tuple[str, ...]:
    return ("python3", "-c", textwrap.dedent(source), *args)


@pytest.fixture
def has_cgroup(runner: BwrapRunner) -> bool:
    return runner.limit_backend != "rlimit"


def test_a_fork_bomb_hits_the_process_cap_and_nothing_survives(
    run_in_sandbox: RunInSandbox,
    marker: str,
    survivors: Callable[[str], list[int]],
    has_cgroup: bool,
) -> None:
    outcome = run_in_sandbox(
        *python(
            """
            import os, time
            children = 0
            try:
                while True:
                    if os.fork() == 0:
                        time.sleep(60)
                        os._exit(0)
                    children += 1
            except OSError as error:
                print("fork refused after", children, "children:", error)
            """,
            marker,
        ),
        max_processes=32,
    )
    assert not outcome.timed_out
    assert "fork refused after" in outcome.output
    assert "Resource temporarily unavailable" in outcome.output
    children = int(outcome.output.split("after ")[1].split()[0])
    assert children < 32
    if has_cgroup:
        assert outcome.limit_fired == "processes"
    assert survivors(marker) == []


def test_a_shell_fork_bomb_ends_and_leaves_nothing_behind(
    run_in_sandbox: RunInSandbox,
    marker: str,
    survivors: Callable[[str], list[int]],
    has_cgroup: bool,
) -> None:
    # $0 is the marker, so every forked shell carries it in its command line.
    outcome = run_in_sandbox(
        "sh",
        "-c",
        "f() { f | f & }; f; sleep 60",
        marker,
        max_processes=64,
        wall_seconds=3,
    )
    assert outcome.duration_s < 10
    if has_cgroup:
        assert outcome.limit_fired == "processes"
    assert survivors(marker) == []


def test_a_memory_hog_is_killed_by_the_memory_limit(
    run_in_sandbox: RunInSandbox, has_cgroup: bool
) -> None:
    outcome = run_in_sandbox(
        *python("""
            hog = b"x" * (1024 ** 3)
            print("allocated", len(hog))
        """),
        memory_bytes=200 * MiB,
    )
    assert "allocated" not in outcome.output
    assert not outcome.timed_out
    assert outcome.exit_code != 0
    if has_cgroup:
        assert outcome.limit_fired == "memory"
        assert outcome.exit_code == 128 + 9


def test_sleeping_past_the_wall_clock_is_killed_with_setsid_grandchildren(
    run_in_sandbox: RunInSandbox,
    workspace: Path,
    marker: str,
    survivors: Callable[[str], list[int]],
) -> None:
    zombies_before = orphaned_zombies()
    outcome = run_in_sandbox(
        *python(
            """
            import os, time
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    with open("/workspace/grandchild.pid", "w") as handle:
                        handle.write(str(os.getpid()))
                    time.sleep(60)
                os._exit(0)
            time.sleep(60)
            """,
            marker,
        ),
        wall_seconds=1,
    )
    assert outcome.timed_out
    assert outcome.limit_fired == "wall_time"
    assert outcome.exit_code is None
    assert outcome.duration_s < 10
    # The double-forked, setsid'd grandchild was running before the kill...
    assert (workspace / "grandchild.pid").exists()
    # ...and neither it nor anything else of the run is alive now.
    assert survivors(marker) == []
    if IS_ROOT:
        assert orphaned_zombies() - zombies_before == set()


def test_output_written_before_a_timeout_is_kept(run_in_sandbox: RunInSandbox) -> None:
    outcome = run_in_sandbox("sh", "-c", "echo started; sleep 60", wall_seconds=1)
    assert outcome.timed_out
    assert outcome.output == "started\n"


def test_a_busy_loop_is_stopped_by_the_cpu_time_limit(
    run_in_sandbox: RunInSandbox,
) -> None:
    outcome = run_in_sandbox(*python("while True: pass"), cpu_seconds=1)
    assert not outcome.timed_out
    assert outcome.limit_fired == "cpu_time"
    assert outcome.exit_code == 128 + 24  # SIGXCPU


def test_a_large_write_is_stopped_by_the_file_size_limit(
    run_in_sandbox: RunInSandbox, workspace: Path
) -> None:
    outcome = run_in_sandbox(
        "sh", "-c", "head -c 5000000 /dev/zero > /workspace/big", file_size_bytes=MiB
    )
    assert outcome.limit_fired == "file_size"
    assert outcome.exit_code == 128 + 25  # SIGXFSZ
    assert (workspace / "big").stat().st_size <= MiB


def test_per_process_rlimits_are_in_force_inside(run_in_sandbox: RunInSandbox) -> None:
    outcome = run_in_sandbox(
        "cat", "/proc/self/limits", open_files=100, file_size_bytes=5 * MiB
    )
    limits = {
        line[:26].strip(): line[26:].split()[:2]
        for line in outcome.output.splitlines()[1:]
    }
    assert limits["Max open files"] == ["100", "100"]
    assert limits["Max core file size"] == ["0", "0"]
    assert limits["Max file size"] == [str(5 * MiB), str(5 * MiB)]


def _peak_rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/self/status")


def test_a_hundred_megabytes_of_output_is_capped_and_worker_memory_stays_flat(
    run_in_sandbox: RunInSandbox,
) -> None:
    output_bytes = MiB
    # Writing 5 resets the peak RSS (VmHWM) to the current RSS, so the peak
    # read afterwards belongs to this run alone.
    Path("/proc/self/clear_refs").write_text("5")
    before = _peak_rss_bytes()
    outcome = run_in_sandbox(
        "sh",
        "-c",
        "echo FIRST-LINE; head -c 100000000 /dev/zero | tr '\\0' x; echo LAST-LINE",
        output_bytes=output_bytes,
    )
    growth = _peak_rss_bytes() - before
    assert outcome.exit_code == 0
    assert outcome.output_truncated
    assert len(outcome.output) <= output_bytes + 100
    assert outcome.output.startswith("FIRST-LINE\nxxx")
    assert outcome.output.endswith("xxxLAST-LINE\n")
    assert "bytes of output omitted" in outcome.output
    assert growth < 50 * MiB, f"worker peak RSS grew by {growth / MiB:.0f} MiB"


def _cgroup_dirs_of(pid: int, runner: BwrapRunner) -> list[Path]:
    root = runner.cgroup_root
    dirs = []
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if runner.cgroup_parent not in path:
            continue
        base = root if controllers == "" else root / controllers
        dirs.append(base / path.lstrip("/"))
    return dirs


def test_the_cgroup_of_a_run_is_removed_afterwards(
    runner: BwrapRunner,
    run_in_sandbox: RunInSandbox,
    marker: str,
    has_cgroup: bool,
) -> None:
    if not has_cgroup:
        pytest.skip("no cgroup backend on this host")
    outcomes: list[SandboxOutcome] = []
    thread = threading.Thread(
        target=lambda: outcomes.append(
            run_in_sandbox(*python("import time; time.sleep(2)", marker))
        )
    )
    thread.start()
    try:
        deadline = time.monotonic() + 10
        dirs: list[Path] = []
        while not dirs and time.monotonic() < deadline:
            for pid in processes_mentioning(marker):
                try:
                    dirs = _cgroup_dirs_of(pid, runner)
                except OSError:
                    continue
                if dirs:
                    break
            time.sleep(0.02)
        assert dirs, "the running sandbox was not found in a replayhub cgroup"
        assert all(directory.is_dir() for directory in dirs)
    finally:
        thread.join()
    assert outcomes[0].exit_code == 0
    assert outcomes[0].limit_backend == runner.limit_backend
    assert [directory for directory in dirs if directory.exists()] == []
