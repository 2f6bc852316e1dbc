"""Where the replayed agent runs, made to look like where the original ran.

Agents write their surroundings into what they send the model: Claude Code
its working directory, its memory folder under HOME, the branch and the
date; Codex its cwd and time zone. A replay elsewhere sends other requests,
and its tape no longer matches. The record's ``surroundings`` (written by
``replayhub-record`` or read from a transcript) are untrusted: each is used
only when it passes its rule, and what could not be made the same is listed
with why (:meth:`Placement.evidence`), never silently dropped.

Pure: no Django, no git; the branch's own check is ``git.scratch.branch_name``.
"""

from __future__ import annotations

import importlib
import os
import re
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from replayhub.sandbox.base import HOME, WORKSPACE, nested, place_refusal

SHOWN_CHARS = 200
ZONE_SHAPE = re.compile(r"[A-Za-z0-9_+-]+(?:/[A-Za-z0-9_+-]+)*\Z")
SHELL_SHAPE = re.compile(r"/[A-Za-z0-9_./+-]{1,200}\Z")
LOCALE_SHAPE = re.compile(
    r"(?:C|POSIX|[A-Za-z]{2,8}(?:_[A-Za-z0-9]{2,8})?)"
    r"(?:\.[A-Za-z0-9-]{1,20})?(?:@[A-Za-z0-9]{1,20})?\Z"
)


def shell_exists(path: str) -> bool:
    """Whether ``path`` names an executable shell this host has (the sandbox
    shares its /usr and /bin)."""
    if not SHELL_SHAPE.match(path) or "/../" in path or path.endswith("/.."):
        return False
    return os.path.isfile(path) and os.access(path, os.X_OK)


def shown(value: object) -> str | None:
    """``value`` as the evidence shows it: text cut to :data:`SHOWN_CHARS`."""
    if value is None:
        return None
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "\u2026"


def zone_exists(name: str) -> bool:
    """Whether ``name`` is a time zone this host knows (the sandbox shares
    its /usr, where the zone files are)."""
    if len(name) > 64 or not ZONE_SHAPE.match(name) or ".." in name:
        return False
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return False
    return True


@dataclass
class Placement:
    """Where the agent phase runs and what it is told, and what differs."""

    workspace_at: str = WORKSPACE
    home: str = HOME
    branch: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    # The zone /etc/localtime names when the original's system zone was
    # recorded apart from $TZ.
    zone: str | None = None
    # The password database's shell, when recorded apart from $SHELL.
    login_shell: str | None = None
    recorded: bool = False
    # The model the original's first Anthropic call asked for.
    anthropic_model: str | None = None
    reproduced: dict[str, Any] = field(default_factory=dict)
    differences: list[dict[str, Any]] = field(default_factory=list)

    def differ(self, what: str, original: object, replay: object, why: str) -> None:
        self.differences.append(
            {
                "what": what,
                "original": shown(original),
                "replay": shown(replay),
                "why": why,
            }
        )

    def checked_out(self, branch: str | None) -> None:
        """The branch the workspace was provisioned on (None: detached)."""
        if self.branch is None:
            return
        if branch == self.branch:
            self.reproduced["branch"] = branch
        else:
            why = "git does not take it as a branch name here"
            self.differ("branch", self.branch, "(detached HEAD)", why)

    def ran_under(self, runner: str) -> None:
        """The runner that ran the agent: Docker keeps the image's own /etc,
        so its /etc/localtime is not the recorded zone (``$TZ`` still is)."""
        zone = self.reproduced.get("localtime") or self.reproduced.get("tz")
        if runner == "docker" and zone:
            why = "the Docker runner keeps the image's /etc; $TZ is set"
            self.differ("/etc/localtime", zone, "the image's", why)

    def asked(self, model: str | None) -> None:
        """The model the replay's first Anthropic call asked for (None: it
        made none). The model variant goes with its beta flags, so a model
        that differs is a call that differs."""
        if self.anthropic_model is None or model is None:
            return
        if model == self.anthropic_model:
            self.reproduced["anthropic_model"] = model
        else:
            why = "the agent asked for another model (its --model or settings)"
            self.differ("model asked", self.anthropic_model, model, why)

    def evidence(self) -> dict[str, Any] | None:
        """The replay's ``surroundings`` evidence; None when the run recorded
        none (there is nothing to compare with)."""
        if not self.recorded:
            return None
        return {"reproduced": self.reproduced, "differences": self.differences}


def plan(
    recorded: object,
    *,
    installed_agent: tuple[str, str] | None = None,
    zone_known: Callable[[str], bool] = zone_exists,
    shell_known: Callable[[str], bool] = shell_exists,
) -> Placement:
    """The placement for a run's recorded ``surroundings`` (anything that is
    not an object is as if none were recorded). ``installed_agent`` is the
    (name, version) the replay runs, when an agent profile is in use."""
    placement = Placement()
    if not isinstance(recorded, dict):
        return placement
    placement.recorded = True
    _place_paths(placement, recorded)
    if "branch" in recorded:
        branch = recorded["branch"]
        if branch is None:
            placement.reproduced["branch"] = None  # detached, as the replay's
        elif isinstance(branch, str):
            placement.branch = branch
        else:
            placement.differ("branch", branch, "(detached HEAD)", "not a name")
    tz = recorded.get("tz")
    if isinstance(tz, str) and zone_known(tz):
        placement.env["TZ"] = placement.reproduced["tz"] = tz
    elif tz is not None:
        placement.differ("TZ", tz, "UTC", "no such time zone here")
    localtime = recorded.get("localtime")
    if isinstance(localtime, str) and zone_known(localtime):
        placement.zone = placement.reproduced["localtime"] = localtime
    elif localtime is not None:
        placement.differ("/etc/localtime", localtime, "UTC", "no such time zone here")
    lang = recorded.get("lang")
    if isinstance(lang, str) and LOCALE_SHAPE.match(lang):
        placement.env["LANG"] = placement.reproduced["lang"] = lang
    elif lang is not None:
        placement.differ("LANG", lang, "C.UTF-8", "not a locale name")
    shell = recorded.get("shell")
    if isinstance(shell, str) and shell_known(shell):
        placement.env["SHELL"] = placement.reproduced["shell"] = shell
    elif shell is not None:
        placement.differ("SHELL", shell, "(unset)", "no such shell here")
    login = recorded.get("login_shell")
    if isinstance(login, str) and shell_known(login):
        placement.login_shell = placement.reproduced["login_shell"] = login
    elif login is not None:
        placement.differ("login shell", login, "/bin/sh", "no such shell here")
    _compare_agent(placement, recorded.get("agent"), installed_agent)
    anthropic = recorded.get("anthropic")
    if isinstance(anthropic, dict) and isinstance(anthropic.get("model"), str):
        placement.anthropic_model = anthropic["model"]
    return placement


def _place_paths(placement: Placement, recorded: dict) -> None:
    cwd = recorded.get("cwd")
    if cwd is not None:
        why = place_refusal(cwd)
        if why:
            placement.differ("working directory", cwd, WORKSPACE, why)
        else:
            placement.workspace_at = placement.reproduced["cwd"] = cwd
    home = recorded.get("home")
    if home is None:
        return
    why = place_refusal(home)
    if not why and nested(home, placement.workspace_at):
        why = "it holds the working directory's files, which are the change"
    if why:
        placement.differ("HOME", home, HOME, why)
    else:
        placement.home = placement.reproduced["home"] = home


def _compare_agent(
    placement: Placement, agent: object, installed: tuple[str, str] | None
) -> None:
    if not isinstance(agent, dict) or installed is None:
        return
    version = agent.get("version")
    name, replay_version = installed
    if not isinstance(version, str) or not version:
        return
    if version == replay_version:
        placement.reproduced["agent_version"] = version
    else:
        why = f"the project installs {name} {replay_version}"
        placement.differ("agent version", version, replay_version, why)


def installed_agent(project: object) -> tuple[str, str] | None:
    """The agent profile's name and the version a replay installs, when the
    project uses a profile (``Project.agent``, ``Project.agent_version``, the
    profile's pinned version); None for a custom command, or when either
    cannot be read."""
    name = getattr(project, "agent", "custom") or "custom"
    if not isinstance(name, str) or name == "custom":
        return None
    version = getattr(project, "agent_version", "") or ""
    if not version:
        try:
            # By name: profiles are data a deployment may lack.
            profiles = importlib.import_module("replayhub.agents")
            version = getattr(profiles.get(name), "version", "")
        except (ImportError, LookupError, AttributeError, ValueError):
            return None
    return (name, str(version)) if version else None
