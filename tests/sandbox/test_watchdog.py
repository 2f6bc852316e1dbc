"""The watchdog: caps measured from outside a running sandbox."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from replayhub.sandbox import Limits, SandboxSpec
from replayhub.sandbox.bwrap import BwrapRunner
from replayhub.sandbox.watchdog import LAUNCH_PROCESSES, Watchdog, disk_usage

MiB = 1024**2


def test_without_cgroups_the_watchdog_sums_the_memory_of_every_process(workspace):
    runner = BwrapRunner(limit_backend="rlimit")
    # Four processes of 96 MiB each: every one under the 256 MiB RLIMIT_AS,
    # together over the 256 MiB cap.
    hog = "x = bytearray(96 * 1024 * 1024); import time; time.sleep(30)"
    outcome = runner.run(
        SandboxSpec(
            argv=(
                "sh",
                "-c",
                f"for i in 1 2 3 4; do python3 -c '{hog}' & done; wait",
            ),
            workspace=workspace,
            limits=Limits(wall_seconds=30, memory_bytes=256 * MiB),
        )
    )

    assert outcome.limit_backend == "rlimit"
    assert outcome.limit_fired == "memory"
    assert "over the cap of 256 MiB" in outcome.limit_detail
    assert outcome.duration_s < 20


def test_the_watchdog_counts_every_process_a_run_started():
    leader = subprocess.Popen(
        ["sh", "-c", "for i in 1 2 3 4 5 6; do sleep 30 & done; wait"],
        start_new_session=True,
    )
    try:
        time.sleep(0.5)
        lenient = Watchdog(
            limits=Limits(max_processes=7 - LAUNCH_PROCESSES + 1),
            disk_paths=[],
            caps_by_cgroup=False,
        )
        strict = Watchdog(
            limits=Limits(max_processes=3), disk_paths=[], caps_by_cgroup=False
        )
        with_cgroup = Watchdog(
            limits=Limits(max_processes=3), disk_paths=[], caps_by_cgroup=True
        )

        assert lenient.poll(leader.pid) == ""
        assert strict.poll(leader.pid) == "processes"
        assert with_cgroup.poll(leader.pid) == ""
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()


def test_disk_usage_counts_sparse_files_at_their_size_and_stops_early(tmp_path):
    (tmp_path / "d").mkdir()
    with (tmp_path / "d" / "sparse").open("wb") as handle:
        handle.truncate(10 * MiB)
    (tmp_path / "small").write_bytes(b"x")

    used, files = disk_usage([tmp_path])

    assert used >= 10 * MiB and files == 2
    assert disk_usage([tmp_path], stop_files=0)[1] <= 2
