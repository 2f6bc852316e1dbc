"""A host's finished agent installs, kept to be copied into the next
environment that needs the same one.

Installing a Python agent from its wheels takes most of a minute (aider,
mini-swe-agent); copying the tree it left takes a second or two. An install
depends only on the release, where it came from (the agent cache's folder
for that release, or the registry), the install script and the sandbox's
root — never on the project — so it is kept per host under the environment
cache (or ``REPLAYHUB_AGENT_INSTALLS_DIR``), keyed by those, and copied
(never linked: a project's setup command may write into its own environment)
before the project's setup command runs.
A kept install is taken only when complete (its marker written last); the
oldest beyond :data:`KEEP` are removed. Any trouble reading one means the
install simply runs again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import stat
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

from replayhub.lib.fstree import remove_tree

log = logging.getLogger(__name__)

# The most installs a host keeps.
KEEP = 8
MARKER = ".complete"
# The programs a host-rooted install is made with and run by.
HOST_PROGRAMS = ("/usr/bin/python3", "/usr/bin/node")


def folder() -> Path:
    if named := settings.REPLAYHUB_AGENT_INSTALLS_DIR:
        return Path(named)
    return Path(settings.REPLAYHUB_ENV_CACHE_DIR) / "agent-installs"


@contextlib.contextmanager
def one_at_a_time(key: str) -> Iterator[None]:
    """Held while ``key`` is taken or installed: a second worker on the host
    that needs the same install waits for the first and copies what it kept,
    instead of installing it again beside it. The holder's install is bounded
    by its sandbox's limits, so the wait is too. Without a lock file (a
    read-only folder), no waiting."""
    root = folder()
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / f".{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def host_programs() -> list[str]:
    """Each program a host-rooted install depends on, as its real path, size
    and change time: a Python or Node upgrade makes a new key."""
    found = []
    for program in HOST_PROGRAMS:
        try:
            real = os.path.realpath(program)
            st = os.stat(real)
        except OSError:
            continue
        found.append(f"{real}:{st.st_size}:{st.st_mtime_ns}")
    return found


def install_key(
    *, spec: str, argv: tuple[str, ...], cache: Path | None, root: str
) -> str:
    """The digest of what one install depends on (``root`` as
    ``images.root_label`` names it)."""
    source = "registry"
    if cache is not None:
        stamp = cache / ".fetched"
        try:
            source = f"cache:{stamp.read_text()[:200]}"
        except OSError:
            source = f"cache:{cache.name}"
    document = {
        "spec": spec,
        "argv": list(argv),
        "source": source,
        "root": root,
        "host": host_programs() if root == "host" else [],
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def copy_tree(source: Path, destination: Path) -> None:
    """Copy what an install left: directories, symlinks as links, regular
    files with their permission bits (but no setuid, setgid or sticky bit)
    and their times.
    Anything else (a FIFO, a socket, a device) is left out: the package
    made it, and reading a FIFO would hang the worker."""
    shutil.copytree(source, destination, symlinks=True, copy_function=_copy_regular)


def _copy_regular(source: str, destination: str) -> None:
    mode = os.lstat(source).st_mode
    if not stat.S_ISREG(mode):
        return
    shutil.copyfile(source, destination, follow_symlinks=False)
    os.chmod(destination, stat.S_IMODE(mode) & 0o777)
    # The source's times too: Python's bytecode caches name their source's
    # mtime, and a copy that did not keep it would compile every module on
    # every import in the read-only environment (4 s more per start of an
    # agent on litellm).
    times = os.lstat(source)
    os.utime(destination, ns=(times.st_atime_ns, times.st_mtime_ns))


def kept(key: str) -> bool:
    """Whether this host keeps a complete install ``key``."""
    return (folder() / key / MARKER).is_file()


def take(key: str, destination: Path) -> bool:
    """Copy the kept install ``key`` to ``destination``; False when there is
    none or it could not be read (``destination`` is then left absent)."""
    kept = folder() / key
    if not (kept / MARKER).is_file():
        return False
    try:
        copy_tree(kept / "tree", destination)
        os.utime(kept)
    except OSError as error:
        log.warning("agent install %s could not be copied: %s", key[:12], error)
        remove_tree(destination)
        return False
    return True


def keep(key: str, source: Path) -> None:
    """Keep a copy of the install just made at ``source``; never raises."""
    root = folder()
    final = root / key
    if (final / MARKER).is_file():
        return
    staging = root / f".new-{uuid.uuid4().hex}"
    try:
        staging.mkdir(parents=True)
        copy_tree(source, staging / "tree")
        (staging / MARKER).write_text(str(time.time()))
        remove_tree(final)
        os.rename(staging, final)
    except OSError as error:
        log.warning("agent install %s could not be kept: %s", key[:12], error)
        remove_tree(staging)
        return
    evict(root)


def evict(root: Path, keep_at_most: int = KEEP) -> None:
    """Remove the least recently used installs beyond ``keep_at_most``."""
    try:
        kept = [p for p in root.iterdir() if (p / MARKER).is_file()]
        kept.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in kept[keep_at_most:]:
        remove_tree(old)
    # A copy a crashed worker left half made.
    hour_ago = time.time() - 3600
    for staging in root.glob(".new-*"):
        with contextlib.suppress(OSError):
            if staging.stat().st_mtime < hour_ago:
                remove_tree(staging)
