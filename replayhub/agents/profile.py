"""What an agent profile is: plain data and small pure functions.

A profile knows one agent CLI: the package the setup phase installs and its
pinned version, the wire it speaks, the argv that runs it headless for a
version, the environment and ``$HOME`` files that point it at the gateway and
turn its outside traffic off, the files it writes into the checkout (its
state, never the change) and where its transcript goes. The normalisation
rules its requests need before tape matching are ``agents.rules``, by profile
name (the gateway's ``tape_rules`` applies them). No Django here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Where the setup phase installs a profile's CLI: a folder of the project's
# environment (``environments.build.ENV_PATH``), so every later sandbox finds
# it read-only at the same path. Not ``bin/``: nothing of the agent's comes
# first on the PATH of the project's tests.
INSTALL_DIR = "/replayhub-env/agent"
# Where a profile's HOME files wait in the replay's IO bind
# (``replay.workspace.IO_DIR``); the launcher copies them into ``$HOME``, which
# the replay places where the original's was, before the CLI starts.
HOME_FILES = "/replayhub/home"
# What every launcher does first: HOME made and its files laid out.
PREAMBLE = (
    'mkdir -p "$HOME" && { [ ! -d ' + HOME_FILES + " ] || "
    "cp -R " + HOME_FILES + '/. "$HOME"/; } && '
)

NPM = "npm"
PYPI = "pypi"
REGISTRIES = (NPM, PYPI)
# The hosts each registry installs from, for the setup phase's egress when
# no agent cache holds the package.
REGISTRY_HOSTS: Mapping[str, tuple[str, ...]] = {
    NPM: ("registry.npmjs.org:443",),
    PYPI: ("pypi.org:443", "files.pythonhosted.org:443"),
}

ANTHROPIC = "anthropic"
OPENAI_RESPONSES = "openai-responses"
OPENAI_CHAT = "openai-chat"
GEMINI = "gemini"
# The provider kind (``Provider.kind``) whose gateway route serves each wire.
PROVIDER_KIND: Mapping[str, str] = {
    ANTHROPIC: "anthropic",
    OPENAI_RESPONSES: "openai",
    OPENAI_CHAT: "openai",
    GEMINI: "gemini",
}
WIRE_NAMES: Mapping[str, str] = {
    ANTHROPIC: "the Anthropic Messages API",
    OPENAI_RESPONSES: "the OpenAI Responses API",
    OPENAI_CHAT: "the OpenAI chat completions API",
    GEMINI: "Gemini's generateContent API",
}

# An exact release: npm and PyPI spell it alike for the versions pinned here
# (a range, a tag such as ``latest``, ``1.x`` or a URL is never a version;
# a pre- or post-release suffix ends in a number: ``-beta.1``, ``.post1``).
VERSION = re.compile(
    r"[0-9]+(\.[0-9]+){0,3}([-+.]?[A-Za-z]+[.-]?[0-9]+(\.[0-9A-Za-z]+)*)?"
)
VERSION_MAX = 64

# The prompt on the agent's standard input, the shape most CLIs read.
STDIN_LAUNCHER = PREAMBLE + 'exec "$0" "$@" < "$REPLAYHUB_PROMPT_FILE"'


def version_problem(version: str) -> str:
    """Why ``version`` is not an exact release ("" when it is)."""
    if len(version) > VERSION_MAX or not VERSION.fullmatch(version):
        return f"{version[:VERSION_MAX]!r} is not an exact version (such as 2.1.197)."
    return ""


def version_key(version: str) -> tuple[int, ...]:
    """The numeric part of ``version``, for comparing releases (pure)."""
    numbers = re.match(r"[0-9]+(\.[0-9]+)*", version)
    if numbers is None:
        return ()
    return tuple(int(part) for part in numbers.group(0).split("."))


@dataclass(frozen=True)
class Transcript:
    """Where the agent writes its session, and in which format: ``path`` is a
    glob under its HOME (or, with ``in_checkout``, under the checkout)."""

    path: str
    format: str
    in_checkout: bool = False


def no_files(model: str) -> dict[str, str]:
    return {}


@dataclass(frozen=True)
class Profile:
    """One agent CLI, as a replay runs it.

    ``flags(version, model, caps)`` are the CLI's own arguments for that
    version; ``launcher`` is a fixed ``sh`` script run as
    ``sh -c LAUNCHER CLI FLAG...``: the CLI is ``$0`` and its flags ``"$@"``,
    so nothing a record holds is ever part of a script. The launcher adds
    what only the sandbox knows (the prompt file's text, the gateway's
    per-replay URL) as quoted expansions. ``env`` holds constants;
    ``home_files(model)`` the files laid out under ``$HOME`` first.
    """

    name: str
    title: str
    registry: str
    package: str
    version: str
    wire: str
    executable: str
    flags: Callable[[str, str, Mapping[str, Any]], list[str]]
    launcher: str = STDIN_LAUNCHER
    env: Mapping[str, str] = field(default_factory=dict)
    home_files: Callable[[str], dict[str, str]] = no_files
    state_paths: tuple[str, ...] = ()
    transcript: Transcript | None = None

    def __post_init__(self) -> None:
        if self.registry not in REGISTRIES:
            raise ValueError(f"{self.name}: unknown registry {self.registry!r}")
        if self.wire not in PROVIDER_KIND:
            raise ValueError(f"{self.name}: unknown wire {self.wire!r}")
        if problem := version_problem(self.version):
            raise ValueError(f"{self.name}: {problem}")

    @property
    def provider_kind(self) -> str:
        """The kind of provider whose gateway route the agent calls."""
        return PROVIDER_KIND[self.wire]

    @property
    def cli(self) -> str:
        """The installed CLI's path inside the sandbox."""
        return f"{INSTALL_DIR}/{self.executable}"

    def label(self, version: str = "") -> str:
        """``name@version``: what the environment key and its page name."""
        return f"{self.name}@{version or self.version}"

    def spec(self, version: str = "") -> str:
        """The package as its registry's installer names one release."""
        version = version or self.version
        if self.registry == NPM:
            return f"{self.package}@{version}"
        return f"{self.package}=={version}"

    def argv(
        self, version: str = "", model: str = "", caps: Mapping[str, Any] | None = None
    ) -> tuple[str, ...]:
        """The agent phase's argv for ``version`` (default: the pinned one),
        asking for ``model`` ("" leaves the CLI's default)."""
        version = version or self.version
        flags = self.flags(version, model, caps or {})
        return ("sh", "-c", self.launcher, self.cli, *flags)

    def environment(self) -> dict[str, str]:
        """The variables the agent phase adds for this CLI (its outside
        traffic off); the gateway's own are set beside them."""
        return dict(self.env)


# The project's agent when it names no profile: its own --agent-command.
CUSTOM = "custom"
# Every profile by name. Filled by the package (``replayhub.agents``), which
# imports each agent's module, and which Python imports before this one.
PROFILES: dict[str, Profile] = {}


def get(name: str) -> Profile | None:
    """The profile named ``name``; None for ``custom`` (or none named).
    Raises KeyError for a name no profile has."""
    if name in ("", CUSTOM):
        return None
    return PROFILES[name]
