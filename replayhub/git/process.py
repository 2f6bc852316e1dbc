"""One git child process: started, tied to its caller when asked, waited on
with a timeout and a watch, its output read within caps, its group killed.

Every command runs in a process group of its own, so a timeout kills the
helpers git started too. A command that talks to a remote runs as long as the
remote keeps answering, and its helpers (``git-remote-http``, ``fetch-pack``,
``index-pack``) carry on when git itself is killed; a web server that kills a
worker past its timeout, or Celery past a hard time limit, kills that one
process with SIGKILL, so no handler runs and a timeout kept there never fires.
Such a command is *tethered*: it runs under a small ``sh`` supervisor whose
standard input is the read end of a pipe (the :class:`Lifeline`) whose only
write end the caller holds, close-on-exec. However the caller ends, the kernel
closes that end; the supervisor's watcher reads end-of-file and kills the
whole group, git's helpers included. Nothing polls and no signal is caught.
The script is a fixed string: git's argument list reaches it as ``"$@"``.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

# How often a running command's watch is asked whether to stop it.
WATCH_INTERVAL = 0.05
SHELL = "/bin/sh"

# fd 9 keeps the lifeline for the watcher; git does not hold it, and the
# watcher does not hold the caller's output pipes open. When git ends first
# the watcher is stopped; should the caller let go of the lifeline before
# that, the watcher's kill reaches only what is left of the group.
SUPERVISOR = """\
exec 9<&0 </dev/null
"$@" 9<&- &
git=$!
(read -r _ <&9; kill -KILL 0) >/dev/null 2>&1 &
watcher=$!
exec 9<&-
wait "$git"
status=$?
kill "$watcher" 2>/dev/null
exit "$status"
"""


class Lifeline:
    """The pipe that ties one command's process group to the caller."""

    def __init__(self) -> None:
        # os.pipe() descriptors are close-on-exec: no other child of the
        # caller ever holds the write end.
        self.read_end, self.write_end = os.pipe()

    def argv(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run under the supervisor, the lifeline as its stdin."""
        return [SHELL, "-c", SUPERVISOR, "replayhub-git", *argv]

    def started(self) -> None:
        """The child holds the read end now; the caller keeps the write end."""
        self._close("read_end")

    def cut(self) -> None:
        """Let go of both ends: whatever is left of the group is killed."""
        self._close("read_end")
        self._close("write_end")

    def _close(self, name: str) -> None:
        fd = getattr(self, name)
        if fd >= 0:
            setattr(self, name, -1)
            with contextlib.suppress(OSError):
                os.close(fd)


def start(
    argv: list[str], *, tethered: bool, stdin: int, **options: Any
) -> tuple[subprocess.Popen, Lifeline | None]:
    """Start ``argv`` in a process group of its own, stdout and stderr piped;
    ``options`` are Popen's (cwd, env, user). Raises OSError."""
    lifeline = Lifeline() if tethered else None
    try:
        proc = subprocess.Popen(
            lifeline.argv(argv) if lifeline else argv,
            stdin=lifeline.read_end if lifeline else stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            **options,
        )
    except OSError:
        if lifeline:
            lifeline.cut()
        raise
    if lifeline:
        lifeline.started()
    return proc, lifeline


class Stopped(Exception):
    """A command's watch asked to stop it; the message is the watch's."""


def wait(
    proc: subprocess.Popen, timeout: float, watch: Callable[[], str] | None = None
) -> int:
    """``proc.wait(timeout)``, woken by the exit itself rather than by polling;
    with a ``watch``, asked every ``WATCH_INTERVAL`` (raises ``Stopped``).

    ``Popen.wait`` with a timeout sleeps in steps of up to 50 ms, which adds
    tens of milliseconds to every short git command; a pidfd becomes readable
    the moment the process exits.
    """
    deadline = time.monotonic() + max(timeout, 0)
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = -1
    try:
        poller = select.poll()
        if pidfd >= 0:
            poller.register(pidfd, select.POLLIN)
        while True:
            left = max(deadline - time.monotonic(), 0)
            step = left if watch is None else min(left, WATCH_INTERVAL)
            if pidfd >= 0 and poller.poll(step * 1000):
                return proc.wait()
            if pidfd < 0:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    return proc.wait(timeout=step)
            if watch is not None and (problem := watch()):
                raise Stopped(problem)
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def kill_group(proc: subprocess.Popen) -> None:
    # A process group id stays allocated while any member lives, so this cannot
    # reach an unrelated group even after git itself was reaped.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def feed(stream: Any, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, ValueError):
        stream.write(data)
        stream.close()


class CappedReader:
    def __init__(self, stream: Any, cap: int) -> None:
        self.stream = stream
        self.cap = cap
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflowed = False

    def run(self) -> None:
        fd = self.stream.fileno()
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            self.chunks.append(chunk)
            self.size += len(chunk)
            if self.size > self.cap:
                self.overflowed = True
                break
        self.stream.close()

    def data(self) -> bytes:
        return b"".join(self.chunks)[: self.cap]


class TailReader:
    def __init__(self, stream: Any, keep: int) -> None:
        self.stream = stream
        self.keep = keep
        self.buffer = bytearray()

    def run(self) -> None:
        fd = self.stream.fileno()
        while chunk := os.read(fd, 65536):
            self.buffer += chunk
            if len(self.buffer) > 2 * self.keep:
                del self.buffer[: -self.keep]
        self.stream.close()

    def data(self) -> bytes:
        return bytes(self.buffer[-self.keep :])

    def text(self) -> str:
        return self.data().decode("utf-8", errors="replace")
