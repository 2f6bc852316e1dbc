"""The runner contract shared by every sandbox backend.

A runner takes a `SandboxSpec` (what to run, where, with which limits) and returns a
`SandboxOutcome`. There is no host fallback: a runner that cannot isolate the command
raises `SandboxUnavailable` instead of running it.
"""

from __future__ import annotations

import importlib
import posixpath
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

WORKSPACE = "/workspace"
HOME = "/home/sandbox"
# Mount points inside the sandbox (fresh size-capped tmpfs), not host temp dirs.
TMP = "/tmp"  # noqa: S108

# Every sandboxed command starts from exactly this environment; `SandboxSpec.env`
# is layered on top. Nothing of the worker's own environment is ever inherited.
BASE_ENV: Mapping[str, str] = MappingProxyType(
    {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": HOME,
        "LANG": "C.UTF-8",
        "TMPDIR": TMP,
    }
)

LIMIT_NAMES = frozenset(
    {"wall_time", "memory", "processes", "cpu_time", "file_size", "disk"}
)

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# Where a recorded working directory or HOME may not be placed: the system's
# folders and the sandbox's own mount points (``/lib*`` and ``/replayhub*``
# are matched on their first component's start, see ``place_refusal``).
SYSTEM_FOLDERS = (
    "/usr",
    "/bin",
    "/sbin",
    "/etc",
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/boot",
    "/var/lib",
    TMP,
    HOME,
)
PLACE_MAX_BYTES = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def place_refusal(path: object) -> str:
    """Why ``path`` cannot be where the workspace or HOME is mounted; "" when
    it can: a plain, normalised absolute path of at most 4096 bytes, with no
    control character, outside :data:`SYSTEM_FOLDERS`, ``/lib*`` and
    ``/replayhub*`` (the sandbox's own binds)."""
    if not isinstance(path, str) or not path.startswith("/") or path == "/":
        return "not an absolute path"
    if _CONTROL.search(path):
        return "it holds a control character"
    if len(path.encode("utf-8", "surrogatepass")) > PLACE_MAX_BYTES:
        return f"longer than {PLACE_MAX_BYTES} bytes"
    if posixpath.normpath(path) != path or "/../" in f"{path}/":
        return "not a normalised path"
    first = path.split("/")[1]
    inside = [f for f in SYSTEM_FOLDERS if path == f or path.startswith(f + "/")]
    if inside or first.startswith(("lib", "replayhub")):
        return f"inside the system folder /{first}"
    return ""


ZONEINFO = "/usr/share/zoneinfo"
_ZONE_NAME = re.compile(r"[A-Za-z0-9_+-]+(?:/[A-Za-z0-9_+-]+)*\Z")


def zone_link(system: Path, tz: str | None) -> str | None:
    """Where /etc/localtime links to for ``$TZ``: the zone's file under
    :data:`ZONEINFO` when ``system`` has it, else None. Programs that read
    the zone's name from that link rather than ``$TZ`` (Codex does) then
    see the same zone as the rest."""
    if not tz or len(tz) > 64 or not _ZONE_NAME.match(tz):
        return None
    zones = (system / ZONEINFO.lstrip("/")).resolve()
    try:
        found = (zones / tz).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not found.is_file() or not found.is_relative_to(zones):
        return None
    return f"{ZONEINFO}/{tz}"


def nested(inner: str, outer: str) -> bool:
    """Whether path ``inner`` is ``outer`` or inside it."""
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


class SandboxUnavailable(Exception):
    """No isolating runner can run here; the message is one sentence saying why."""


@dataclass(frozen=True)
class Limits:
    """Resource caps for one run. `None` leaves that resource uncapped."""

    wall_seconds: float = 600.0
    memory_bytes: int | None = 2 * 1024**3
    max_processes: int | None = 256
    cpu_seconds: int | None = None
    file_size_bytes: int | None = 1024**3
    open_files: int = 1024
    output_bytes: int = 1024**2  # head + tail kept in total
    tmpfs_bytes: int = 256 * 1024**2
    # What the workspace and the writable binds may hold on the host's disk:
    # bytes allocated, and entries of any kind.
    disk_bytes: int | None = None
    disk_files: int | None = None

    def __post_init__(self) -> None:
        if not self.wall_seconds > 0:
            raise ValueError("wall_seconds must be positive")
        for name in (
            "memory_bytes",
            "max_processes",
            "cpu_seconds",
            "file_size_bytes",
            "disk_bytes",
            "disk_files",
        ):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive or None")
        for name in ("open_files", "tmpfs_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.output_bytes < 0:
            raise ValueError("output_bytes must not be negative")


@dataclass(frozen=True)
class Bind:
    """A host path made visible inside the sandbox, read-only unless `writable`."""

    source: Path
    dest: str
    writable: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", Path(self.source))
        if not self.source.is_absolute():
            raise ValueError(f"bind source must be an absolute path: {self.source}")
        # A relative or non-normalised destination ("../etc", "/a/../usr") could
        # land the bind somewhere other than where the spec says it is.
        if (
            not self.dest.startswith("/")
            or posixpath.normpath(self.dest) != self.dest
            or self.dest == "/"
        ):
            raise ValueError(
                f"bind dest must be a normalised absolute path: {self.dest}"
            )


_LOGIN_SHELL = re.compile(r"/[A-Za-z0-9_./+-]{1,200}\Z")


def passwd(uid: int, gid: int, home: str, shell: str) -> str:
    """The sandbox's /etc/passwd: its user's home is ``$HOME``'s place and its
    login shell ``shell`` when that is a plain path, else /bin/sh."""
    if not _LOGIN_SHELL.match(shell) or "/.." in shell or ":" in home:
        shell = "/bin/sh"
    return (
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        f"sandbox:x:{uid}:{gid}:sandbox:{home}:{shell}\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    )


@dataclass(frozen=True)
class SandboxSpec:
    """What to run. `argv` is executed as-is, never through a shell.

    `env` is added to `BASE_ENV` (a key present in both takes the spec's value);
    `workspace` is bound writable at `workspace_at` (`WORKSPACE` unless a
    replay places it where the original ran) and is the working directory
    (`$PWD`); an empty size-capped HOME is mounted at `home`, which `$HOME`
    names. Both pass :func:`place_refusal`, HOME never holds the workspace's
    mount point's parent chain the other way round (the workspace may sit
    inside HOME, HOME not inside the workspace), and no bind lands on either.
    """

    argv: tuple[str, ...]
    workspace: Path
    env: Mapping[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    binds: tuple[Bind, ...] = ()
    network: str = "none"
    workspace_at: str = WORKSPACE
    home: str = HOME
    # The zone /etc/localtime names when it is not $TZ's (the original's
    # system zone, which some agents read instead of $TZ).
    zone: str | None = None
    # The password database's shell when it is not ``$SHELL`` (agents read
    # one or the other: Codex the passwd entry, Claude Code the variable).
    login_shell: str | None = None
    # Set by the caller to end the run early (the outcome says "stopped").
    stop: threading.Event | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        argv = tuple(self.argv)
        if not argv or not all(isinstance(arg, str) for arg in argv):
            raise ValueError("argv must be a non-empty sequence of strings")
        if any("\0" in arg for arg in argv):
            raise ValueError("argv must not contain NUL bytes")
        object.__setattr__(self, "argv", argv)
        object.__setattr__(self, "workspace", Path(self.workspace))
        if not self.workspace.is_absolute():
            raise ValueError(f"workspace must be an absolute path: {self.workspace}")
        env = dict(self.env)
        for key, value in env.items():
            if not _ENV_NAME.match(key):
                raise ValueError(f"invalid environment variable name: {key!r}")
            if not isinstance(value, str) or "\0" in value:
                raise ValueError(
                    f"environment value for {key} must be a str without NUL"
                )
        # Frozen all the way down: the spec can be shared and logged safely.
        object.__setattr__(self, "env", MappingProxyType(env))
        object.__setattr__(self, "binds", tuple(self.binds))
        self._check_places()
        if self.network != "none":
            raise ValueError(
                f"network mode {self.network!r} is not supported; only 'none' is"
            )

    def _check_places(self) -> None:
        places = {"workspace_at": self.workspace_at, "home": self.home}
        for name, place in places.items():
            if place != {"workspace_at": WORKSPACE, "home": HOME}[name]:
                why = place_refusal(place)
                if why:
                    raise ValueError(f"{name} {place!r} cannot be used: {why}")
        if nested(self.home, self.workspace_at):
            raise ValueError("home must not be the workspace or inside it")
        for bind in self.binds:
            for name, place in places.items():
                if nested(bind.dest, place) or nested(place, bind.dest):
                    raise ValueError(f"bind {bind.dest} overlaps {name} {place}")

    def localtime(self) -> str | None:
        """The zone /etc/localtime is to name: :attr:`zone`, else ``$TZ``'s."""
        return self.zone or self.full_env().get("TZ")

    def shell(self) -> str:
        """The login shell the sandbox's passwd names: :attr:`login_shell`,
        else ``$SHELL``'s (checked by :func:`passwd`)."""
        return self.login_shell or self.full_env().get("SHELL", "")

    def full_env(self) -> dict[str, str]:
        where = {"HOME": self.home, "PWD": self.workspace_at}
        return {**BASE_ENV, **where, **self.env}


@dataclass(frozen=True)
class SandboxOutcome:
    """How a run ended.

    `exit_code` is None only when the runner killed the run (wall clock); a command
    killed by a signal otherwise reports 128 + the signal number, as a shell would.
    `limit_fired` names the most specific limit that was hit ("" when none was);
    "stopped" when the caller ended the run (``SandboxSpec.stop``).
    """

    exit_code: int | None
    output: str
    output_truncated: bool
    timed_out: bool
    limit_fired: str
    duration_s: float
    limit_backend: str = ""
    # What the limit that fired measured, when the runner knows ("" otherwise).
    limit_detail: str = ""
    # Which runner ran it and how it isolates: "bwrap" (namespaces and a
    # seccomp filter on the host kernel), "oci" (a container engine), or
    # "gvisor" (a user-space kernel).
    runner: str = ""
    isolation: str = ""


ISOLATIONS = ("bwrap", "oci", "gvisor")


class Runner(Protocol):
    name: str
    # One of ISOLATIONS.
    isolation: str

    def check(self) -> None:
        """Raise SandboxUnavailable with a clear reason if this runner cannot run."""

    def run(self, spec: SandboxSpec) -> SandboxOutcome: ...

    def owner(self) -> tuple[int, int] | None:
        """The host uid and gid owning what a run left in its workspace, when
        not the worker's own; capture reads the workspace as them."""


# name -> "module:attribute"; imported lazily so a backend's module is only loaded
# when it is asked for.
_RUNNERS = {
    "bwrap": "replayhub.sandbox.bwrap:BwrapRunner",
    "docker": "replayhub.sandbox.docker:DockerRunner",
    "gvisor": "replayhub.sandbox.gvisor:GvisorRunner",
}


RUNNER_KINDS = tuple(_RUNNERS)


def get_runner(name: str = "bwrap", **options) -> Runner:
    """Return a fresh runner by name. It is not checked yet; `run` checks it.

    ``options`` go to the runner's constructor (the Docker runner's ``image``).
    """
    try:
        target = _RUNNERS[name]
    except KeyError:
        known = ", ".join(sorted(_RUNNERS))
        raise ValueError(f"unknown sandbox runner {name!r} (known: {known})") from None
    module_name, _, attribute = target.partition(":")
    runner_class = getattr(importlib.import_module(module_name), attribute)
    return runner_class(**options)
