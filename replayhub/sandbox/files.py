"""Handing a tree the sandbox wrote (or will write) to another owner, safely."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """lchown ``root`` and everything below it, never through a symlink.

    The tree may be an agent's: thousands of directories deep, with symlinks
    pointing at host files. So the walk is iterative (no recursion limit) and
    relative to directory descriptors (no path grows past PATH_MAX), with two
    descriptors open at a time; links are chowned themselves, and every descent
    opens with ``O_NOFOLLOW``, so the chown never reaches outside the tree.
    """
    if not stat.S_ISDIR(os.lstat(root).st_mode):
        os.lchown(root, uid, gid)
        return
    fd = os.open(root, _DIRECTORY)
    try:
        os.fchown(fd, uid, gid)
        # One frame per directory from the root down to the current one: its
        # identity, checked when ".." leads back up to it, and the names of its
        # subdirectories still to visit.
        frames = [(_identity(fd), _chown_entries(fd, uid, gid))]
        while frames:
            subdirectories = frames[-1][1]
            if subdirectories:
                child = os.open(subdirectories.pop(), _DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = child
                frames.append((_identity(fd), _chown_entries(fd, uid, gid)))
                continue
            frames.pop()
            if not frames:
                break
            up = os.open("..", _DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = up
            if _identity(fd) != frames[-1][0]:
                raise OSError(f"a directory under {root} moved while it was chowned")
    finally:
        os.close(fd)


_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _chown_entries(fd: int, uid: int, gid: int) -> list[str]:
    """lchown everything in directory ``fd``; return its subdirectories' names."""
    subdirectories = []
    with os.scandir(fd) as entries:
        for entry in entries:
            os.chown(entry.name, uid, gid, dir_fd=fd, follow_symlinks=False)
            if entry.is_dir(follow_symlinks=False):
                subdirectories.append(entry.name)
    return subdirectories


def _identity(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino
