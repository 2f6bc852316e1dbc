"""Caps measured from outside a running sandbox: disk, and without cgroups
memory and processes.

Disk. What a run may write is its workspace and its writable binds, which
live on the host's disk. A size-capped filesystem would enforce a cap in the
kernel, but none fits here: a tmpfs made inside the sandbox dies with it
before the workspace is captured, a tmpfs mounted by the host costs memory
as large as the cap, and loop devices and project quotas are rarely there in
a container. So the watchdog measures those directories (their bytes, a
sparse file at its full size, and their files) every ``DISK_INTERVAL``
seconds, or four times as long as the last measurement took, and stops the
run over the cap. A single file cannot outgrow the cap between two
measurements: the runner lowers RLIMIT_FSIZE to it.

Memory and processes. Without a cgroup only rlimits apply, and they are per
process: four processes of 1.2 GiB each pass a 2 GiB RLIMIT_AS. The watchdog
sums the resident memory of every process the run started and counts them,
and stops the run over either cap.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable
from pathlib import Path

from replayhub.sandbox.base import Limits, SandboxSpec

DISK_INTERVAL = 0.25
PROCESS_INTERVAL = 0.25
# The launch chain's own processes (the reaper and bwrap's two) are not the
# command's.
LAUNCH_PROCESSES = 3
_PAGE = os.sysconf("SC_PAGE_SIZE")


def disk_usage(
    paths: Iterable[Path],
    *,
    stop_bytes: int | None = None,
    stop_files: int | None = None,
) -> tuple[int, int]:
    """Bytes under ``paths`` (allocated, or a file's size when larger), and
    the files (anything but a directory) there.

    Iterative, never through a link. Stops early once either ``stop_`` value
    is passed: the caller only needs to know the cap was.
    """
    used = files = 0
    pending = [os.fspath(path) for path in paths]
    while pending:
        try:
            scanner = os.scandir(pending.pop())
        except OSError:
            continue
        with scanner:
            for entry in scanner:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    used += info.st_blocks * 512
                    pending.append(entry.path)
                else:
                    # A sparse file takes little room here, and all of its size
                    # in any copy made of it.
                    used += max(info.st_blocks * 512, info.st_size)
                    files += 1
        if (stop_bytes is not None and used > stop_bytes) or (
            stop_files is not None and files > stop_files
        ):
            break
    return used, files


def descendants(leader: int) -> list[int]:
    """``leader``'s processes and all of theirs (an orphan in a pid namespace is
    reparented to its init, which is one of them)."""
    found: list[int] = []
    pending = [leader]
    while pending:
        pid = pending.pop()
        found.append(pid)
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = Path(f"/proc/{pid}/task/{task}/children").read_text()
            except OSError:
                continue
            pending.extend(int(child) for child in children.split())
    return found


def resident_bytes(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


class Watchdog:
    """Polled while a run is alive; ``fired`` names the cap it stopped."""

    def __init__(
        self, *, limits: Limits, disk_paths: Iterable[Path], caps_by_cgroup: bool
    ) -> None:
        self.disk_paths = list(disk_paths)
        self.disk_bytes = limits.disk_bytes
        self.disk_files = limits.disk_files
        self.memory_bytes = None if caps_by_cgroup else limits.memory_bytes
        self.max_processes = None if caps_by_cgroup else limits.max_processes
        self.fired = ""
        self.detail = ""
        self.disk_peak = 0
        self._disk_due = 0.0
        self._processes_due = 0.0

    @property
    def watches_disk(self) -> bool:
        return self.disk_bytes is not None or self.disk_files is not None

    def poll(self, leader: int) -> str:
        now = time.monotonic()
        if not self.fired and self.watches_disk and now >= self._disk_due:
            self.check_disk()
            spent = time.monotonic() - now
            self._disk_due = now + max(DISK_INTERVAL, 4 * spent)
        if (
            not self.fired
            and (self.memory_bytes is not None or self.max_processes is not None)
            and now >= self._processes_due
        ):
            self._check_processes(leader)
            self._processes_due = now + PROCESS_INTERVAL
        return self.fired

    def check_disk(self) -> str:
        """Measure now; "disk" when over the cap."""
        used, files = disk_usage(
            self.disk_paths, stop_bytes=self.disk_bytes, stop_files=self.disk_files
        )
        self.disk_peak = max(self.disk_peak, used)
        if self.disk_bytes is not None and used > self.disk_bytes:
            self.fired = "disk"
            self.detail = f"more than {_mib(self.disk_bytes)} written"
        elif self.disk_files is not None and files > self.disk_files:
            self.fired = "disk"
            self.detail = f"more than {self.disk_files:,} files"
        return self.fired

    def _check_processes(self, leader: int) -> None:
        pids = descendants(leader)
        count = len(pids) - LAUNCH_PROCESSES
        if self.max_processes is not None and count > self.max_processes:
            self.fired = "processes"
            self.detail = f"{count} processes, over the cap of {self.max_processes}"
            return
        if self.memory_bytes is not None:
            total = sum(resident_bytes(pid) for pid in pids)
            if total > self.memory_bytes:
                self.fired = "memory"
                self.detail = (
                    f"{_mib(total)} resident in all its processes, over the cap of "
                    f"{_mib(self.memory_bytes)}"
                )


def _mib(value: int) -> str:
    return f"{value / 1024**2:,.0f} MiB"


def disk_watchdog(spec: SandboxSpec) -> Watchdog:
    """A watchdog over the workspace and writable binds only, for runners
    whose memory and processes a kernel caps (the OCI runners)."""
    return Watchdog(
        limits=spec.limits,
        disk_paths=[spec.workspace, *(b.source for b in spec.binds if b.writable)],
        caps_by_cgroup=True,
    )


# A command ended by SIGKILL, as the engines report it (128 + the signal).
SIGKILLED = 128 + 9


def limit_that_ended(
    watchdog: Watchdog,
    *,
    code: int,
    timed_out: bool,
    stopped: bool,
    memory_capped: bool,
    oom_reported: bool = False,
    who: str = "the sandbox's",
) -> tuple[str, str]:
    """Which limit ended a contained command, and the detail to show: the
    watchdog's (measured once more: what was written since its last look
    counts), the wall clock or a stop, or the memory cap. An engine that does
    not report its OOM kills leaves a SIGKILL the runner did not send, almost
    always the OOM killer; a command that SIGKILLs itself reads the same, and
    the detail says the cap is presumed."""
    if not watchdog.fired and watchdog.watches_disk:
        watchdog.check_disk()
    if watchdog.fired:
        return watchdog.fired, watchdog.detail
    if timed_out or stopped:
        return ("wall_time" if timed_out else "stopped"), ""
    if oom_reported:
        return "memory", ""
    if code == SIGKILLED and memory_capped:
        return "memory", f"killed by SIGKILL, {who} memory cap (OOM) presumed"
    return "", ""
