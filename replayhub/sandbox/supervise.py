"""Supervising the bubblewrap launch chain while it runs, and ending it.

:func:`pump` copies the command's output into a bounded capture until the
process is done, the wall clock runs out or the caller asks it to stop,
polling the cgroup and the watchdog between reads. :func:`kill_run` ends a run
without leaving an orphan, by killing the sandbox's init (bwrap's inner
process) so the kernel takes down its whole pid namespace, with the process
group as the fallback. :func:`drain` reads what is left once the process is
gone, and :func:`shell_exit_status` reports a death by signal as a shell would. The
launch itself and the reading of the outcome are :mod:`replayhub.sandbox.bwrap`'s.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import threading
import time
from pathlib import Path

from replayhub.sandbox.cgroups import Confinement
from replayhub.sandbox.output import HeadTailBuffer
from replayhub.sandbox.watchdog import Watchdog

_READ_CHUNK = 64 * 1024
_READS_PER_WAKEUP = 16
_POLL_SECONDS = 0.25
# After the process is gone (or killed), how long to keep draining the pipe for
# output already written.
_DRAIN_SECONDS = 1.0
# How long the launcher gets to reap bwrap after bwrap was killed.
_REAP_GRACE_SECONDS = 2.0


def _exited(pid: int) -> bool:
    """Whether `pid` has exited, without reaping it (WNOWAIT)."""
    try:
        return (
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        )
    except ChildProcessError:
        return True


def _children(pid: int) -> list[int]:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in children.split()]


def _ppid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def _kill_child(parent: int, pid: int) -> bool:
    """SIGKILL `pid` if it is still a child of `parent`; True if signalled."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        # Checked after the pidfd pins the process: a pid recycled since it was
        # listed now names some other process, which is left alone.
        if _ppid(pid) != parent:
            return False
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        return True
    except OSError:
        return False
    finally:
        os.close(pidfd)


def kill_run(leader: int, *, behind_reaper: bool) -> None:
    """SIGKILL everything the launched process started, leaving no orphan.

    The target is the sandbox's init, bwrap's inner process: its death makes the
    kernel kill every process of its pid namespace (setsid or not), then the
    outer bwrap exits on its own and `unshare` (as root) reaps it. Killing the
    whole group at once would orphan bwrap's processes to the host's init,
    which may never reap them. killpg stays as the fallback (a run stopped
    before bwrap forked) and is safe because the leader is still unreaped, so
    its pid, which is also the group id, cannot have been recycled.
    """
    outer = _children(leader) if behind_reaper else [leader]
    killed = False
    for bwrap in outer:
        for init in _children(bwrap):
            killed = _kill_child(bwrap, init) or killed
    if killed:
        deadline = time.monotonic() + _REAP_GRACE_SECONDS
        while not _exited(leader) and time.monotonic() < deadline:
            time.sleep(0.005)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(leader, signal.SIGKILL)


def pump(
    pid: int,
    pipe: int,
    capture: HeadTailBuffer,
    deadline: float,
    confinement: Confinement,
    watchdog: Watchdog | None = None,
    stop: threading.Event | None = None,
) -> str:
    """Copy output into `capture` until the process is done or the watchdog
    stopped it ("done"), the deadline passed ("timeout") or `stop` was set
    ("stopped")."""
    eof = False
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        selector.register(pipe, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if now >= deadline:
                return "timeout"
            if stop is not None and stop.is_set():
                return "stopped"
            if eof:
                if _exited(pid):
                    return "done"
                time.sleep(min(0.01, deadline - now))
                continue
            if selector.select(timeout=min(_POLL_SECONDS, deadline - now)):
                eof = not _read_available(pipe, capture)
            confinement.poll()
            if watchdog is not None and watchdog.poll(pid):
                return "done"
            if not eof and _exited(pid):
                # Normally EOF follows at once: bwrap's exit takes its whole pid
                # namespace with it. Anything still holding the pipe gets a
                # grace period, then the kill in the caller.
                exited_at = exited_at or now
                if now - exited_at > _DRAIN_SECONDS:
                    return "done"


def _read_available(pipe: int, capture: HeadTailBuffer) -> bool:
    """Read what is buffered, a bounded amount; False at EOF.

    Bounded so that a command printing without pause still lets the caller
    look at the clock between reads.
    """
    for _ in range(_READS_PER_WAKEUP):
        try:
            chunk = os.read(pipe, _READ_CHUNK)
        except BlockingIOError:
            return True
        if not chunk:
            return False
        capture.feed(chunk)
    return True


def drain(pipe: int, capture: HeadTailBuffer) -> None:
    """Read what is left in the pipe, for at most _DRAIN_SECONDS or until EOF."""
    deadline = time.monotonic() + _DRAIN_SECONDS
    with selectors.DefaultSelector() as selector:
        selector.register(pipe, selectors.EVENT_READ)
        while (remaining := deadline - time.monotonic()) > 0:
            if selector.select(timeout=remaining) and not _read_available(
                pipe, capture
            ):
                return


def shell_exit_status(returncode: int) -> int:
    """The exit status as a shell reports it."""
    # Popen reports death by signal as -N; a shell would say 128 + N, and so
    # does bwrap for the command it monitors.
    return 128 - returncode if returncode < 0 else returncode
