"""The gVisor runner: each run in a ``runsc`` sandbox, a user-space kernel.

The command's system calls are served by gVisor's Sentry, not the host
kernel; the host sees the Sentry and its file proxy (the gofer), both
confined by runsc's own seccomp filters. That is the strongest isolation of
the three runners, at the cost of a slower start and slower system calls.

Each run gets an OCI bundle written here: a root made of a fresh skeleton
(the host's ``/usr`` bound read-only with ``/bin``, ``/lib``... mirrored as in
the bubblewrap runner, or an unpacked root image's), the same synthetic and
host ``/etc`` files as bubblewrap, size-capped tmpfs at ``/tmp``, HOME and
``/dev/shm``, the workspace bound writable at ``/workspace`` and the spec's
binds. The process runs as uid/gid 65534 with no capabilities and
``no_new_privs``; ``runsc --network=none`` gives the sandbox a loopback and
nothing else, and ``--host-uds=open`` lets it connect to the host unix
sockets its mounts show (the relay directory's), which are then the only
way out.

Limits. Memory: the OCI memory limit, which runsc applies to a cgroup of its
own (cgroups must be writable, as for bubblewrap's raw cgroup backend) and
which the Sentry also reports as the sandbox's MemTotal. Processes:
RLIMIT_NPROC *inside* gVisor, which counts the sandbox's own tasks only (its
kernel is its own, so concurrent runs do not share the count); a host pids
cgroup would count the Sentry's threads instead and kill the whole sandbox.
Without writable cgroups, runsc runs with ``--ignore-cgroups`` and memory is
capped per process by RLIMIT_AS. Wall clock: ``runsc kill --all`` then the
process group. Files left by the run are owned by the sandbox uid on the host.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from replayhub.lib.fstree import chown_tree
from replayhub.sandbox.base import (
    TMP,
    SandboxOutcome,
    SandboxSpec,
    SandboxUnavailable,
    passwd,
    zone_link,
)
from replayhub.sandbox.bwrap import LAUNCH_PATH
from replayhub.sandbox.bwrapargs import LOCALTIME, SHM, host_etc
from replayhub.sandbox.output import HeadTailBuffer
from replayhub.sandbox.watchdog import disk_watchdog, limit_that_ended

SANDBOX_UID = SANDBOX_GID = 65534
HOSTNAME = "sandbox"
CGROUP_MEMORY = Path("/sys/fs/cgroup/memory")
CGROUP_UNIFIED = Path("/sys/fs/cgroup/cgroup.controllers")
_ROOT_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_ETC = {
    "group": f"root:x:0:\nsandbox:x:{SANDBOX_GID}:\n",
    "hosts": "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n",
    "hostname": f"{HOSTNAME}\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
}
_CONTROL_TIMEOUT = 30
# Self-checks that passed in this process, by runsc path and cgroup mode: a
# replay makes a fresh runner, and each check starts a real sandbox (about
# 0.4 s). A failed check is not remembered, so a fixed host is seen at once.
_PASSED: set[tuple[str, bool]] = set()


class GvisorRunner:
    name = "gvisor"
    isolation = "gvisor"

    def __init__(
        self,
        *,
        runsc_path: str = "runsc",
        root: Path | None = None,
        cgroups: str = "auto",
    ) -> None:
        self.runsc_path = runsc_path
        # An unpacked image's root filesystem instead of the host's /usr...
        self.root = Path(root) if root is not None else None
        if cgroups not in {"auto", "yes", "no"}:
            raise ValueError("cgroups is auto, yes or no")
        self._cgroups = cgroups
        self._checked = False

    @property
    def uses_cgroups(self) -> bool:
        if self._cgroups != "auto":
            return self._cgroups == "yes"
        writable = CGROUP_MEMORY if CGROUP_MEMORY.is_dir() else CGROUP_UNIFIED.parent
        return os.geteuid() == 0 and os.access(writable, os.W_OK)

    @property
    def limit_backend(self) -> str:
        return "gvisor+cgroup" if self.uses_cgroups else "gvisor+rlimit"

    def owner(self) -> tuple[int, int] | None:
        return (SANDBOX_UID, SANDBOX_GID) if os.geteuid() == 0 else None

    def _runsc(self) -> str:
        found = (
            self.runsc_path
            if "/" in self.runsc_path and os.access(self.runsc_path, os.X_OK)
            else shutil.which(self.runsc_path, path=LAUNCH_PATH)
        )
        if found is None:
            raise SandboxUnavailable(
                f"gVisor is not installed: no executable {self.runsc_path!r} found."
            )
        return found

    def check(self) -> None:
        """A real sandbox running ``true``: runsc may be installed and still
        unable to start one here (no KVM/ptrace platform, an old kernel)."""
        if self._checked:
            return
        if os.geteuid() != 0:
            raise SandboxUnavailable("the gVisor runner needs a root worker (runsc).")
        passed = (self._runsc(), self.uses_cgroups)
        if passed in _PASSED:
            self._checked = True
            return
        with tempfile.TemporaryDirectory(prefix="replayhub-gvisor-") as scratch:
            work = Path(scratch)
            (work / "ws").mkdir()
            probe = SandboxSpec(argv=("true",), workspace=work / "ws")
            try:
                outcome = self._run(probe, work)
            except (OSError, subprocess.SubprocessError) as error:
                raise SandboxUnavailable(
                    f"gVisor is installed but cannot run here ({error})."
                ) from error
        if outcome.exit_code != 0:
            reason = (outcome.output.strip().splitlines() or ["no message"])[-1]
            raise SandboxUnavailable(
                f"gVisor is installed but cannot start a sandbox here ({reason})."
            )
        _PASSED.add(passed)
        self._checked = True

    def run(self, spec: SandboxSpec) -> SandboxOutcome:
        self.check()
        if not spec.workspace.is_dir():
            raise ValueError(f"workspace is not a directory: {spec.workspace}")
        for bind in spec.binds:
            if not bind.source.exists():
                raise ValueError(f"bind source does not exist: {bind.source}")
        for path in (spec.workspace, *(b.source for b in spec.binds if b.writable)):
            chown_tree(path, SANDBOX_UID, SANDBOX_GID)
        with tempfile.TemporaryDirectory(prefix="replayhub-gvisor-") as scratch:
            return self._run(spec, Path(scratch))

    # -- the bundle --------------------------------------------------------

    def bundle_config(self, spec: SandboxSpec, rootfs: Path, run_id: str) -> dict:
        """The OCI config for ``spec`` on the skeleton ``rootfs`` (pure)."""
        limits = spec.limits
        size = limits.tmpfs_bytes
        system = self.root or Path("/")
        mounts: list[dict[str, Any]] = [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            *(
                {
                    "destination": place,
                    "type": "tmpfs",
                    "source": "tmpfs",
                    "options": ["nosuid", "nodev", f"size={size}", "mode=1777"],
                }
                for place in (TMP, spec.home, SHM)
            ),
            _bind(system / "usr", "/usr"),
            *(
                _bind(system / name, f"/{name}")
                for name in _ROOT_LINKS
                if (system / name).is_dir() and not (system / name).is_symlink()
            ),
            *(
                _bind(system / path.lstrip("/"), path)
                for path in host_etc(system)
                if (system / path.lstrip("/")).exists()
                # A zone of the spec's own is a link in the skeleton instead.
                and not (path == LOCALTIME and self._zone(spec))
            ),
            # After HOME: a workspace inside HOME is mounted on its tmpfs.
            _bind(spec.workspace, spec.workspace_at, writable=True),
            *(_bind(b.source, b.dest, writable=b.writable) for b in spec.binds),
        ]
        rlimits = [
            _rlimit("NOFILE", limits.open_files),
            _rlimit("CORE", 0),
        ]
        if limits.max_processes is not None:
            rlimits.append(_rlimit("NPROC", limits.max_processes))
        # No single file may outgrow the disk cap between two measurements.
        sizes = [v for v in (limits.file_size_bytes, limits.disk_bytes) if v]
        if sizes:
            rlimits.append(_rlimit("FSIZE", min(sizes)))
        if limits.cpu_seconds is not None:
            rlimits.append(_rlimit("CPU", limits.cpu_seconds, limits.cpu_seconds + 1))
        resources: dict[str, Any] = {}
        if limits.memory_bytes is not None:
            if self.uses_cgroups:
                resources["memory"] = {
                    "limit": limits.memory_bytes,
                    "swap": limits.memory_bytes,
                }
            else:
                rlimits.append(_rlimit("AS", limits.memory_bytes))
        empty: list[str] = []
        config: dict[str, Any] = {
            "ociVersion": "1.0.2",
            "process": {
                "user": {"uid": SANDBOX_UID, "gid": SANDBOX_GID},
                "args": list(spec.argv),
                "env": [f"{k}={v}" for k, v in spec.full_env().items()],
                "cwd": spec.workspace_at,
                "capabilities": {
                    "bounding": empty,
                    "effective": empty,
                    "inheritable": empty,
                    "permitted": empty,
                    "ambient": empty,
                },
                "rlimits": rlimits,
                "noNewPrivileges": True,
            },
            "root": {"path": str(rootfs), "readonly": True},
            "hostname": HOSTNAME,
            "mounts": mounts,
            "linux": {
                "namespaces": [
                    {"type": kind} for kind in ("pid", "network", "ipc", "uts", "mount")
                ],
                "resources": resources,
            },
        }
        if self.uses_cgroups:
            config["linux"]["cgroupsPath"] = f"/replayhub-gvisor/{run_id}"
        return config

    def _zone(self, spec: SandboxSpec) -> str | None:
        return zone_link(self.root or Path("/"), spec.localtime())

    def _skeleton(self, rootfs: Path, config: dict) -> None:
        """The root's directories: mount points, /etc, the merged-/usr links."""
        system = self.root or Path("/")
        rootfs.mkdir(mode=0o755)
        for name in _ROOT_LINKS:
            if (system / name).is_symlink():
                (rootfs / name).symlink_to(os.readlink(system / name))
        (rootfs / "etc").mkdir(mode=0o755)
        for name, content in _ETC.items():
            (rootfs / "etc" / name).write_text(content)
            (rootfs / "etc" / name).chmod(0o644)
        for mount in config["mounts"]:
            target = rootfs / mount["destination"].lstrip("/")
            if target.exists() or target.is_symlink():
                continue
            source = Path(mount["source"])
            if mount["type"] == "bind" and not source.is_dir():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.touch()
            else:
                target.mkdir(parents=True, exist_ok=True)
        for directory in rootfs.rglob("*"):
            if directory.is_dir() and not directory.is_symlink():
                directory.chmod(0o755)

    # -- running -----------------------------------------------------------

    def _run(self, spec: SandboxSpec, scratch: Path) -> SandboxOutcome:
        runsc = self._runsc()
        scratch.chmod(0o711)
        run_id = f"replayhub-{uuid.uuid4().hex[:16]}"
        bundle = scratch / "bundle"
        bundle.mkdir(mode=0o700)
        rootfs = scratch / "rootfs"
        config = self.bundle_config(spec, rootfs, run_id)
        self._skeleton(rootfs, config)
        users = passwd(SANDBOX_UID, SANDBOX_GID, spec.home, spec.shell())
        (rootfs / "etc" / "passwd").write_text(users)
        (rootfs / "etc" / "passwd").chmod(0o644)
        if zone := self._zone(spec):
            (rootfs / LOCALTIME.lstrip("/")).symlink_to(zone)
        (bundle / "config.json").write_text(json.dumps(config))
        state = scratch / "state"
        state.mkdir(mode=0o700)
        # --host-uds=open: the sandbox may connect to host unix sockets that
        # its mounts show it (the relay directory's gateway and proxy), never
        # create one; gVisor refuses both by default.
        base = [runsc, "--root", str(state), "--network=none", "--host-uds=open"]
        if not self.uses_cgroups:
            base.append("--ignore-cgroups")
        capture = HeadTailBuffer(spec.limits.output_bytes)
        started = time.monotonic()
        # The worker's death kills runsc run, and runsc kills the sandbox it
        # runs attached (a killed worker leaves nothing running).
        setpriv = shutil.which("setpriv", path=LAUNCH_PATH)
        if setpriv is None:
            raise SandboxUnavailable(
                "setpriv is not installed, so the sandbox cannot die with the worker."
            )
        process = subprocess.Popen(
            [
                setpriv,
                "--pdeathsig=KILL",
                "--",
                *base,
                "run",
                "--bundle",
                str(bundle),
                run_id,
            ],
            env={"PATH": LAUNCH_PATH},
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        reader = threading.Thread(target=_read_into, args=(process.stdout, capture))
        reader.start()
        timed_out = stopped = False
        deadline = started + spec.limits.wall_seconds
        watchdog = disk_watchdog(spec)
        try:
            while process.poll() is None:
                if time.monotonic() >= deadline:
                    timed_out = True
                elif spec.stop is not None and spec.stop.is_set():
                    stopped = True
                elif not watchdog.poll(0):
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        process.wait(0.05)
                    continue
                _control(base, "kill", "--all", run_id, "KILL")
                try:
                    process.wait(5)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        finally:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            _control(base, "delete", "--force", run_id)
            reader.join(5)
        code = process.returncode
        code = 128 - code if code < 0 else code
        fired, detail = limit_that_ended(
            watchdog,
            code=code,
            timed_out=timed_out,
            stopped=stopped,
            memory_capped=spec.limits.memory_bytes is not None,
        )
        return SandboxOutcome(
            exit_code=None if timed_out or stopped else code,
            output=capture.text(),
            output_truncated=capture.truncated,
            timed_out=timed_out,
            limit_fired=fired,
            duration_s=time.monotonic() - started,
            limit_backend=self.limit_backend,
            limit_detail=detail,
            runner=self.name,
            isolation=self.isolation,
        )


def _bind(source: Path, dest: str, *, writable: bool = False) -> dict[str, Any]:
    return {
        "destination": dest,
        "type": "bind",
        "source": str(source),
        "options": ["rbind", "rw" if writable else "ro", "nosuid", "nodev"],
    }


def _rlimit(name: str, soft: int, hard: int | None = None) -> dict[str, Any]:
    return {
        "type": f"RLIMIT_{name}",
        "soft": soft,
        "hard": soft if hard is None else hard,
    }


def _control(base: list[str], *args: str) -> None:
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        subprocess.run(
            [*base, *args],
            env={"PATH": LAUNCH_PATH},
            cwd="/",
            capture_output=True,
            timeout=_CONTROL_TIMEOUT,
            check=False,
        )


def _read_into(stream, capture: HeadTailBuffer) -> None:
    for chunk in iter(lambda: stream.read1(65536), b""):
        capture.feed(chunk)
    stream.close()
