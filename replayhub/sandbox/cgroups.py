"""Memory and process caps for one sandbox run, from whatever the host offers.

Backends, tried in this order by `detect_backend`:

* `systemd-scope` — `systemd-run --scope` with MemoryMax/TasksMax, only on a
  systemd-booted cgroup v2 host where a probe scope actually starts;
* `cgroup-v2` / `cgroup-v1` — a raw cgroup directory `<parent>/<run id>` under
  /sys/fs/cgroup (v2) or /sys/fs/cgroup/{memory,pids} (v1), needs root;
* `rlimit` — nothing here; the runner falls back to per-process rlimits.

Each run gets a `Confinement`: an argv prefix that puts the launched process into
the group before it execs anything else, counters telling which cap fired, and
teardown that kills every remaining task and removes the group.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

from replayhub.sandbox.base import Limits

logger = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")

# Write the shell's own pid into one or two cgroup.procs files, then exec the rest
# of argv. The scripts are constants: the paths and the command arrive as
# positional arguments, so nothing is ever interpolated into shell source. The
# arity is fixed (no scanning for a sentinel) so a path can never be confused
# with the command that follows. This runs as root, before the privilege drop:
# moving a task between cgroups needs write access to both. If a join fails the
# shell exits 125 before anything of the sandbox has started.
_JOIN_SCRIPTS = {
    1: 'echo $$ > "$1" || exit 125; shift; exec "$@"',
    2: 'echo $$ > "$1" || exit 125; echo $$ > "$2" || exit 125; shift 2; exec "$@"',
}

_KILL_ATTEMPTS = 200


class Confinement:
    """Per-run limit backend; the base class confines nothing (rlimits only)."""

    backend = "rlimit"
    #: True when a pids controller caps the process count for this run, which
    #: makes RLIMIT_NPROC (shared by every process of the host uid) unnecessary.
    caps_processes = False

    def prefix(self, sh: str) -> list[str]:
        return []

    def poll(self) -> None:
        """Sample counters while the run is alive (for groups removed on exit)."""

    def fired(self) -> str:
        """Return "memory", "processes" or "": the cap this group enforced."""
        return ""

    def kill_all(self) -> None:
        """SIGKILL every task still in the group."""

    def remove(self) -> None:
        """Remove the group. Call after `kill_all`."""


def join_prefix(sh: str, root: Path, procs_files: list[Path]) -> list[str]:
    """argv prefix that joins `procs_files` (under `root`), then execs what follows."""
    script = _JOIN_SCRIPTS[len(procs_files)]
    for procs in procs_files:
        # The join runs as root and writes wherever it is told: refuse anything
        # but a cgroup.procs file.
        if procs.name != "cgroup.procs" or not procs.is_relative_to(root):
            raise ValueError(f"not a cgroup.procs file: {procs}")
    return [sh, "-c", script, "replayhub-cgroup-join", *map(str, procs_files)]


def _read_counter(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _kill_pids(procs_files: list[Path]) -> bool:
    """SIGKILL every pid listed; True once all the listed groups are empty."""
    empty = True
    for procs in procs_files:
        try:
            pids = procs.read_text().split()
        except FileNotFoundError:
            continue
        for pid in pids:
            empty = False
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
    return empty


def _rmdir_when_empty(directory: Path, procs_files: list[Path]) -> None:
    for _ in range(_KILL_ATTEMPTS):
        try:
            directory.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            # EBUSY while a killed task is still exiting.
            _kill_pids(procs_files)
            time.sleep(0.01)
    logger.warning("could not remove cgroup %s; tasks are still exiting", directory)


class CgroupV1Confinement(Confinement):
    backend = "cgroup-v1"
    caps_processes = True

    def __init__(self, root: Path, parent: str, name: str, limits: Limits) -> None:
        self.root = root
        self.dirs = {
            "memory": root / "memory" / parent / name,
            "pids": root / "pids" / parent / name,
        }
        created: list[Path] = []
        try:
            for directory in self.dirs.values():
                directory.mkdir(parents=True)
                created.append(directory)
            memory = self.dirs["memory"]
            if limits.memory_bytes is not None:
                (memory / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
                # Without memsw the capped group could swap instead of being
                # killed; the file exists only when swap accounting is on.
                memsw = memory / "memory.memsw.limit_in_bytes"
                if memsw.exists():
                    memsw.write_text(str(limits.memory_bytes))
            if limits.max_processes is not None:
                (self.dirs["pids"] / "pids.max").write_text(str(limits.max_processes))
        except OSError:
            for directory in reversed(created):
                with contextlib.suppress(OSError):
                    directory.rmdir()
            raise

    def _procs(self) -> list[Path]:
        return [directory / "cgroup.procs" for directory in self.dirs.values()]

    def prefix(self, sh: str) -> list[str]:
        return join_prefix(sh, self.root, self._procs())

    def fired(self) -> str:
        if _read_counter(self.dirs["memory"] / "memory.oom_control", "oom_kill"):
            return "memory"
        if _read_counter(self.dirs["pids"] / "pids.events", "max"):
            return "processes"
        return ""

    def kill_all(self) -> None:
        for _ in range(_KILL_ATTEMPTS):
            if _kill_pids(self._procs()):
                return
            time.sleep(0.01)

    def remove(self) -> None:
        for directory in self.dirs.values():
            _rmdir_when_empty(directory, [directory / "cgroup.procs"])


class CgroupV2Confinement(Confinement):
    backend = "cgroup-v2"
    caps_processes = True

    def __init__(self, root: Path, parent: str, name: str, limits: Limits) -> None:
        self.root = root
        parent_dir = root / parent
        # Controllers must be enabled on every ancestor's subtree_control for the
        # leaf to get memory.max and pids.max.
        (root / "cgroup.subtree_control").write_text("+memory +pids")
        parent_dir.mkdir(exist_ok=True)
        (parent_dir / "cgroup.subtree_control").write_text("+memory +pids")
        self.dir = parent_dir / name
        self.dir.mkdir()
        try:
            if limits.memory_bytes is not None:
                (self.dir / "memory.max").write_text(str(limits.memory_bytes))
                swap = self.dir / "memory.swap.max"
                if swap.exists():
                    swap.write_text("0")
            if limits.max_processes is not None:
                (self.dir / "pids.max").write_text(str(limits.max_processes))
        except OSError:
            with contextlib.suppress(OSError):
                self.dir.rmdir()
            raise

    def prefix(self, sh: str) -> list[str]:
        return join_prefix(sh, self.root, [self.dir / "cgroup.procs"])

    def fired(self) -> str:
        if _read_counter(self.dir / "memory.events", "oom_kill"):
            return "memory"
        if _read_counter(self.dir / "pids.events", "max"):
            return "processes"
        return ""

    def kill_all(self) -> None:
        # cgroup.kill (Linux 5.14+) kills atomically, so a task forking in a loop
        # cannot outrun the killer; older kernels get the read-and-kill loop.
        with contextlib.suppress(OSError):
            (self.dir / "cgroup.kill").write_text("1")
        for _ in range(_KILL_ATTEMPTS):
            if _kill_pids([self.dir / "cgroup.procs"]):
                return
            time.sleep(0.01)

    def remove(self) -> None:
        _rmdir_when_empty(self.dir, [self.dir / "cgroup.procs"])


class SystemdScopeConfinement(Confinement):
    """A transient scope; systemd removes its cgroup as soon as it is empty."""

    backend = "systemd-scope"
    caps_processes = True

    def __init__(
        self, root: Path, systemd_run: str, systemctl: str, name: str, limits: Limits
    ) -> None:
        self.unit = f"replayhub-{name}.scope"
        self.dir = root / "replayhub.slice" / self.unit
        self.systemd_run = systemd_run
        self.systemctl = systemctl
        self.limits = limits
        self._fired = ""

    def prefix(self, sh: str) -> list[str]:
        argv = [
            self.systemd_run,
            "--scope",
            "--quiet",
            f"--unit={self.unit}",
            "--slice=replayhub.slice",
        ]
        if self.limits.memory_bytes is not None:
            argv += ["-p", f"MemoryMax={self.limits.memory_bytes}"]
            argv += ["-p", "MemorySwapMax=0"]
        if self.limits.max_processes is not None:
            argv += ["-p", f"TasksMax={self.limits.max_processes}"]
        return [*argv, "--"]

    def poll(self) -> None:
        # The scope's cgroup disappears the moment its last task exits, so its
        # counters are sampled during the run rather than read afterwards.
        if self._fired != "memory":
            if _read_counter(self.dir / "memory.events", "oom_kill"):
                self._fired = "memory"
            elif _read_counter(self.dir / "pids.events", "max"):
                self._fired = "processes"

    def _systemctl(self, *args: str) -> str:
        try:
            result = subprocess.run(
                [self.systemctl, *args],
                capture_output=True,
                text=True,
                timeout=15,
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return result.stdout.strip()

    def fired(self) -> str:
        self.poll()
        if not self._fired and (
            self._systemctl("show", "--property=Result", "--value", self.unit)
            == "oom-kill"
        ):
            self._fired = "memory"
        return self._fired

    def kill_all(self) -> None:
        self._systemctl("kill", "--signal=SIGKILL", self.unit)

    def remove(self) -> None:
        # A scope whose task was OOM-killed stays loaded as "failed".
        self._systemctl("reset-failed", self.unit)


class Backend:
    """Creates one `Confinement` per run; `name` is what the runner reports."""

    name = "rlimit"

    def create(self, limits: Limits) -> Confinement:
        return Confinement()


class RawCgroupBackend(Backend):
    def __init__(self, version: int, root: Path, parent: str) -> None:
        if "/" in parent or parent in {"", ".", ".."}:
            raise ValueError(f"cgroup parent must be a plain name: {parent!r}")
        self.version = version
        self.name = f"cgroup-v{version}"
        self.root = root
        self.parent = parent

    def create(self, limits: Limits) -> Confinement:
        # The worker's pid in the name lets `sweep_stale` recognise groups left
        # behind by a worker that was killed mid-run.
        name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        if self.version == 1:
            return CgroupV1Confinement(self.root, self.parent, name, limits)
        return CgroupV2Confinement(self.root, self.parent, name, limits)

    def parent_dirs(self) -> list[Path]:
        if self.version == 1:
            return [
                self.root / "memory" / self.parent,
                self.root / "pids" / self.parent,
            ]
        return [self.root / self.parent]

    def sweep_stale(self) -> None:
        """Remove empty groups whose worker process no longer exists."""
        for parent in self.parent_dirs():
            with contextlib.suppress(OSError):
                for child in parent.iterdir():
                    owner, _, _ = child.name.partition("-")
                    if not child.is_dir() or not owner.isdigit():
                        continue
                    if Path(f"/proc/{owner}").exists():
                        continue
                    with contextlib.suppress(OSError):
                        child.rmdir()


class SystemdScopeBackend(Backend):
    name = "systemd-scope"

    def __init__(self, root: Path, systemd_run: str, systemctl: str) -> None:
        self.root = root
        self.systemd_run = systemd_run
        self.systemctl = systemctl

    def create(self, limits: Limits) -> Confinement:
        return SystemdScopeConfinement(
            self.root, self.systemd_run, self.systemctl, uuid.uuid4().hex[:16], limits
        )


def _probe_raw(backend: RawCgroupBackend) -> bool:
    try:
        confinement = backend.create(Limits(memory_bytes=64 * 1024**2, max_processes=8))
    except OSError as error:
        logger.info("raw cgroup v%s unavailable: %s", backend.version, error)
        return False
    confinement.remove()
    return True


def _probe_systemd(root: Path, systemd_run: str, systemctl: str) -> bool:
    # sd_booted(): systemd-run --scope needs systemd as PID 1, and only the
    # unified hierarchy is handled here (hybrid hosts use the raw v1 backend).
    if not Path("/run/systemd/system").is_dir():
        return False
    if not (root / "cgroup.controllers").exists():
        return False
    probe = [
        systemd_run,
        "--scope",
        "--quiet",
        "--collect",
        "-p",
        "TasksMax=8",
        "-p",
        "MemoryMax=67108864",
        "--",
        "true",
    ]
    try:
        result = subprocess.run(
            probe,
            capture_output=True,
            timeout=15,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


def detect_backend(
    *,
    prefer: str = "auto",
    root: Path = CGROUP_ROOT,
    parent: str = "replayhub",
    systemd_run: str | None = None,
    systemctl: str | None = None,
) -> Backend:
    """Pick the first backend that works here, or exactly `prefer` if given.

    `prefer` is "auto", "systemd-scope", "cgroup" or "rlimit"; a named backend
    that does not work here raises RuntimeError rather than silently weakening
    the limits.
    """
    if prefer not in {"auto", "systemd-scope", "cgroup", "rlimit"}:
        raise ValueError(f"unknown limit backend {prefer!r}")
    if prefer == "rlimit":
        return Backend()
    if prefer in {"auto", "systemd-scope"}:
        if systemd_run and systemctl and _probe_systemd(root, systemd_run, systemctl):
            return SystemdScopeBackend(root, systemd_run, systemctl)
        if prefer == "systemd-scope":
            raise RuntimeError("systemd-run --scope does not work on this host")
    if (root / "cgroup.controllers").exists():
        raw = RawCgroupBackend(2, root, parent)
    elif (root / "memory" / "cgroup.procs").exists() and (
        root / "pids" / "cgroup.procs"
    ).exists():
        raw = RawCgroupBackend(1, root, parent)
    else:
        raw = None
    if raw is not None and _probe_raw(raw):
        raw.sweep_stale()
        return raw
    if prefer == "cgroup":
        raise RuntimeError("no writable memory and pids cgroup on this host")
    return Backend()


# -- The host's cgroup layout, for the OCI engines ---------------------------

UNIFIED, HYBRID, LEGACY, NONE = "unified", "hybrid", "legacy", "none"


def cgroup_mounts(mountinfo: str) -> list[tuple[str, str]]:
    """(mount point, "cgroup" or "cgroup2") for each cgroup filesystem in
    ``/proc/self/mountinfo``'s text."""
    mounts = []
    for line in mountinfo.splitlines():
        # "<id> <parent> <dev> <root> <mount point> <options> [tags] - <fstype> …"
        fields, _, fs = line.partition(" - ")
        parts, fstype = fields.split(), fs.split()[:1]
        if len(parts) > 4 and fstype and fstype[0] in {"cgroup", "cgroup2"}:
            mounts.append((parts[4], fstype[0]))
    return mounts


def cgroup_layout(mounts: list[tuple[str, str]]) -> str:
    """The layout these cgroup mounts make:

    * ``unified`` — cgroup v2 mounted at /sys/fs/cgroup itself;
    * ``hybrid`` — v1 controllers beside a cgroup2 hierarchy mounted elsewhere
      (usually /sys/fs/cgroup/unified);
    * ``legacy`` — v1 controllers only;
    * ``none`` — no cgroup filesystem.
    """
    kinds = {fstype for _, fstype in mounts}
    if (str(CGROUP_ROOT), "cgroup2") in mounts:
        return UNIFIED
    if "cgroup" in kinds:
        return HYBRID if "cgroup2" in kinds else LEGACY
    return NONE


def oci_runtime_for(layout: str, unified_controllers: str) -> str:
    """The OCI runtime an engine on this host must use: ``crun`` or ``runc``.

    crun (podman's default) refuses every container on a hybrid host whose
    cgroup2 hierarchy holds any controller ("cgroups in hybrid mode not
    supported"); runc runs them there through the v1 controllers.
    ``unified_controllers`` is that hierarchy's ``cgroup.controllers``.
    """
    if layout == HYBRID and unified_controllers.split():
        return "runc"
    return "crun"


def host_oci_runtime() -> tuple[str, str]:
    """This host's cgroup layout and the OCI runtime that works on it."""
    try:
        mounts = cgroup_mounts(Path("/proc/self/mountinfo").read_text())
    except OSError:
        mounts = []
    layout = cgroup_layout(mounts)
    controllers = ""
    for point, fstype in mounts:
        if layout == HYBRID and fstype == "cgroup2":
            with contextlib.suppress(OSError):
                controllers += Path(point, "cgroup.controllers").read_text()
    return layout, oci_runtime_for(layout, controllers)


if __name__ == "__main__":
    # `python -m replayhub.sandbox.cgroups`: what ./dev test and CI print.
    print(*host_oci_runtime())
