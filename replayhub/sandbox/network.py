"""The sandbox's only way out: host unix sockets relayed to its loopback.

The worker serves HTTP on unix sockets in one ReplayHub-owned directory (the
model gateway, the egress proxy). :func:`relay_mount` copies the relay (the
static binary of :mod:`replayhub.sandbox.relaybin` where it builds, and
``relay.py``) next to them and returns the read-only bind of that directory at
:data:`RELAY_DIR` plus a way to wrap any sandboxed argv so that, inside,
``127.0.0.1:<port>`` reaches each socket. Both runners take the same two
things: bwrap binds the directory, Docker mounts it as a volume, and the
container keeps ``--network none``.

Read-only is enough: connecting to a unix socket needs write permission on the
socket inode, which a read-only mount does not take away (the kernel's
read-only checks cover files, directories and links only); the sandbox cannot
unlink, replace or add anything next to the sockets. The sockets must be mode
0o666 (the sandbox runs as another uid), the directory and the script
readable and searchable by everyone, and the directory must live under the
replay's work dir, whose ancestors the runner already requires to be
traversable by the sandbox uid.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from replayhub.sandbox.base import Bind
from replayhub.sandbox.relaybin import static_relay_or_none

RELAY_DIR = "/replayhub-net"
RELAY_SCRIPT = "relay.py"
RELAY_BINARY = "relay"
_RELAY_SOURCE = Path(__file__).with_name(RELAY_SCRIPT)
# sun_path holds 108 bytes, the terminating NUL included.
MAX_SOCKET_PATH = 107


@dataclass(frozen=True)
class RelayMount:
    """A relay directory ready to bind: `bind` goes into the spec, `wrap` its argv.

    `ports` maps each loopback port inside the sandbox to the socket's name in
    the directory.
    """

    bind: Bind
    ports: Mapping[int, str]
    # Whether the static relay (relaybin) is in the directory: it runs in any
    # root; without it the sandbox needs python3 for relay.py.
    static: bool = False

    def wrap(self, argv: tuple[str, ...] | list[str]) -> tuple[str, ...]:
        """`argv` run behind the relay; exit 125 means the relay could not start.

        The command is exec'd by the relay, so it keeps its pid, exit status
        and signals. Without the static relay the sandbox's root must have
        ``python3`` on PATH.
        """
        listen: list[str] = []
        for port, name in sorted(self.ports.items()):
            listen += ["--listen", f"{port}={RELAY_DIR}/{name}"]
        if self.static:
            return (f"{RELAY_DIR}/{RELAY_BINARY}", *listen, "--", *argv)
        return ("python3", f"{RELAY_DIR}/{RELAY_SCRIPT}", *listen, "--", *argv)

    def url(self, port: int) -> str:
        """The URL a sandboxed client uses to reach the socket behind `port`."""
        if port not in self.ports:
            raise KeyError(f"no socket is relayed on port {port}")
        return f"http://127.0.0.1:{port}"


def relay_mount(directory: Path, sockets: Mapping[int, str | Path]) -> RelayMount:
    """Prepare `directory` for relaying and describe its bind.

    `sockets` maps a loopback port to a socket in `directory`, by name or by
    absolute path; the socket need not exist yet (its server may start later)
    but must be created in `directory` itself, mode 0o666. The directory is
    created if missing, made 0o755 and given a fresh copy of the relay script.
    """
    directory = Path(directory)
    if not directory.is_absolute():
        raise ValueError(f"the relay directory must be absolute: {directory}")
    ports: dict[int, str] = {}
    for port, socket_path in sockets.items():
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"port must be 1-65535, not {port!r}")
        path = Path(socket_path)
        name = path.name if path.is_absolute() else str(socket_path)
        if (path.is_absolute() and path.parent != directory) or (
            "/" in name or name in {"", ".", "..", RELAY_SCRIPT, RELAY_BINARY}
        ):
            raise ValueError(f"{socket_path} is not a socket name in {directory}")
        if len(os.fsencode(directory / name)) > MAX_SOCKET_PATH:
            raise ValueError(
                f"{directory / name} is longer than a unix socket path may be "
                f"({MAX_SOCKET_PATH} bytes); use a shorter REPLAYHUB_WORK_DIR."
            )
        ports[port] = name
    if not ports:
        raise ValueError("at least one port must be relayed")
    directory.mkdir(parents=True, exist_ok=True)
    # Searchable and readable by the sandbox uid, writable only by the worker:
    # the bind is read-only anyway, but the host side must not let another
    # local user swap a socket either.
    directory.chmod(0o755)
    script = directory / RELAY_SCRIPT
    script.unlink(missing_ok=True)
    shutil.copyfile(_RELAY_SOURCE, script)
    script.chmod(0o644)
    binary = directory / RELAY_BINARY
    binary.unlink(missing_ok=True)
    built = static_relay_or_none()
    if built is not None:
        shutil.copyfile(built, binary)
        binary.chmod(0o755)
    return RelayMount(
        bind=Bind(directory, RELAY_DIR), ports=ports, static=built is not None
    )


def proxy_env(port: int) -> dict[str, str]:
    """Environment sending HTTP(S) clients in the sandbox through `port`.

    Both spellings, since tools disagree on which they read; loopback is
    exempt so that a base URL on 127.0.0.1 (the model gateway) is reached
    directly rather than through the proxy.
    """
    url = f"http://127.0.0.1:{port}"
    env = {}
    for name in ("HTTP_PROXY", "HTTPS_PROXY"):
        env[name] = env[name.lower()] = url
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env
