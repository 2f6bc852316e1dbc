"""Files someone else may have put in place, opened without trusting them.

A directory a training run writes to, or a file named on the command line,
may hold a symbolic link to a host secret or a FIFO that would hang the
worker. Only a regular file, reached without following a link in its last
component and opened without blocking, is read; a walk lists what it passed
over rather than following a link.
"""

from __future__ import annotations

import fcntl
import os
import stat
from typing import BinaryIO


class NotRegular(OSError):
    """The path is a link, a directory, a device or a FIFO: not read."""


def open_regular(path: str | os.PathLike[str], *, buffering: int = -1) -> BinaryIO:
    """``path`` opened for reading, if it is a regular file and not a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        if error.errno == 40:  # ELOOP: the last component is a link
            raise NotRegular(40, "a symbolic link, not followed", str(path)) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            raise NotRegular(0, "not a regular file", str(path))
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


def inside(path: str, root: str) -> bool:
    """Whether ``path``, every link in it resolved, lies under ``root``."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip("/") + "/")
