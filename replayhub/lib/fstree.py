"""Trees an agent wrote, handled from the host: removed, or handed to another owner.

Such a tree may nest directories thousands deep, lock them, and plant symlinks
to host files. So every walk here is iterative (no recursion limit) and
relative to directory descriptors (no path grows past PATH_MAX), with two
descriptors open at a time; every descent opens with ``O_NOFOLLOW`` and links
are acted on themselves, so nothing outside the tree is touched.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: Path | str) -> None:
    """Delete ``path`` and everything below it; a missing path is not an error.

    A directory left unreadable, unsearchable or read-only is given back owner
    access first: the owner may always chmod it.
    """
    path = Path(path)
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        path.unlink()
        return
    parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _walk(
            _open_for_removal(parent, path.name),
            enter=_unlink_files,
            open_child=_open_for_removal,
            leave=lambda fd, name: os.rmdir(name, dir_fd=fd),
            where=path,
        )
        os.rmdir(path.name, dir_fd=parent)
    finally:
        os.close(parent)


def chown_tree(root: Path | str, uid: int, gid: int) -> None:
    """lchown ``root`` and everything below it, never through a symlink."""
    if not stat.S_ISDIR(os.lstat(root).st_mode):
        os.lchown(root, uid, gid)
        return
    fd = os.open(root, _DIRECTORY)
    try:
        os.fchown(fd, uid, gid)
    except BaseException:
        os.close(fd)
        raise

    def chown_entries(directory: int) -> list[str]:
        """lchown everything in ``directory``; its subdirectories' names."""
        subdirectories = []
        with os.scandir(directory) as entries:
            for entry in entries:
                os.chown(entry.name, uid, gid, dir_fd=directory, follow_symlinks=False)
                if entry.is_dir(follow_symlinks=False):
                    subdirectories.append(entry.name)
        return subdirectories

    _walk(
        fd,
        enter=chown_entries,
        open_child=lambda parent, name: os.open(name, _DIRECTORY, dir_fd=parent),
        leave=lambda fd, name: None,
        where=root,
    )


def _walk(
    fd: int,
    *,
    enter: Callable[[int], list[str]],
    open_child: Callable[[int, str], int],
    leave: Callable[[int, str], object],
    where: Path | str,
) -> None:
    """Depth first below directory ``fd``, which this closes.

    ``enter`` acts on a directory's entries and returns its subdirectories;
    ``leave(parent, name)`` runs once a subdirectory has been walked. One frame
    per directory from the top down to the current one keeps its identity,
    checked when ".." leads back up to it, and its subdirectories still to
    visit.
    """
    try:
        frames = [(_identity(fd), enter(fd))]
        while frames:
            pending = frames[-1][1]
            if pending:
                child = open_child(fd, pending[-1])
                os.close(fd)
                fd = child
                frames.append((_identity(fd), enter(fd)))
                continue
            frames.pop()
            if not frames:
                break
            up = os.open("..", _DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = up
            if _identity(fd) != frames[-1][0]:
                raise OSError(f"a directory under {where} moved while it was walked")
            leave(fd, frames[-1][1].pop())
    finally:
        os.close(fd)


def _open_for_removal(parent: int, name: str) -> int:
    """Open directory ``name`` of ``parent`` (never a symlink), owner access granted."""
    try:
        fd = os.open(name, _DIRECTORY, dir_fd=parent)
    except PermissionError:
        # fchmodat without following (glibc 2.32 or later): were ``name`` a
        # symlink, this raises instead of changing whatever the link points to.
        os.chmod(name, stat.S_IRWXU, dir_fd=parent, follow_symlinks=False)
        fd = os.open(name, _DIRECTORY, dir_fd=parent)
    if os.fstat(fd).st_mode & stat.S_IRWXU != stat.S_IRWXU:
        # A read-only directory opens, but nothing in it can be unlinked.
        with contextlib.suppress(OSError):
            os.fchmod(fd, stat.S_IRWXU)
    return fd


def _unlink_files(fd: int) -> list[str]:
    """Unlink everything in ``fd`` but directories; return the directories' names."""
    with os.scandir(fd) as entries:
        listed = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
    for name, is_directory in listed:
        if not is_directory:
            os.unlink(name, dir_fd=fd)
    return [name for name, is_directory in listed if is_directory]


def _identity(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino
