"""The agents' CLIs installed on the host, as a developer has them on PATH.

The tests that run a real CLI outside the sandbox (under the recorder, or
against the gateway's socket) take it from here: one install per pinned
release, made offline from the agent cache (``REPLAYHUB_AGENT_CACHE``:
npm's cache of the release, or its wheels) into ``REPLAYHUB_HOST_CLIS``
(default ``var/host-clis/``), and only run after. ``./dev test`` makes them
ahead, as it fetches the cache (``python -m tests.hostclis``); a test that
finds one missing makes it, under a lock, so that the workers of a run make
it once between them. A Python CLI's environment is compiled when made: its
first run is a run, not a compilation of its packages.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from replayhub import agents
from replayhub.agents.profile import NPM

ROOT = Path(__file__).resolve().parent.parent
# What a finished install holds: the release it is of and where it was made
# (a Python CLI's scripts name their venv's path, so a moved install is stale).
DONE = ".installed"


def kept_root() -> Path:
    return Path(os.environ.get("REPLAYHUB_HOST_CLIS") or ROOT / "var" / "host-clis")


def cache_root() -> Path:
    """The agent cache every test reads: ``REPLAYHUB_AGENT_CACHE``, else the
    checkout's ``var/agents`` (what ``./dev test`` fills)."""
    return Path(os.environ.get("REPLAYHUB_AGENT_CACHE") or ROOT / "var" / "agents")


def host_cli(name: str) -> Path:
    """The executable of profile ``name``'s pinned release on the host,
    installed first if it is not yet."""
    profile = agents.PROFILES[name]
    folder = kept_root() / f"{name}-{profile.version}"
    executable = Path(profile.executable).name
    if profile.registry == NPM:
        # npm's link, whose name is the CLI's (the recorder knows it by it).
        found = folder / "cli" / "node_modules" / ".bin" / executable
    else:
        found = folder / "venv" / "bin" / executable
    done = folder / DONE
    with _locked(folder):
        if not done.exists() or done.read_text() != _marker(name, folder):
            _install(name, folder)
    return found


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _install(name: str, folder: Path) -> None:
    """``name``'s pinned release into ``folder``, afresh, offline."""
    profile = agents.PROFILES[name]
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    cache = cache_root() / f"{name}-{profile.version}"
    if profile.registry == NPM:
        dead = "http://127.0.0.1:9"
        # npm will not read a cache it cannot write to: a copy, gone after.
        with tempfile.TemporaryDirectory(dir=folder) as scratch:
            npm_cache = Path(scratch) / "npm"
            shutil.copytree(cache / "npm", npm_cache, symlinks=True)
            _run(
                "npm", "install", "--prefix", str(folder / "cli"), "--offline",
                "--cache", str(npm_cache), "--proxy", dead, "--https-proxy", dead,
                "--no-audit", "--no-fund", profile.spec(),
            )  # fmt: skip
    else:
        venv = folder / "venv"
        _run("/usr/bin/python3", "-m", "venv", str(venv))
        _run(
            str(venv / "bin" / "pip"), "install", "--quiet", "--no-index",
            "--disable-pip-version-check", "--find-links", str(cache / "wheels"),
            profile.spec(),
        )  # fmt: skip
    (folder / DONE).write_text(_marker(name, folder))


def _marker(name: str, folder: Path) -> str:
    return f"{agents.PROFILES[name].spec()} in {folder.resolve()}"


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} {argv[1]} failed: {done.stderr[-2000:]}")


def main() -> int:
    """Every profile whose release the agent cache holds, installed ahead."""
    failed = 0
    for name, profile in agents.PROFILES.items():
        if not (cache_root() / f"{name}-{profile.version}" / ".fetched").exists():
            continue
        try:
            print(f"{name}: {host_cli(name)}")
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
            print(f"{name}: not installed on the host: {error}", file=sys.stderr)
            failed = 1
    return failed


if __name__ == "__main__":
    sys.exit(main())
