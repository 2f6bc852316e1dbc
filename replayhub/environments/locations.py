"""Where the environment store keeps its files: a directory every worker host
mounts (``REPLAYHUB_ENV_STORE_DIR``), or a bucket of an S3-compatible object
store (``REPLAYHUB_ENV_STORE_URL=s3://bucket/prefix``, through boto3).

A location holds named files and does three things: :meth:`place` a file
written locally (a reader sees the whole file or none: a rename in a
directory, one PUT in a bucket), :meth:`read` a small one whole, and
:meth:`fetched` a large one as a local file to read. What the bytes are
and whether they can be trusted is :mod:`replayhub.environments.store`'s
business: a location only moves them, and stops at a byte cap before it has
read more.

The bucket's credentials come from boto3's own chain (``AWS_ACCESS_KEY_ID``
and ``AWS_SECRET_ACCESS_KEY``, a profile, an instance role), never from
ReplayHub's settings, so none is in a page, a log line or a record; its
endpoint, for a store other than AWS's (MinIO, Ceph, R2…), is
``REPLAYHUB_ENV_STORE_ENDPOINT``.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol
from urllib.parse import urlsplit

from django.conf import settings

_CHUNK = 1 << 20
# A bucket's name (S3's own rule, loosely) and a prefix of plain path parts.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\Z")
_PREFIX = re.compile(r"([A-Za-z0-9._-]+/)*\Z")


class TooLarge(Exception):
    """A file over the cap it was to be read under."""


class Location(Protocol):
    def place(self, part: Path, name: str) -> None: ...

    def read(self, name: str, max_bytes: int) -> bytes | None: ...

    def fetched(
        self, name: str, scratch: Path, max_bytes: int
    ) -> contextlib.AbstractContextManager[IO[bytes] | None]: ...

    def scratch(self) -> contextlib.AbstractContextManager[Path]: ...


@dataclass(frozen=True)
class Directory:
    """A directory: files written beside their final name, then renamed."""

    root: Path

    def __str__(self) -> str:
        return str(self.root)

    def path(self, name: str) -> Path:
        return self.root / name

    @contextlib.contextmanager
    def scratch(self) -> Iterator[Path]:
        # Parts are written in the store itself: the rename is then atomic.
        self.root.mkdir(parents=True, exist_ok=True)
        yield self.root

    def place(self, part: Path, name: str) -> None:
        os.replace(part, self.path(name))

    def read(self, name: str, max_bytes: int) -> bytes | None:
        with self.fetched(name, self.root, max_bytes) as handle:
            return None if handle is None else handle.read()

    @contextlib.contextmanager
    def fetched(
        self, name: str, scratch: Path, max_bytes: int
    ) -> Iterator[IO[bytes] | None]:
        try:
            fd = os.open(self.path(name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            yield None
            return
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise OSError(f"{name} is not a file")
            if info.st_size > max_bytes:
                raise TooLarge(f"{name} has {info.st_size} bytes, over {max_bytes}")
            yield handle


@dataclass(frozen=True)
class Bucket:
    """A bucket (and a prefix in it) of an S3-compatible object store."""

    name: str
    prefix: str = ""
    endpoint: str = ""
    _client: list[Any] = field(default_factory=list, compare=False, repr=False)

    def __str__(self) -> str:
        return f"s3://{self.name}/{self.prefix}"

    @property
    def client(self) -> Any:
        if not self._client:
            import boto3
            from botocore.config import Config

            config = Config(
                connect_timeout=5,
                read_timeout=60,
                retries={"max_attempts": 3, "mode": "standard"},
            )
            self._client.append(
                boto3.client("s3", endpoint_url=self.endpoint or None, config=config)
            )
        return self._client[0]

    @contextlib.contextmanager
    def scratch(self) -> Iterator[Path]:
        work = Path(settings.REPLAYHUB_WORK_DIR)
        work.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="env-store-", dir=work) as made:
            yield Path(made)

    def place(self, part: Path, name: str) -> None:
        self.client.upload_file(str(part), self.name, self.prefix + name)
        part.unlink()

    def read(self, name: str, max_bytes: int) -> bytes | None:
        with self.scratch() as scratch, self.fetched(name, scratch, max_bytes) as got:
            return None if got is None else got.read()

    @contextlib.contextmanager
    def fetched(
        self, name: str, scratch: Path, max_bytes: int
    ) -> Iterator[IO[bytes] | None]:
        client = self.client
        try:
            response = client.get_object(Bucket=self.name, Key=self.prefix + name)
        except client.exceptions.NoSuchKey:
            yield None
            return
        body = response["Body"]
        try:
            size = int(response.get("ContentLength", 0))
            if size > max_bytes:
                raise TooLarge(f"{name} has {size} bytes, over {max_bytes}")
            with tempfile.TemporaryFile(dir=scratch) as local:
                taken = 0
                while chunk := body.read(_CHUNK):
                    taken += len(chunk)
                    if taken > max_bytes:
                        raise TooLarge(f"{name} has over {max_bytes} bytes")
                    local.write(chunk)
                local.seek(0)
                yield local
        finally:
            body.close()


def parse_url(url: str, *, endpoint: str = "") -> Bucket:
    """``s3://bucket/prefix`` as a :class:`Bucket`; ValueError saying why
    not."""
    parts = urlsplit(url)
    if parts.scheme != "s3":
        raise ValueError(f"{url!r} is not an s3:// URL")
    if not _BUCKET.match(parts.netloc):
        raise ValueError(f"{parts.netloc!r} is not a bucket name")
    prefix = parts.path.lstrip("/")
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    plain = _PREFIX.match(prefix) and not {".", ".."} & set(prefix.split("/"))
    if parts.query or parts.fragment or not plain:
        raise ValueError(f"{url!r}: a prefix is plain path parts, no query")
    return Bucket(parts.netloc, prefix, endpoint)


def configured() -> Location | None:
    """The store the settings name: a bucket when ``REPLAYHUB_ENV_STORE_URL``
    is set, else the directory ``REPLAYHUB_ENV_STORE_DIR``; None when neither
    is (each host builds its own)."""
    url = str(getattr(settings, "REPLAYHUB_ENV_STORE_URL", "") or "")
    if url:
        endpoint = str(getattr(settings, "REPLAYHUB_ENV_STORE_ENDPOINT", "") or "")
        return parse_url(url, endpoint=endpoint)
    directory = str(getattr(settings, "REPLAYHUB_ENV_STORE_DIR", "") or "")
    return Directory(Path(directory)) if directory else None


def location_of(root: Path | str | Location) -> Location:
    """A directory given as a path, or a location as it is."""
    if isinstance(root, str | Path):
        return Directory(Path(root))
    return root
