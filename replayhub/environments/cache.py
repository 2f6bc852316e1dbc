"""The environments one worker host keeps: a directory per key, a disk cap,
least-recently-used eviction, and failed setups remembered for a while.

Layout under the cache root::

    <key>/env         what the setup phase left; mounted at $REPLAYHUB_ENV_DIR
    <key>/meta.json   written by the host only: state, sizes, the output tail
    <key>/used        its modification time is the entry's last use
    <key>.lock        flock: exclusive while building or evicting, shared while
                      a replay runs with the environment
    .build-<key>-*    a build in progress, renamed to <key> when it succeeds

A replay holds the shared lock for as long as it runs, so eviction (which
needs the exclusive lock and never waits for it) can never take an
environment from under a running sandbox. Lock files are never removed:
unlinking one while another process has it open would let two holders lock
two different files. No Django here: the caller passes the root, the cap and
how long a failure is remembered.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import stat
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from replayhub.lib.fstree import remove_tree

READY = "ready"
FAILED = "failed"
_KEY = re.compile(r"[0-9a-f]{64}\Z")


class LockTimeout(Exception):
    """Another process held an environment's lock for longer than we wait."""


@dataclass(frozen=True)
class CacheEntry:
    key: str
    state: str
    built_at: float
    setup_seconds: float
    size_bytes: int = 0
    last_used: float = 0.0
    exit_code: int | None = None
    output_tail: str = ""
    label: str = ""

    def to_meta(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k not in {"last_used"}}


def check_key(key: str) -> str:
    if not _KEY.match(key):
        raise ValueError(f"{key!r} is not an environment key")
    return key


def tree_size(root: Path) -> int:
    """Bytes on disk under ``root``, without following links."""
    total = 0
    pending = [os.fspath(root)]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    info = entry.stat(follow_symlinks=False)
                    total += info.st_blocks * 512
                    if stat.S_ISDIR(info.st_mode):
                        pending.append(entry.path)
        except OSError:
            continue
    return total


class EnvCache:
    """The cache directory of one worker host; see the module docstring."""

    def __init__(self, root: Path | str, *, max_bytes: int, failure_ttl: float):
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.failure_ttl = failure_ttl

    # -- reading --------------------------------------------------------------

    def env_dir(self, key: str) -> Path:
        return self.root / check_key(key) / "env"

    def get(self, key: str) -> CacheEntry | None:
        directory = self.root / check_key(key)
        try:
            meta = json.loads((directory / "meta.json").read_text())
            used = (directory / "used").stat().st_mtime
        except (OSError, ValueError):
            return None
        try:
            entry = CacheEntry(**meta, last_used=used)
        except TypeError:
            return None
        if entry.state == READY and not (directory / "env").is_dir():
            return None
        return entry

    def entries(self) -> list[CacheEntry]:
        """Every complete entry, least recently used first."""
        if not self.root.is_dir():
            return []
        found = []
        for path in self.root.iterdir():
            if _KEY.match(path.name) and (entry := self.get(path.name)) is not None:
                found.append(entry)
        return sorted(found, key=lambda e: (e.last_used, e.key))

    def failure_fresh(self, entry: CacheEntry, now: float | None = None) -> bool:
        """Whether a failed entry is still remembered (no setup reruns)."""
        now = time.time() if now is None else now
        return entry.state == FAILED and now - entry.built_at < self.failure_ttl

    # -- locks ----------------------------------------------------------------

    def _lock_fd(self, key: str) -> int:
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        return os.open(
            self.root / f"{check_key(key)}.lock", os.O_RDWR | os.O_CREAT, 0o600
        )

    @contextlib.contextmanager
    def exclusive(self, key: str, *, timeout: float) -> Iterator[None]:
        """Hold ``key``'s lock alone: one build per key on this host at a time."""
        fd = self._lock_fd(key)
        try:
            _flock(fd, fcntl.LOCK_EX, timeout)
            yield
        finally:
            os.close(fd)

    def hold(self, key: str, *, timeout: float) -> int | None:
        """Take ``key``'s shared lock for a replay's use; returns the descriptor
        to close when done, or None when the entry is gone (evicted meanwhile)."""
        fd = self._lock_fd(key)
        try:
            _flock(fd, fcntl.LOCK_SH, timeout)
        except BaseException:
            os.close(fd)
            raise
        entry = self.get(key)
        if entry is None or entry.state != READY:
            os.close(fd)
            return None
        self.touch(key)
        return fd

    # -- writing (callers hold the exclusive lock) -----------------------------

    def new_build(self, key: str) -> Path:
        """A fresh build directory with an empty ``env`` inside."""
        build = self.root / f".build-{check_key(key)}-{uuid.uuid4().hex[:8]}"
        (build / "env").mkdir(parents=True)
        build.chmod(0o755)
        return build

    def commit(self, build: Path, entry: CacheEntry) -> CacheEntry:
        """Make ``build`` the entry for ``entry.key`` (replacing any failure)."""
        entry = CacheEntry(
            **{**entry.to_meta(), "size_bytes": tree_size(build / "env")}
        )
        self._write_meta(build, entry)
        self._discard(entry.key)
        os.rename(build, self.root / entry.key)
        return self.get(entry.key) or entry

    def record_failure(self, entry: CacheEntry) -> CacheEntry:
        """Remember a failed setup (its output tail) without any environment."""
        self._discard(entry.key)
        directory = self.root / entry.key
        directory.mkdir(parents=True)
        self._write_meta(directory, entry)
        return self.get(entry.key) or entry

    def touch(self, key: str) -> None:
        with contextlib.suppress(OSError):
            os.utime(self.root / check_key(key) / "used")

    def _write_meta(self, directory: Path, entry: CacheEntry) -> None:
        temporary = directory / "meta.json.new"
        temporary.write_text(json.dumps(entry.to_meta()))
        os.replace(temporary, directory / "meta.json")
        (directory / "used").touch()
        os.utime(directory / "used", (entry.built_at, entry.built_at))
        directory.chmod(0o755)

    def _discard(self, key: str) -> None:
        directory = self.root / check_key(key)
        if directory.exists() or directory.is_symlink():
            trash = self.root / f".trash-{key}-{uuid.uuid4().hex[:8]}"
            os.rename(directory, trash)
            remove_tree(trash)

    def discard_build(self, build: Path) -> None:
        remove_tree(build)

    # -- eviction -------------------------------------------------------------

    def remove(self, key: str) -> bool:
        """Remove ``key``'s entry unless a replay holds it; True if removed."""
        fd = self._lock_fd(key)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            self._discard(key)
            return True
        finally:
            os.close(fd)

    def evict(
        self, *, keep: frozenset[str] = frozenset(), now: float | None = None
    ) -> list[str]:
        """Bring the cache under its cap, least recently used first, and forget
        failures older than the failure time. Entries in use, or in ``keep``,
        stay. Returns the keys removed."""
        now = time.time() if now is None else now
        removed = []
        entries = self.entries()
        for entry in entries:
            stale = entry.state == FAILED and not self.failure_fresh(entry, now)
            if stale and entry.key not in keep and self.remove(entry.key):
                removed.append(entry.key)
        ready = [e for e in entries if e.state == READY]
        total = sum(e.size_bytes for e in ready)
        for entry in ready:
            if total <= self.max_bytes:
                break
            if entry.key in keep:
                continue
            if self.remove(entry.key):
                removed.append(entry.key)
                total -= entry.size_bytes
        self._sweep_leftovers(now)
        return removed

    def _sweep_leftovers(self, now: float) -> None:
        """Remove builds and trash a crashed worker left (older than a day)."""
        for path in self.root.glob(".*-*"):
            if not path.name.startswith((".build-", ".trash-")):
                continue
            with contextlib.suppress(OSError):
                if now - path.lstat().st_mtime > 86_400:
                    remove_tree(path)


def _flock(fd: int, operation: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LockTimeout(
                    f"an environment lock was held for more than {timeout:g} s"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
