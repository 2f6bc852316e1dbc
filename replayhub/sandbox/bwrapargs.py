"""bubblewrap's option list for a run: namespaces, mounts, environment, seccomp.

Pure construction, nothing is launched here: the isolation flags every bwrap
call shares, the read-only system (the host's /usr, /bin, /lib... or an
unpacked image's), the synthetic and bound /etc files, the size-capped tmpfs,
the workspace and the caller's binds. File contents (the synthetic /etc files,
the seccomp filter, the option list itself) go to bwrap as memfds, so nothing
is written to disk and nothing of the spec shows in a process's command line.
:mod:`replayhub.sandbox.bwrap` launches the result.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from replayhub.sandbox.base import TMP, SandboxSpec, passwd, zone_link
from replayhub.sandbox.seccomp import filter_bpf

INNER_UID = 1000
INNER_GID = 1000
HOSTNAME = "sandbox"
SHM = "/dev/shm"  # noqa: S108 - the sandbox's own size-capped tmpfs

_ROOT_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# Host /etc entries the toolchain needs; everything else (shadow, keys, service
# configs) is simply not there.
_HOST_ETC = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates",
    "/etc/localtime",
    "/etc/os-release",
)
LOCALTIME = "/etc/localtime"
_SYNTHETIC_ETC = {
    "/etc/group": f"root:x:0:\nsandbox:x:{INNER_GID}:\nnogroup:x:65534:\n",
    "/etc/hosts": (
        f"127.0.0.1\tlocalhost\n127.0.1.1\t{HOSTNAME}\n::1\tlocalhost ip6-localhost\n"
    ),
    "/etc/hostname": f"{HOSTNAME}\n",
    "/etc/nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
}


def isolation_flags() -> list[str]:
    # --unshare-all only *tries* a user namespace; --unshare-user makes it
    # mandatory, which --disable-userns requires.
    return [
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
    ]


def root_links(system: Path = Path("/")) -> list[str]:
    """Mirror the system's /bin, /lib... : symlinks (merged /usr) or read-only
    dirs; ``system`` is the host's root or an unpacked image's."""
    args: list[str] = []
    for name in _ROOT_LINKS:
        path = system / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), f"/{name}"]
        elif path.is_dir():
            args += ["--ro-bind", str(path), f"/{name}"]
    return args


def host_etc(system: Path = Path("/")) -> Iterator[str]:
    """The /etc paths to bind (as paths inside), when ``system`` has them."""
    yield from _HOST_ETC
    # Debian's sitecustomize.py is a symlink into /etc/python3.X.
    for path in sorted((system / "etc").glob("python3*")):
        yield f"/etc/{path.name}"


def memfd(name: str, data: bytes, fds: list[int]) -> int:
    """An anonymous in-memory file holding `data`, rewound, for bwrap to read.

    A memfd never blocks however large `data` is (a pipe would above 64 KiB)
    and never touches the disk.
    """
    fd = os.memfd_create(name.replace("/", "-"))
    fds.append(fd)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def nul_join(args: list[str]) -> bytes:
    return b"".join(arg.encode() + b"\0" for arg in args)


def probe_args(fds: list[int]) -> list[str]:
    """bwrap's options for the availability probe: the isolation and seccomp
    filter of a real run around the host's /usr, running ``true``."""
    return [
        *isolation_flags(),
        "--seccomp",
        str(memfd("seccomp", filter_bpf(), fds)),
        "--ro-bind",
        "/usr",
        "/usr",
        *root_links(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--",
        "true",
    ]


def bwrap_args(spec: SandboxSpec, fds: list[int], root: Path | None) -> list[str]:
    """bwrap's options for `spec`, to pass through a memfd with ``--args``.

    ``root`` is an unpacked image's root filesystem to run on, or None for
    the host's; the memfds made for synthetic /etc files and the seccomp
    filter are appended to `fds`, which the caller closes.
    """
    limits = spec.limits
    args = [
        *isolation_flags(),
        "--uid",
        str(INNER_UID),
        "--gid",
        str(INNER_GID),
        "--hostname",
        HOSTNAME,
        "--clearenv",
    ]
    for key, value in spec.full_env().items():
        args += ["--setenv", key, value]
    system = root or Path("/")
    args += ["--ro-bind", str(system / "usr"), "/usr", *root_links(system)]
    users = {"/etc/passwd": passwd(INNER_UID, INNER_GID, spec.home, spec.shell())}
    for dest, content in {**users, **_SYNTHETIC_ETC}.items():
        fd = memfd(dest, content.encode(), fds)
        args += ["--perms", "0644", "--ro-bind-data", str(fd), dest]
    zone = zone_link(system, spec.localtime())
    for path in host_etc(system):
        if not (zone and path == LOCALTIME):
            args += ["--ro-bind-try", str(system / path.lstrip("/")), path]
    if zone:
        args += ["--symlink", zone, LOCALTIME]
    size = str(limits.tmpfs_bytes)
    args += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        size,
        "--tmpfs",
        SHM,
        "--size",
        size,
        "--tmpfs",
        TMP,
        "--size",
        size,
        "--tmpfs",
        spec.home,
        # After HOME: a workspace inside HOME is mounted on its tmpfs.
        "--bind",
        str(spec.workspace),
        spec.workspace_at,
    ]
    for bind in spec.binds:
        option = "--bind" if bind.writable else "--ro-bind"
        args += [option, str(bind.source), bind.dest]
    # The root itself is a bwrap-made tmpfs; left writable, the command could
    # fill memory through it or create files next to /etc and /usr.
    args += ["--remount-ro", "/", "--chdir", spec.workspace_at]
    args += ["--seccomp", str(memfd("seccomp", filter_bpf(), fds))]
    return args
