"""What the agent can see of where it runs, written down so that a replay can
look the same to it: the checkout's path, HOME, the branch, the time zone and
language, the login shell, the agent CLI and its version. Agents write these into their
prompts (Claude Code's working directory, memory folder, branch and date),
so a replay that differs in them sends different requests.

Paths are no secret (HOME is a path); every value is masked of keys with the
rest of the record all the same.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# The agent CLIs known by the basename of the command's first word.
AGENT_CLIS = ("claude", "codex", "aider", "mini", "gemini", "opencode")
VERSION_TIMEOUT = 5.0
VERSION_OUTPUT_BYTES = 4096
# A version as CLIs print it: "2.1.197 (Claude Code)", "codex-cli 0.171.0".
VERSION_SHAPE = re.compile(r"\d+(?:\.\d+)+(?:[-+][0-9A-Za-z][0-9A-Za-z.+-]*)?")
SURROUNDING_MAX_CHARS = 4096


def _short(value: str | None, limit: int = SURROUNDING_MAX_CHARS) -> str | None:
    """``value`` when it is a non-empty string of at most ``limit`` characters."""
    return value if value and len(value) <= limit else None


def time_zone(env: Mapping[str, str], etc: Path = Path("/etc")) -> str | None:
    """``$TZ``, else the system's zone (:func:`system_zone`)."""
    if env.get("TZ"):
        return _short(env["TZ"], 200)
    return system_zone(etc)


def system_zone(etc: Path = Path("/etc")) -> str | None:
    """The zone /etc/timezone names, else the one the /etc/localtime link
    points into (``…/zoneinfo/Europe/Paris``): what an agent that does not
    read ``$TZ`` (Codex) sees."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        lines = (etc / "timezone").read_text("utf-8")[:1024].splitlines()
        if lines and lines[0].strip():
            return _short(lines[0].strip(), 200)
    with contextlib.suppress(OSError):
        target = os.readlink(etc / "localtime")
        _, found, zone = target.partition("zoneinfo/")
        if found and zone:
            return _short(zone, 200)
    return None


def cli_version(program: str, env: Mapping[str, str]) -> str | None:
    """The version ``program --version`` prints, or None (no answer within
    :data:`VERSION_TIMEOUT` seconds, a failure, or nothing version-shaped).
    Its process group is killed on timeout: a launcher's children would
    hold the pipe open."""
    try:
        child = subprocess.Popen(
            [program, "--version"],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None
    try:
        out, _ = child.communicate(timeout=VERSION_TIMEOUT)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        return None
    text = out[:VERSION_OUTPUT_BYTES].decode("utf-8", "replace")
    found = VERSION_SHAPE.search(text)
    return found.group(0)[:64] if found and child.returncode == 0 else None


def login_shell() -> str | None:
    """The user's login shell from the password database (what an agent
    that does not read ``$SHELL`` sees), or None."""
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_shell or None
    except (ImportError, KeyError, OSError):
        return None


def agent_cli(command: list[str], env: Mapping[str, str]) -> dict[str, str] | None:
    """``{name, version}`` when the command is a known agent CLI (the version
    left out when it cannot be read), else None."""
    name = os.path.basename(command[0]) if command else ""
    if name not in AGENT_CLIS:
        return None
    version = cli_version(command[0], env)
    return {"name": name, "version": version} if version else {"name": name}


def surroundings_of(
    *,
    top: Path,
    branch: str | None,
    env: Mapping[str, str],
    agent: dict[str, str] | None,
    first_call: dict[str, Any] | None,
) -> dict[str, Any]:
    """The record's ``surroundings``: what is unknown is left out, and a
    branch that is None (a detached HEAD) is written as null."""
    found: dict[str, Any] = {
        "cwd": _short(str(top)),
        "home": _short(env.get("HOME")),
        "tz": time_zone(env),
        "localtime": system_zone(),
        # Apart: Claude Code reads $SHELL (and says "unknown" without it),
        # Codex the password database.
        "shell": _short(env.get("SHELL"), 200),
        "login_shell": _short(login_shell(), 200),
        "lang": _short(env.get("LC_ALL") or env.get("LANG"), 200),
        "agent": agent,
        "anthropic": first_call,
    }
    kept = {key: value for key, value in found.items() if value is not None}
    kept["branch"] = _short(branch, 255)
    return kept
