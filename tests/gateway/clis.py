"""Real agent CLIs for the gateway's tests: present when the worker's agent
cache (``REPLAYHUB_AGENT_CACHE``, ``<profile>-<version>/npm`` holding npm's
cache, as ``./dev test`` fills it) holds them, installed on the host by
``tests.hostclis``; a relay from a TCP port to the gateway's unix socket, and
a small git checkout for the agent to work in.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from tests.hostclis import cache_root


def agent_cache(profile: str, version: str) -> Path | None:
    """The npm cache of one release in the agent cache, if it is there."""
    folder = cache_root() / f"{profile}-{version}" / "npm"
    return folder if folder.is_dir() else None


def needs_cli(profile: str, version: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        agent_cache(profile, version) is None or shutil.which("npm") is None,
        reason=f"no {profile}-{version} in REPLAYHUB_AGENT_CACHE (./dev test fills it)",
    )


class Relay:
    """127.0.0.1:<port> piped to the gateway's unix socket, as the sandbox's
    relay does."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.path)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()


def checkout(where: Path) -> Path:
    where.mkdir(parents=True)
    (where / "README.md").write_text("# calc\nA tiny calculator.\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(where)}
    for argv in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "."],
        ["git", "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "init"],
    ):
        subprocess.run(argv, cwd=where, env=env, check=True, timeout=30)
    return where
