"""When a replay goes back to the queue instead of being ruled: pure rules.

Two failures say nothing of the run and may be gone in a minute: a remote out
of reach (``repo_unreachable``) and a host that could not provision the
workspace (``host_failed``: its disk full, its mirror unreadable; or
``sandbox_unavailable``: its sandbox would not start). A replay a
night admitted that ends in one of them is queued again, keeping its night
and its reservation, after a back-off that doubles from the first delay up to
a cap, as long as the next try falls inside the night's window; a host
failure is tried on a few hosts at most. The ruling stands when the window
would close first (or the hosts are used up), its reason saying how often and
over how long the replay was tried.

A replay no night admitted (``reproduce``, a reviewer's rerun) is ruled at
once, as before: someone is waiting for that answer, ``reproduce`` runs it in
its own process, and a remote or host that stays broken is better said at
once than after minutes of silence; a rerun is one click.
"""

from __future__ import annotations

import errno
from datetime import datetime, timedelta

from replayhub.verdicts import Reason

# A host's failures, tried on another host a few times: ``host_failed`` and a
# sandbox this host cannot start (another host's may start).
ON_ANOTHER_HOST: frozenset[str] = frozenset(
    {Reason.HOST_FAILED, Reason.SANDBOX_UNAVAILABLE}
)
RETRIED: frozenset[str] = ON_ANOTHER_HOST | {Reason.REPO_UNREACHABLE}

# The errors a host's own state raises, whatever the run: a full disk or quota,
# a folder of its own it may not read (a mirror, the work folder), a file
# system gone read-only or failing, memory or file handles exhausted.
HOST_ERRNOS = frozenset(
    {
        errno.ENOSPC,
        errno.EACCES,
        errno.EDQUOT,
        errno.EROFS,
        errno.EIO,
        errno.ENOMEM,
        errno.EMFILE,
        errno.ENFILE,
    }
)
# The same failures in a git command's own words (git reports them on stderr
# and exits 128, like a bad commit; only the words tell them apart). Not
# "permission denied": over SSH that is the remote refusing a key. On a full
# disk git often names only the file it could not write ("couldn't write
# '…/replay-base.lock'"): nothing the run holds makes a host folder unwritable
# before the agent has run.
HOST_WORDS = (
    "no space left on device",
    "couldn't write",
    "unable to write",
    "disk quota exceeded",
    "read-only file system",
    "input/output error",
    "cannot allocate memory",
    "out of memory",
    "too many open files",
    "cannot start git",
)


def host_fault(
    error: BaseException, *, free_bytes: int | None = None, minimum_bytes: int = 0
) -> bool:
    """Whether ``error``, met while provisioning a workspace, is the host's
    (so the run is not to blame): an ``OSError`` with a host errno, a git
    failure whose message or stderr names one, or any failure while the
    work folder has less than ``minimum_bytes`` free (``free_bytes``, when
    it could be read). A commit that does not resolve, a tree git refuses to
    check out, a timeout are the run's."""
    if free_bytes is not None and free_bytes < minimum_bytes:
        return True
    if isinstance(error, OSError):
        return error.errno in HOST_ERRNOS
    text = f"{error} {getattr(error, 'stderr', '')}".lower()
    return any(words in text for words in HOST_WORDS)


def backoff(tries: int, *, first: float, cap: float) -> float:
    """Seconds before try ``tries + 1``: ``first``, doubled per try, capped."""
    return min(first * 2 ** max(tries - 1, 0), cap)


def next_try(
    *,
    reason: str,
    tries: int,
    now: datetime,
    window_end: datetime | None,
    first: float,
    cap: float,
    host_tries: int,
) -> float | None:
    """Seconds until the next try of a replay whose ``tries``-th try just
    ended with ``reason`` at ``now``; None when this ruling stands.

    ``window_end`` is the end of the night that admitted the replay, None for
    a replay no night admitted (ruled at once). A host's failure (its own, or
    a sandbox it cannot start) is tried ``host_tries`` times at most; a
    remote out of reach until the window closes.
    """
    if window_end is None or reason not in RETRIED:
        return None
    if reason in ON_ANOTHER_HOST and tries >= host_tries:
        return None
    delay = backoff(tries, first=first, cap=cap)
    if now + timedelta(seconds=delay) >= window_end:
        return None
    return delay


def duration(seconds: float) -> str:
    """``seconds`` for a reason sentence: "48 s", "4 min 12 s", "2 h 05 min"."""
    whole = max(round(seconds), 0)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def tried_reason(
    reason: str, *, tries: int, seconds: float, window_closed: bool
) -> str:
    """``reason`` (one sentence) with how often and over how long the replay
    was tried before it stood; unchanged for a replay tried once."""
    if tries <= 1:
        return reason
    why = "the night's window closes before another try" if window_closed else ""
    why = why or "no other host is left to try"
    return (
        f"{reason.rstrip().rstrip('.')} (tried {tries} times over "
        f"{duration(seconds)}; {why})."
    )
