"""Codex CLI (``@openai/codex`` on npm): ``codex exec``.

Codex's built-in provider ignores ``OPENAI_BASE_URL``, so the gateway is a
custom provider named on the command line (``rh``, the Responses wire, its
key read from ``OPENAI_API_KEY``); the launcher adds its base URL, which
only the sandbox knows. Analytics and plugins are off (their calls go to
chatgpt.com and api.github.com). ``--full-auto`` no longer exists: edits and
commands are allowed by bypassing Codex's own sandbox, ReplayHub's being the
boundary. The prompt goes on standard input (``-``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from replayhub.agents.profile import (
    NPM,
    OPENAI_RESPONSES,
    PREAMBLE,
    Profile,
    Transcript,
)
from replayhub.recorder.wiring import codex_provider_flags

LAUNCHER = (
    PREAMBLE + 'exec "$0" "$@" '
    '-c "model_providers.rh.base_url=$OPENAI_BASE_URL" - < "$REPLAYHUB_PROMPT_FILE"'
)


def flags(version: str, model: str, caps: Mapping[str, Any]) -> list[str]:
    words = [
        "exec",
        "--dangerously-bypass-approvals-and-sandbox",
        "--skip-git-repo-check",
        "--color",
        "never",
    ]
    if model:
        words.append(f"--model={model}")
    return [
        *words,
        *codex_provider_flags(),
        "-c",
        "analytics.enabled=false",
        "--disable",
        "plugins",
    ]


PROFILE = Profile(
    name="codex",
    title="Codex CLI",
    registry=NPM,
    package="@openai/codex",
    version="0.171.0",
    wire=OPENAI_RESPONSES,
    executable="node_modules/.bin/codex",
    flags=flags,
    launcher=LAUNCHER,
    state_paths=(".codex/**",),
    transcript=Transcript(".codex/sessions/*/*/*/rollout-*.jsonl", "codex"),
)
