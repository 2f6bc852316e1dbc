"""Known agent CLIs pointed at the recording endpoint the way each one reads,
so that ``replayhub-record -- codex exec …`` or ``-- claude -p …`` records
with no glue from the user.

Codex CLI's built-in provider ignores ``OPENAI_BASE_URL``: the recorder names
a custom provider on its command line (the flags an agent profile's replay
uses too, so both send the same requests), unless the command already picks
a provider. Claude Code's outside traffic is turned off as its replay turns
it off (a title call through the model endpoint would otherwise be a call
the replay never makes), unless the user's environment says otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# The custom provider's name on Codex's command line, in a replay and here.
CODEX_PROVIDER = "rh"
CLAUDE_CODE_QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
}


def codex_provider_flags() -> list[str]:
    """Codex's ``-c`` flags naming the custom provider (its base URL apart:
    only the process that runs Codex knows it)."""
    at = f"model_providers.{CODEX_PROVIDER}"
    return [
        "-c",
        f"model_provider={CODEX_PROVIDER}",
        "-c",
        f"{at}.name={CODEX_PROVIDER}",
        "-c",
        f"{at}.env_key=OPENAI_API_KEY",
        "-c",
        f"{at}.wire_api=responses",
    ]


def codex_base_url_flag(base_url: str) -> list[str]:
    return ["-c", f"model_providers.{CODEX_PROVIDER}.base_url={base_url}"]


def wired(
    command: list[str], env: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    """``command`` and ``env`` with a known CLI pointed at the endpoint
    ``env`` names (pure)."""
    name = os.path.basename(command[0]) if command else ""
    out = dict(env)
    if name == "codex" and not any("model_provider" in word for word in command):
        flags = codex_provider_flags()
        flags += codex_base_url_flag(env.get("OPENAI_BASE_URL", ""))
        command = [command[0], *flags, *command[1:]]
    if name == "claude":
        for key, value in CLAUDE_CODE_QUIET.items():
            out.setdefault(key, value)
    return command, out
