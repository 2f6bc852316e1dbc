"""The bubblewrap runner: the default sandbox on Linux, no daemon needed.

Isolation. Each run gets new user, pid, network, ipc, uts and cgroup namespaces,
nested user namespaces disabled (most kernel privilege escalations start by
creating one), no capabilities, no_new_privs, a seccomp filter refusing the
system calls in :mod:`replayhub.sandbox.seccomp`, `--die-with-parent` and
`--new-session`. Inside, the command runs as uid/gid 1000 ("sandbox" in a
synthetic /etc/passwd); on the host that is `sandbox_uid` (default 65534) when
the worker is root, else the worker's own uid. As root, the launcher drops to
that uid with `setpriv` before bwrap starts, so no process of the sandbox is
host root and root-only files stay unreadable even through a read-only bind; the
workspace and writable binds are chowned to that uid first, and every bound path
must be reachable by it. The filesystem is a read-only root with /usr (and the
host's /bin, /lib... as symlinks or read-only dirs), a few /etc files, fresh
/proc and /dev, size-capped tmpfs at /tmp, /dev/shm and the empty HOME, and the
workspace bound writable at /workspace (the cwd). Only loopback exists. The
environment is cleared and rebuilt from `SandboxSpec.full_env()`. Every process
of the launch chain starts in / with PATH as its only variable, and bwrap gets
its options (that environment included) through a memfd, so neither the
worker's environment, its working directory nor the spec's values appear in
/proc/1/environ or /proc/1/cmdline of the bwrap monitor the command can see.

Host paths. Two things inside still name where the sandbox lives on the host,
and unprivileged bubblewrap cannot take them away. /proc/self/mountinfo gives
each bind mount's root: the bound directory's path inside its filesystem (the
kernel prints the path from the filesystem's root, so a bind of a bind, or one
made from a descriptor, shows the same), which for /workspace and the caller's
binds is their host path; only a work dir that is itself the root of a
filesystem (a tmpfs or a disk of its own, not a bind mount) shortens it to the
path below. And bwrap's monitor, pid 1 inside, runs as the command's uid, so
its memory (its options, the host mount table it parsed) is readable through
/proc/1/mem: the seccomp filter refuses ptrace, but that file is opened, not
traced. The monitor runs under the same filter and without capabilities, so
writing there gains nothing.

Launch chain. No Python runs between fork and exec (no preexec_fn, which is
unsafe when the caller has other threads: a lock held elsewhere at fork time
stays held forever in the child; Celery prefork children are single-threaded,
but a threaded caller must not be able to deadlock the launcher). One pid execs
through: [sh joining the cgroup] -> env -i -> prlimit -> (as root: setpriv
--pdeathsig -> unshare --pid --fork -> setpriv dropping to the sandbox uid) ->
bwrap -- argv. The extra pid namespace makes bwrap its init: bwrap's outer
process exits before its child is reaped, and a host init that does not reap (a
container whose pid 1 is the worker) would otherwise collect a zombie per run.

Limits. Wall clock: after `wall_seconds` the sandbox's init (bwrap's inner
process) gets SIGKILL, which takes down every process of its pid namespace,
setsid or not; the launcher chain then exits by itself, and the process group
is killed as a fallback. Memory and process count come from a cgroup, whichever
the host offers, in this order: a systemd scope (only on a systemd-booted cgroup
v2 host where a probe scope works), a raw cgroup directory <parent>/<run id>
(v2, or v1 under /sys/fs/cgroup/{memory,pids}; needs root), or none. After the
run every task left in the cgroup is killed and the directory removed.
`prlimit` always sets RLIMIT_FSIZE, RLIMIT_CPU, RLIMIT_NOFILE and RLIMIT_CORE=0.
RLIMIT_NPROC and RLIMIT_AS stand in only without a cgroup: RLIMIT_NPROC counts
every process of the host uid (concurrent runs would starve each other) and
root ignores it; RLIMIT_AS caps address space per process, which tools that
reserve large virtual ranges dislike. `limit_fired` reports an OOM kill or a
refused fork from the cgroup counters, and SIGXCPU/SIGXFSZ from the command's
exit status (best effort: a program ignoring SIGXFSZ gets EFBIG instead).

This module checks the host, builds the launch chain, starts it and reads the
outcome; bwrap's own options are built in :mod:`replayhub.sandbox.bwrapargs`,
and the running process is watched and ended by
:mod:`replayhub.sandbox.supervise`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

from replayhub.lib.fstree import chown_tree
from replayhub.sandbox.base import SandboxOutcome, SandboxSpec, SandboxUnavailable
from replayhub.sandbox.bwrapargs import bwrap_args, memfd, nul_join, probe_args
from replayhub.sandbox.cgroups import CGROUP_ROOT, Backend, Confinement, detect_backend
from replayhub.sandbox.output import HeadTailBuffer
from replayhub.sandbox.supervise import drain, kill_run, pump, shell_exit_status
from replayhub.sandbox.watchdog import Watchdog

logger = logging.getLogger(__name__)

# The only variable the launcher chain (and so bwrap's monitor process, visible
# inside as pid 1) ever sees.
LAUNCH_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"

_SIGXCPU_EXIT = 128 + signal.SIGXCPU
_SIGXFSZ_EXIT = 128 + signal.SIGXFSZ
_NOT_EXECUTABLE = 127


class BwrapRunner:
    """Run a `SandboxSpec` under bubblewrap; see the module docstring."""

    name = "bwrap"
    isolation = "bwrap"

    def __init__(
        self,
        *,
        bwrap_path: str = "bwrap",
        sandbox_uid: int = 65534,
        sandbox_gid: int = 65534,
        limit_backend: str = "auto",
        cgroup_root: Path = CGROUP_ROOT,
        cgroup_parent: str = "replayhub",
        root: Path | None = None,
    ) -> None:
        if sandbox_uid == 0 or sandbox_gid == 0:
            raise ValueError("the sandbox must not run as host uid or gid 0")
        # An unpacked image's root filesystem to run on instead of the host's
        # /usr, /bin, /lib... and /etc files; None: the host's.
        self.root = Path(root) if root is not None else None
        self.bwrap_path = bwrap_path
        self.sandbox_uid = sandbox_uid
        self.sandbox_gid = sandbox_gid
        self.cgroup_root = Path(cgroup_root)
        self.cgroup_parent = cgroup_parent
        self._prefer_backend = limit_backend
        self._backend: Backend | None = None
        self._checked = False

    # -- availability ------------------------------------------------------

    def _which(self, name: str) -> str | None:
        # Resolved against the fixed launch PATH, never the worker's, so a
        # writable directory early in the worker's PATH cannot swap in its own
        # "bwrap" or "setpriv".
        if "/" in name:
            path = Path(name)
            if path.is_file() and os.access(path, os.X_OK):
                return str(path)
            return None
        return shutil.which(name, path=LAUNCH_PATH)

    def _tool(self, name: str, purpose: str) -> str:
        path = self._which(name)
        if path is None:
            raise SandboxUnavailable(f"{name} is not installed, {purpose}.")
        return path

    def _bwrap(self) -> str:
        path = self._which(self.bwrap_path)
        if path is None:
            raise SandboxUnavailable(
                f"bubblewrap is not installed: no executable {self.bwrap_path!r} found."
            )
        return path

    @property
    def _is_root(self) -> bool:
        return os.geteuid() == 0

    def _identity(self) -> tuple[int, int]:
        if self._is_root:
            return self.sandbox_uid, self.sandbox_gid
        return os.geteuid(), os.getegid()

    def owner(self) -> tuple[int, int] | None:
        """The host uid and gid that own what a run left in its workspace, when
        not the worker's own (the worker is root)."""
        return self._identity() if self._is_root else None

    def _drop_prefix(self) -> list[str]:
        if not self._is_root:
            return []
        setpriv = self._tool("setpriv", "so the sandbox cannot drop root privileges")
        uid, gid = self._identity()
        return [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]

    def _reaper_prefix(self) -> list[str]:
        """As root, run bwrap as pid 1 of an extra pid namespace.

        bwrap's outer process exits as soon as it learns the exit status, so its
        child is briefly orphaned; if the host's init does not reap (a container
        whose pid 1 is the worker itself), every run would leave a zombie behind.
        As pid 1, bwrap's exit makes the kernel kill and reap everything below it,
        and `unshare` reaps bwrap. `--pdeathsig` and `--kill-child` keep the
        chain dying with the worker, as bwrap's own --die-with-parent would.
        """
        if not self._is_root:
            return []
        why = "so the sandbox cannot be launched"
        return [
            self._tool("setpriv", why),
            "--pdeathsig=KILL",
            "--",
            self._tool("unshare", why),
            "--pid",
            "--fork",
            "--kill-child",
            "--",
        ]

    def check(self) -> None:
        """Raise SandboxUnavailable unless bubblewrap can build a sandbox here."""
        if self._checked:
            return
        bwrap = self._bwrap()
        self._tool("prlimit", "so the sandbox cannot set resource limits")
        launcher = [*self._reaper_prefix(), *self._drop_prefix()]
        try:
            help_text = subprocess.run(
                [bwrap, "--help"],
                capture_output=True,
                text=True,
                timeout=30,
                env={"PATH": LAUNCH_PATH},
                cwd="/",
                check=False,
            ).stdout
        except (OSError, subprocess.TimeoutExpired) as error:
            raise SandboxUnavailable(
                f"bubblewrap at {bwrap} cannot be executed ({error})."
            ) from error
        if "--disable-userns" not in help_text or "--size" not in help_text:
            raise SandboxUnavailable(
                f"bubblewrap at {bwrap} is too old: 0.8.0 or newer is needed for "
                "--disable-userns and --size."
            )
        fds: list[int] = []
        try:
            probe = [*launcher, bwrap, *probe_args(fds)]
            result = subprocess.run(
                probe,
                capture_output=True,
                text=True,
                timeout=30,
                env={"PATH": LAUNCH_PATH},
                cwd="/",
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=fds,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise SandboxUnavailable(
                f"bubblewrap is installed but cannot create a sandbox here ({error})."
            ) from error
        finally:
            for fd in fds:
                os.close(fd)
        if result.returncode != 0:
            reason = (result.stderr.strip().splitlines() or ["no error message"])[0]
            raise SandboxUnavailable(
                f"bubblewrap is installed but cannot create a sandbox here ({reason})."
            )
        self._checked = True

    @property
    def limit_backend(self) -> str:
        """Which backend caps memory and processes here (detected once)."""
        return self._limit_backend().name

    def _limit_backend(self) -> Backend:
        if self._backend is None:
            try:
                self._backend = detect_backend(
                    prefer=self._prefer_backend,
                    root=self.cgroup_root,
                    parent=self.cgroup_parent,
                    systemd_run=shutil.which("systemd-run", path=LAUNCH_PATH),
                    systemctl=shutil.which("systemctl", path=LAUNCH_PATH),
                )
            except RuntimeError as error:
                raise SandboxUnavailable(
                    f"the {self._prefer_backend} limit backend is unavailable: {error}."
                ) from error
            logger.info("sandbox limit backend: %s", self._backend.name)
        return self._backend

    # -- running -----------------------------------------------------------

    def run(self, spec: SandboxSpec) -> SandboxOutcome:
        """Run `spec` to completion; refuses with SandboxUnavailable, never falls back.

        As root, the workspace and writable binds are chowned to the sandbox uid.
        """
        self.check()
        backend = self._limit_backend()
        uid, gid = self._identity()
        if not spec.workspace.is_dir():
            raise ValueError(f"workspace is not a directory: {spec.workspace}")
        for bind in spec.binds:
            if not bind.source.exists():
                raise ValueError(f"bind source does not exist: {bind.source}")
        if self._is_root:
            for path in (spec.workspace, *(b.source for b in spec.binds)):
                _require_reachable(path, uid, gid)
            for path in (spec.workspace, *(b.source for b in spec.binds if b.writable)):
                chown_tree(path, uid, gid)

        try:
            confinement = backend.create(spec.limits)
        except OSError as error:
            raise SandboxUnavailable(
                f"the {backend.name} limit backend could not create a group ({error})."
            ) from error
        fds: list[int] = []
        try:
            argv = [
                *confinement.prefix(self._tool("sh", "so cgroups cannot be joined")),
                # The cgroup join is a shell, and a shell exports PWD: everything
                # after it starts again from PATH alone.
                self._tool("env", "so the sandbox cannot be launched"),
                "-i",
                f"PATH={LAUNCH_PATH}",
                *self._rlimit_prefix(spec, confinement),
                *self._reaper_prefix(),
                *self._drop_prefix(),
                self._bwrap(),
                "--args",
                str(
                    memfd("bwrap-args", nul_join(bwrap_args(spec, fds, self.root)), fds)
                ),
                "--",
                *spec.argv,
            ]
            watchdog = Watchdog(
                limits=spec.limits,
                disk_paths=[
                    spec.workspace,
                    *(b.source for b in spec.binds if b.writable),
                ],
                caps_by_cgroup=confinement.backend != "rlimit",
            )
            return self._launch(argv, fds, spec, confinement, watchdog)
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            confinement.kill_all()
            confinement.remove()

    def _rlimit_prefix(self, spec: SandboxSpec, confinement: Confinement) -> list[str]:
        limits = spec.limits
        wanted: list[tuple[str, int, int]] = [
            ("nofile", resource.RLIMIT_NOFILE, limits.open_files),
            ("core", resource.RLIMIT_CORE, 0),
        ]
        # No single file may outgrow the disk cap between two of the
        # watchdog's measurements.
        sizes = [v for v in (limits.file_size_bytes, limits.disk_bytes) if v]
        if sizes:
            wanted.append(("fsize", resource.RLIMIT_FSIZE, min(sizes)))
        if limits.max_processes is not None and not confinement.caps_processes:
            wanted.append(("nproc", resource.RLIMIT_NPROC, limits.max_processes))
        if limits.memory_bytes is not None and confinement.backend == "rlimit":
            wanted.append(("as", resource.RLIMIT_AS, limits.memory_bytes))
        argv = [self._tool("prlimit", "so the sandbox cannot set resource limits")]
        for option, which, value in wanted:
            soft = hard = self._clamp(which, value)
            argv.append(f"--{option}={soft}:{hard}")
        if limits.cpu_seconds is not None:
            # SIGXCPU at the soft limit, SIGKILL a second later if it is ignored.
            soft = self._clamp(resource.RLIMIT_CPU, limits.cpu_seconds)
            hard = self._clamp(resource.RLIMIT_CPU, limits.cpu_seconds + 1)
            argv.append(f"--cpu={soft}:{hard}")
        return [*argv, "--"]

    def _clamp(self, which: int, value: int) -> int:
        # Only root may raise a hard limit; anyone else asking for more than the
        # current hard limit would make prlimit fail before the sandbox starts.
        if self._is_root:
            return value
        hard = resource.getrlimit(which)[1]
        if hard == resource.RLIM_INFINITY:
            return value
        return min(value, hard)

    def _launch(
        self,
        argv: list[str],
        fds: list[int],
        spec: SandboxSpec,
        confinement: Confinement,
        watchdog: Watchdog,
    ) -> SandboxOutcome:
        limits = spec.limits
        capture = HeadTailBuffer(limits.output_bytes)
        started = time.monotonic()
        deadline = started + limits.wall_seconds
        process = subprocess.Popen(
            argv,
            env={"PATH": LAUNCH_PATH},
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=fds,
        )
        ended = "done"
        try:
            assert process.stdout is not None
            pipe = process.stdout.fileno()
            os.set_blocking(pipe, False)
            ended = pump(
                process.pid, pipe, capture, deadline, confinement, watchdog, spec.stop
            )
        finally:
            kill_run(process.pid, behind_reaper=self._is_root)
            confinement.kill_all()
            returncode = process.wait()
            if process.stdout is not None:
                drain(process.stdout.fileno(), capture)
                process.stdout.close()
        duration = time.monotonic() - started
        timed_out = ended == "timeout"
        stopped = ended == "stopped"

        exit_code = None if timed_out or stopped else shell_exit_status(returncode)
        output = capture.text()
        if exit_code == 1 and output.startswith("bwrap: execvp "):
            # bwrap says 1 when the command cannot be executed at all; report it
            # as a shell would (127), so callers can tell "not started" apart.
            exit_code = _NOT_EXECUTABLE
        if not watchdog.fired and watchdog.watches_disk:
            # What was written since the last measurement counts too.
            watchdog.check_disk()
        fired = watchdog.fired or confinement.fired()
        if not fired and exit_code == _SIGXCPU_EXIT:
            fired = "cpu_time"
        elif not fired and exit_code == _SIGXFSZ_EXIT:
            fired = "file_size"
        elif not fired and timed_out:
            fired = "wall_time"
        elif not fired and stopped:
            fired = "stopped"
        return SandboxOutcome(
            exit_code=exit_code,
            output=output,
            output_truncated=capture.truncated,
            timed_out=timed_out,
            limit_fired=fired,
            duration_s=duration,
            limit_backend=confinement.backend,
            limit_detail=watchdog.detail if fired == watchdog.fired else "",
            runner=self.name,
            isolation=self.isolation,
        )


def _require_reachable(path: Path, uid: int, gid: int) -> None:
    """bwrap runs as `uid` and must be able to reach every path it binds."""
    for directory in reversed(path.parents):
        st = directory.stat()
        if st.st_uid == uid:
            ok = st.st_mode & stat.S_IXUSR
        elif st.st_gid == gid:
            ok = st.st_mode & stat.S_IXGRP
        else:
            ok = st.st_mode & stat.S_IXOTH
        if not ok:
            raise SandboxUnavailable(
                f"{path} is not reachable by the sandbox uid {uid} because "
                f"{directory} is not searchable by it; put REPLAYHUB_WORK_DIR "
                f"somewhere every user can traverse."
            )
