"""The shared environment store: an environment built on one worker host,
fetched by the others instead of running the setup phase again.

Layout in the store (a directory every worker host mounts, NFS or the like,
or a bucket of an S3-compatible object store: :mod:`.locations`)::

    <key>.tar.gz     the environment's tree
    <key>.json       its manifest: sha256 and size of the archive, the setup's
                     seconds; written last
    .<key>.*.part    a publication in progress (a directory's)

Each file is written under a temporary name, synced and renamed into place
(or sent in one PUT), so a reader sees a whole file or none, and a manifest
only once its archive is there. Two hosts publishing one key at once may
leave one's manifest beside the other's archive: the digest then differs, the
next host to miss it builds and publishes again, which repairs it. Workers
never evict the store.

Compression: gzip at level 1. On a 500 MB virtualenv (28,659 files) the plain
tar was 495 MB and the gzip 157 MB, written in about the same time (11-15 s
either way: reading the tree dominates); inflating costs a second or two of
CPU per 500 MB, less than moving three times the bytes over a shared mount.
Level 6 saved another 12% for twice the writing time. Fetching that
virtualenv back took 15 s on a loaded 2-core host, creating its files most of
it; a 26 MB one with pip, made in 6.7 s, came back in 1.5 s.

An archive is untrusted bytes (the setup phase ran the project's code, and
whoever can write the store can replace it): its digest is checked before it
is read, and :func:`extract` refuses absolute names, ``..``, devices, FIFOs,
sparse files, setuid and setgid bits, a name below anything but a directory it
made, and hard links to anything but a file it extracted. It creates files
with ``O_EXCL | O_NOFOLLOW``, so symlinks (kept as they are: a virtualenv's
``python`` names ``/usr/bin/python3``) are never followed, and it stops at a
byte cap and an entry cap. Trouble of any kind is one log line, and the
caller builds.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import logging
import os
import re
import stat
import tarfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from replayhub.environments.cache import READY, CacheEntry, EnvCache, check_key
from replayhub.environments.locations import (
    Location,
    TooLarge,
    location_of,
)
from replayhub.lib import boundedjson
from replayhub.lib.fstree import chown_tree

log = logging.getLogger(__name__)

FORMAT = 1
SUFFIX = ".tar.gz"
GZIP_LEVEL = 1
# Every entry counts this much against the byte cap besides its data (its
# header), so a million empty files are not free.
ENTRY_BYTES = 512
# A pax record or GNU long name larger than this is refused before tarfile
# reads it into memory.
MAX_HEADER_BYTES = 1 << 20
MAX_MANIFEST_BYTES = 64 * 1024
_CHUNK = 1 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
_META_TYPES = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)


class ArchiveRefused(Exception):
    """An archive missing, partial, corrupt, or unsafe to extract."""


@dataclass(frozen=True)
class Manifest:
    key: str
    sha256: str
    size: int
    setup_seconds: float = 0.0
    label: str = ""
    published_at: float = 0.0
    format: int = FORMAT


def archive_name(key: str) -> str:
    return f"{check_key(key)}{SUFFIX}"


def manifest_name(key: str) -> str:
    return f"{check_key(key)}.json"


def archive_path(root: Path, key: str) -> Path:
    """Where a directory store keeps ``key``'s archive."""
    return Path(root) / archive_name(key)


def manifest_path(root: Path, key: str) -> Path:
    return Path(root) / manifest_name(key)


# -- publishing ----------------------------------------------------------------


def publish(
    root: Path | Location,
    key: str,
    env_dir: Path,
    *,
    setup_seconds: float,
    label: str,
) -> Manifest:
    """Archive ``env_dir`` as ``key``'s environment in the store, replacing
    what was there; raises on any trouble (nothing is left half written)."""
    where = location_of(root)
    with where.scratch() as scratch:
        part = scratch / f".{check_key(key)}.{uuid.uuid4().hex[:8]}.part"
        try:
            return _publish(where, part, key, env_dir, setup_seconds, label)
        finally:
            with contextlib.suppress(FileNotFoundError):
                part.unlink()


def _publish(
    where: Location,
    part: Path,
    key: str,
    env_dir: Path,
    setup_seconds: float,
    label: str,
) -> Manifest:
    with open(part, "xb") as raw:
        writer = _Hashing(raw)
        with (
            gzip.GzipFile(
                fileobj=writer, mode="wb", compresslevel=GZIP_LEVEL, mtime=0
            ) as packed,
            tarfile.open(fileobj=packed, mode="w|", format=tarfile.PAX_FORMAT) as tar,
        ):
            for name in sorted(os.listdir(env_dir)):
                tar.add(Path(env_dir) / name, arcname=name, filter=_publishable)
        os.fchmod(raw.fileno(), 0o644)
        raw.flush()
        os.fsync(raw.fileno())
    where.place(part, archive_name(key))
    manifest = Manifest(
        key=key,
        sha256=writer.digest.hexdigest(),
        size=writer.size,
        setup_seconds=round(setup_seconds, 3),
        label=label,
        published_at=time.time(),
    )
    _write_synced(part, json.dumps(asdict(manifest)).encode())
    where.place(part, manifest_name(key))
    return manifest


def share_from_cache(
    root: Path | Location, cache: EnvCache, key: str
) -> Manifest | None:
    """:func:`publish` ``key``'s entry of ``cache``, any trouble one log line:
    never raises (a replay goes on with its local environment)."""
    started = time.monotonic()
    try:
        entry = cache.get(key)
        if entry is None or entry.state != READY:
            raise ArchiveRefused("the cache has no ready entry")
        manifest = publish(
            root,
            key,
            cache.env_dir(key),
            setup_seconds=entry.setup_seconds,
            label=entry.label,
        )
    except Exception as error:
        log.warning(
            "environment %s not published to the store %s: %s",
            key[:12],
            root,
            _one_line(error),
        )
        return None
    log.info(
        "environment %s published to the store (%d bytes, %.1f s)",
        key[:12],
        manifest.size,
        time.monotonic() - started,
    )
    return manifest


def _publishable(info: tarfile.TarInfo) -> tarfile.TarInfo:
    if info.ischr() or info.isblk() or info.isfifo():
        raise ArchiveRefused(f"{info.name!r} is a device or a FIFO")
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    # No setuid, setgid or sticky bit: the reader refuses the first two.
    info.mode &= 0o777
    return info


def _write_synced(part: Path, data: bytes) -> None:
    with open(part, "xb") as handle:
        handle.write(data)
        os.fchmod(handle.fileno(), 0o644)
        handle.flush()
        os.fsync(handle.fileno())


# -- fetching ------------------------------------------------------------------


def read_manifest(root: Path | Location, key: str) -> Manifest | None:
    """``key``'s manifest; None when the store has none, :class:`ArchiveRefused`
    when it is unreadable or describes something else."""
    try:
        raw = location_of(root).read(manifest_name(key), MAX_MANIFEST_BYTES)
    except (OSError, TooLarge) as error:
        raise ArchiveRefused(f"its manifest could not be read: {error}") from error
    if raw is None:
        return None
    try:
        manifest = Manifest(**boundedjson.loads(raw, max_bytes=MAX_MANIFEST_BYTES))
    except (ValueError, TypeError) as error:
        raise ArchiveRefused("its manifest is not a manifest") from error
    if (
        manifest.key != key
        or manifest.format != FORMAT
        or not isinstance(manifest.sha256, str)
        or not _SHA256.match(manifest.sha256)
        or not isinstance(manifest.size, int)
        or manifest.size < 0
        or not isinstance(manifest.setup_seconds, int | float)
    ):
        raise ArchiveRefused("its manifest does not describe this environment")
    return manifest


def unpack(
    where: Location,
    key: str,
    dest: Path,
    manifest: Manifest,
    *,
    max_bytes: int,
    max_entries: int,
) -> int:
    """Check ``key``'s archive against ``manifest`` (size, then sha256), then
    :func:`extract` it into the empty directory ``dest``; the bytes taken."""
    if manifest.size > max_bytes:
        raise ArchiveRefused(f"the archive is over the cap ({max_bytes} bytes)")
    with (
        where.scratch() as scratch,
        where.fetched(archive_name(key), scratch, max_bytes) as raw,
    ):
        if raw is None:
            raise ArchiveRefused("its manifest is there but not its archive")
        digest, size = hashlib.sha256(), 0
        while chunk := raw.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
        if size != manifest.size:
            raise ArchiveRefused(
                f"the archive has {size} bytes, its manifest says {manifest.size}"
            )
        if digest.hexdigest() != manifest.sha256:
            raise ArchiveRefused("the archive's sha256 differs from its manifest's")
        raw.seek(0)
        with gzip.GzipFile(fileobj=raw, mode="rb") as packed:
            return extract(packed, dest, max_bytes=max_bytes, max_entries=max_entries)


def fetch(
    root: Path | Location,
    key: str,
    dest: Path,
    *,
    max_bytes: int,
    max_entries: int,
    owner: tuple[int, int] | None = None,
) -> Manifest | None:
    """Extract ``key``'s environment from the store into the empty directory
    ``dest`` (then owned by ``owner`` when given); None, with one log line,
    when the store has none or it was refused (``dest`` is then the caller's
    to discard). Never raises."""
    where = location_of(root)
    try:
        manifest = read_manifest(where, key)
        if manifest is None:
            log.info("environment %s is not in the store %s", key[:12], where)
            return None
        unpack(
            where,
            key,
            dest,
            manifest,
            max_bytes=max_bytes,
            max_entries=max_entries,
        )
        if owner is not None:
            chown_tree(dest, *owner)
    except Exception as error:
        log.warning(
            "environment %s from the store %s refused, building it instead: %s",
            key[:12],
            root,
            _one_line(error),
        )
        return None
    return manifest


def fetch_into_cache(
    cache: EnvCache,
    root: Path | Location,
    key: str,
    label: str,
    files: int,
    owner: tuple[int, int] | None,
) -> Manifest | None:
    """:func:`fetch` ``key`` into a new build of ``cache`` (whose exclusive
    lock the caller holds) and commit it as a ready entry labelled ``label``:
    at most ``files`` entries and the cache's byte cap, owned by ``owner``
    when given. None when the store had none to give."""
    build = cache.new_build(key)
    try:
        manifest = fetch(
            root,
            key,
            build / "env",
            max_bytes=cache.max_bytes,
            max_entries=files,
            owner=owner,
        )
    except BaseException:
        cache.discard_build(build)
        raise
    if manifest is None:
        cache.discard_build(build)
        return None
    cache.commit(
        build,
        CacheEntry(
            key=key,
            state=READY,
            built_at=time.time(),
            setup_seconds=manifest.setup_seconds,
            label=label,
        ),
    )
    log.info("environment %s fetched from the store for %s", key[:12], label)
    cache.evict(keep=frozenset({key}))
    return manifest


# -- extraction ----------------------------------------------------------------

_DIR, _FILE, _SYMLINK = "directory", "file", "symlink"


class _Header(tarfile.TarInfo):
    """A tar header whose metadata records are bounded before they are read."""

    def _proc_member(self, tarfile: Any) -> Any:
        if self.type in _META_TYPES and self.size > MAX_HEADER_BYTES:
            raise ArchiveRefused(f"a header record of {self.size} bytes")
        return super()._proc_member(tarfile)  # type: ignore[misc]


def extract(
    stream: IO[bytes] | gzip.GzipFile, dest: Path, *, max_bytes: int, max_entries: int
) -> int:
    """Extract the tar read from ``stream`` into the empty directory ``dest``
    (see the module docstring for what is refused); the bytes it counted.
    Raises :class:`ArchiveRefused`, or ``OSError``/``tarfile.TarError`` when the
    bytes are broken; ``dest`` is then the caller's to discard."""
    dest = Path(dest)
    seen: dict[str, str] = {"": _DIR}
    directories: list[tuple[str, tarfile.TarInfo]] = []
    total = entries = 0
    with tarfile.open(fileobj=stream, mode="r|", tarinfo=_Header) as tar:
        for member in tar:
            entries += 1
            total += max(member.size, 0) + ENTRY_BYTES
            if entries > max_entries or total > max_bytes:
                raise ArchiveRefused(
                    f"it holds more than {max_entries} entries or {max_bytes} bytes"
                )
            name = member_name(member.name)
            if not name:
                continue  # the root itself
            if name in seen:
                raise ArchiveRefused(f"{name!r} appears twice")
            if member.mode & (stat.S_ISUID | stat.S_ISGID):
                raise ArchiveRefused(f"{name!r} has a setuid or setgid bit")
            _make_parents(name, seen, dest)
            target = dest / name
            if member.type in (tarfile.REGTYPE, tarfile.AREGTYPE):
                _write_file(tar, member, target)
                seen[name] = _FILE
            elif member.isdir():
                target.mkdir(mode=0o700)
                seen[name] = _DIR
                directories.append((name, member))
            elif member.issym():
                if not member.linkname or "\0" in member.linkname:
                    raise ArchiveRefused(f"{name!r} is a symlink to nothing")
                os.symlink(member.linkname, target)
                os.utime(target, (member.mtime,) * 2, follow_symlinks=False)
                seen[name] = _SYMLINK
            elif member.islnk():
                source = member_name(member.linkname)
                if seen.get(source) != _FILE:
                    raise ArchiveRefused(
                        f"{name!r} is a hard link to {member.linkname!r}, "
                        "not to a file extracted before it"
                    )
                os.link(dest / source, target, follow_symlinks=False)
                seen[name] = _FILE
            else:
                raise ArchiveRefused(f"{name!r} is a device, a FIFO or a sparse file")
    # Deepest first, once nothing more is written into them.
    for name, member in reversed(directories):
        os.chmod(dest / name, member.mode & 0o777)
        os.utime(dest / name, (member.mtime,) * 2, follow_symlinks=False)
    return total


def member_name(raw: str) -> str:
    """An archive name as a path relative to the target (pure); refused
    when absolute or climbing out with ``..``."""
    if "\0" in raw:
        raise ArchiveRefused(f"{raw!r} holds a NUL")
    if raw.startswith("/"):
        raise ArchiveRefused(f"{raw!r} is an absolute path")
    parts = [part for part in raw.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ArchiveRefused(f"{raw!r} climbs out with '..'")
    return "/".join(parts)


def _make_parents(name: str, seen: dict[str, str], dest: Path) -> None:
    """Make the directories above ``name`` that the archive did not list;
    refused when one of them is something else (a symlink above all)."""
    missing = []
    parent = name.rpartition("/")[0]
    while parent not in seen:
        missing.append(parent)
        parent = parent.rpartition("/")[0]
    if seen[parent] != _DIR:
        raise ArchiveRefused(f"{name!r} is below {parent!r}, a {seen[parent]}")
    for directory in reversed(missing):
        (dest / directory).mkdir(mode=0o755)
        seen[directory] = _DIR


def _write_file(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    source = tar.extractfile(member)
    assert source is not None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(target, flags, 0o600)
    with os.fdopen(fd, "wb") as handle:
        left = member.size
        while left > 0:
            chunk = source.read(min(left, _CHUNK))
            if not chunk:
                raise ArchiveRefused(f"{member.name!r} ends early")
            handle.write(chunk)
            left -= len(chunk)
        os.fchmod(fd, member.mode & 0o777)
        handle.flush()
        os.utime(fd, (member.mtime,) * 2)


class _Hashing:
    """A file written through, counting and hashing what passes."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self.raw.write(data)

    def flush(self) -> None:
        self.raw.flush()


def _one_line(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return text.replace("\n", "\\n")[:300]
