"""Capture what an agent left in its workspace as a tree, whatever it left.

The workspace is the agent's: every name, link, mode and nested repository in
it was chosen by code ReplayHub does not trust. So capture never asks git to
walk it. The files are listed here (iteratively, links never followed), and
git is handed the list:

* ``.git`` is never stored, at any depth. A directory holding a repository of
  its own is stored as the plain directory it is (its ``.git`` left out, its
  path listed in ``nested_repositories``): git never opens that repository,
  whose ``HEAD`` or refs may be links to files only the worker could read.
* A path git refuses to store (``.GIT/config``, ``git~1``), one too long to
  reach, and anything that is not a file, a link or a directory (a FIFO, a
  socket) is skipped and listed in ``unstorable``. The replay's tree then is
  not what the agent left, and cannot be called identical to anything.
* Content is stored as its bytes: the scratch git dir's ``info/attributes``
  outranks any ``.gitattributes`` (see ``git.scratch.NO_CONVERSION``), so nothing
  the agent wrote decides a conversion that could fail or change a file.
* ``.gitignore`` is honoured as the agent's own ``git add --all`` would:
  untracked files it ignores are left out, files tracked at the base stay.
* The agents' own files (the project's ignored paths, see ``git.agentfiles``)
  that the base does not track are left out unread and listed in
  ``left_out``; those it tracks are captured, and put back as the base has
  them when the trees are compared.
* As root, git reads the workspace as the sandbox's uid (``user``), which owns
  every file there: a link or a hard-linked name can show it nothing the agent
  could not read itself. The objects it writes go to a directory of their own,
  which the scratch git dir then borrows from.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from replayhub.git import agentfiles
from replayhub.git.scratch import GitError, Scratch, require_sha

# Longer paths cannot be opened by name (PATH_MAX), so git cannot store them.
PATH_MAX = 4096
NAME_MAX = 255
# How many of the skipped paths and nested repositories are named, and how
# much of each name.
LISTED = 100
NAMED_CHARS = 500


class TooManyFiles(Exception):
    """The workspace holds more files than the cap; nothing was captured."""

    def __init__(self, found: int, cap: int) -> None:
        super().__init__(f"more than {cap:,} files")
        self.found = found
        self.cap = cap


@dataclass
class Captured:
    """The captured tree and what could not be stored as the agent left it."""

    tree: str
    unstorable: list[str] = field(default_factory=list)
    unstorable_count: int = 0
    nested_repositories: list[str] = field(default_factory=list)
    # The agents' own files left out unread (the first ``LISTED``), and how many.
    left_out: list[str] = field(default_factory=list)
    left_out_count: int = 0
    # What the agent's writable directories held before the capture (the
    # disk cap's measure), when measured.
    disk_bytes: int | None = None


@dataclass
class _Listing:
    files: list[bytes] = field(default_factory=list)
    unstorable: list[bytes] = field(default_factory=list)
    nested: list[bytes] = field(default_factory=list)


def capture_workspace(
    scratch: Scratch,
    workspace: Path | str,
    *,
    base: str | None = None,
    user: tuple[int, int] | None = None,
    max_files: int | None = None,
    ignored: Sequence[str] = (),
    kept: Sequence[str] = (),
) -> Captured:
    """Snapshot ``workspace`` (grown from ``base``) as a tree in ``scratch``.

    ``base`` defaults to the commit the scratch provisioned. Paths matching
    ``ignored`` and none of ``kept`` that the base does not track, and such
    paths git could not store, are left out (``Captured.left_out``). Raises
    :class:`TooManyFiles` when it holds more than ``max_files`` files, before
    git reads any of them, and ``GitError`` when git fails.
    """
    workspace = Path(workspace).absolute()
    base = base or scratch.base
    if base is None:
        raise ValueError("capture needs the base commit the workspace started from")
    base = scratch.resolve_commit(require_sha(base))
    listing = list_workspace(workspace, readable=user is not None, limit=max_files)
    at_base = _base_entries(scratch, base)
    git_user = {"user": user} if user is not None else {}
    objects, index = _capture_room(
        scratch, base, at_base, walked=set(listing.files), user=user
    )
    # git run as ``user`` writes new objects here and reads the rest from the
    # scratch git dir (and, through it, the project's).
    as_user_env = {
        "GIT_OBJECT_DIRECTORY": os.fspath(objects),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": os.fspath(scratch.git_dir / "objects"),
    }

    def agents_own(path: bytes) -> bool:
        return agentfiles.left_out(_name(path), ignored, kept)

    untracked = [path for path in listing.files if path not in at_base]
    agents = {path for path in untracked if agents_own(path)}
    untracked = [path for path in untracked if path not in agents]
    gitignored = _ignored(scratch, workspace, untracked, as_user_env, git_user)
    added = [
        path for path in listing.files if path not in gitignored and path not in agents
    ]
    scratch.git(
        "update-index",
        "-z",
        "--add",
        # A file where the base had a directory, or the other way round.
        "--replace",
        "--stdin",
        work_tree=workspace,
        index_file=index,
        input=b"".join(path + b"\0" for path in added),
        env=as_user_env,
        **git_user,
    )
    borrow(scratch, objects)
    stored = set(
        filter(
            None, scratch.git("ls-files", "-z", index_file=index).stdout.split(b"\0")
        )
    )
    # What git refused ("Ignoring path ...") is what it did not store.
    refused = [path for path in added if path not in stored]
    tree = scratch.git("write-tree", index_file=index).stdout.decode().strip()
    index.unlink(missing_ok=True)
    unstorable = sorted({*listing.unstorable, *refused})
    agents |= {path for path in unstorable if agents_own(path)}
    unstorable = [path for path in unstorable if path not in agents]
    return Captured(
        tree=tree,
        unstorable=[_text(path) for path in unstorable[:LISTED]],
        unstorable_count=len(unstorable),
        nested_repositories=[_text(path) for path in sorted(listing.nested)[:LISTED]],
        left_out=[_text(path) for path in sorted(agents)[:LISTED]],
        left_out_count=len(agents),
    )


def _capture_room(
    scratch: Scratch,
    base: str,
    at_base: dict[bytes, bytes],
    *,
    walked: set[bytes],
    user: tuple[int, int] | None,
) -> tuple[Path, Path]:
    """The capture's own object directory and an index holding ``base`` less
    the paths the workspace no longer has, both owned by ``user`` if given."""
    room = scratch.root / "capture"
    objects = room / "objects"
    index = room / "index"
    objects.mkdir(parents=True, exist_ok=True)
    for directory in (objects, *[objects / name for name in ("info", "pack")]):
        directory.mkdir(exist_ok=True)
    index.unlink(missing_ok=True)
    scratch.git("read-tree", base, index_file=index)
    # Gone from the workspace, or under a name that is now a link or a file:
    # removed whatever stands there now (nothing is read for it).
    removed = [
        path
        for path, mode in at_base.items()
        if path not in walked and mode != b"160000"
    ]
    if removed:
        # Mode 0 removes the path from the index.
        scratch.git(
            "update-index",
            "-z",
            "--index-info",
            index_file=index,
            input=b"".join(b"0 " + b"0" * 40 + b"\t" + p + b"\0" for p in removed),
        )
    if user is not None:
        for path in (room, objects, objects / "info", objects / "pack", index):
            os.chown(path, *user)
    return objects, index


def borrow(scratch: Scratch, objects: Path) -> None:
    """Let the scratch git dir read the objects under ``objects``."""
    alternates = scratch.git_dir / "objects" / "info" / "alternates"
    lines = alternates.read_text(encoding="utf-8").splitlines()
    if os.fspath(objects) not in lines:
        alternates.write_text(
            "".join(f"{line}\n" for line in [*lines, os.fspath(objects)]),
            encoding="utf-8",
        )


def list_workspace(
    workspace: Path, *, readable: bool = False, limit: int | None = None
) -> _Listing:
    """The files and links under ``workspace`` as paths relative to it.

    Iterative and never through a link. ``readable`` gives the owner read
    access to every file and directory that lacks it (git reading as the
    owner must be able to open them). More than ``limit`` files raises
    :class:`TooManyFiles`.
    """
    listing = _Listing()
    root = os.fsencode(workspace)
    if readable:
        mode = os.lstat(root).st_mode
        if stat.S_ISDIR(mode) and mode & 0o500 != 0o500:
            os.chmod(root, stat.S_IMODE(mode) | 0o700)
    pending: list[bytes] = [b""]
    while pending:
        relative = pending.pop()
        directory = os.path.join(root, relative) if relative else root
        try:
            with os.scandir(directory) as entries:
                found = [(e.name, e.stat(follow_symlinks=False)) for e in entries]
        except OSError:
            # Not listable by name (too deep to name, or gone): what is in it
            # cannot be stored.
            listing.unstorable.append(relative)
            continue
        for name, info in found:
            path = os.path.join(relative, name) if relative else name
            if name == b".git":
                # The workspace's own repository, or a nested one: never stored.
                if relative:
                    listing.nested.append(relative)
                continue
            mode = info.st_mode
            # Room for a name below a directory, or for the path itself.
            room = NAME_MAX + 1 if stat.S_ISDIR(mode) else 0
            if len(root) + 1 + len(path) + room >= PATH_MAX - 1:
                listing.unstorable.append(path)
                continue
            if stat.S_ISDIR(mode):
                if readable and mode & 0o500 != 0o500:
                    os.chmod(os.path.join(root, path), mode | 0o700)
                pending.append(path)
            elif stat.S_ISREG(mode) or stat.S_ISLNK(mode):
                if readable and stat.S_ISREG(mode) and not mode & 0o400:
                    os.chmod(os.path.join(root, path), stat.S_IMODE(mode) | 0o600)
                listing.files.append(path)
                if limit is not None and len(listing.files) > limit:
                    raise TooManyFiles(len(listing.files), limit)
            else:
                listing.unstorable.append(path)
    return listing


def _base_entries(scratch: Scratch, base: str) -> dict[bytes, bytes]:
    out = scratch.git("ls-tree", "-r", "-z", "--full-tree", base).stdout
    entries = {}
    for record in filter(None, out.split(b"\0")):
        meta, _, path = record.partition(b"\t")
        entries[path] = meta.split(b" ", 1)[0]
    return entries


def _ignored(
    scratch: Scratch,
    workspace: Path,
    paths: list[bytes],
    env: dict[str, str],
    git_user: dict,
) -> set[bytes]:
    """Those of ``paths`` (untracked at the base) that ``.gitignore`` files ignore."""
    if not paths:
        return set()
    result = scratch.git(
        "check-ignore",
        "-z",
        "--stdin",
        "--no-index",
        work_tree=workspace,
        input=b"".join(path + b"\0" for path in paths),
        env=env,
        check=False,
        **git_user,
    )
    # 0: some ignored, 1: none ignored; anything else is git failing.
    if result.returncode not in (0, 1):
        raise GitError(
            "git check-ignore failed with exit code "
            f"{result.returncode}: {result.stderr.decode(errors='replace')[-500:]}"
        )
    return set(filter(None, result.stdout.split(b"\0")))


def _name(path: bytes) -> str:
    """A path as the globs read it: whole, undecodable bytes kept."""
    return path.decode("utf-8", "surrogateescape")


def _text(path: bytes) -> str:
    text = path.decode("utf-8", "surrogateescape")
    return text if len(text) <= NAMED_CHARS else text[: NAMED_CHARS - 1] + "…"
