"""Gemini CLI (``@google/gemini-cli`` on npm): ``gemini -p``.

It speaks Gemini's own ``generateContent`` wire. Its settings (laid out
under ``$HOME``) choose API-key auth, which it otherwise refuses as soon as
``GOOGLE_GEMINI_BASE_URL`` is set (exit 41), and turn usage statistics and
auto-update off. The gateway's address and placeholder key are the ones a
``gemini`` provider gets (``GOOGLE_GEMINI_BASE_URL``, ``GEMINI_API_KEY``);
the URL has no ``/v1beta``, which the CLI adds. The prompt is given as
``--prompt``, with nothing on standard input (the CLI would add it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from replayhub.agents.profile import GEMINI, NPM, PREAMBLE, Profile, Transcript

LAUNCHER = (
    PREAMBLE + 'exec "$0" "$@" --prompt="$(cat "$REPLAYHUB_PROMPT_FILE")" < /dev/null'
)
SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
}


def flags(version: str, model: str, caps: Mapping[str, Any]) -> list[str]:
    words = [f"--model={model}"] if model else []
    return [*words, "--yolo", "--skip-trust", "-o", "json"]


def home_files(model: str) -> dict[str, str]:
    return {".gemini/settings.json": json.dumps(SETTINGS, indent=1)}


PROFILE = Profile(
    name="gemini-cli",
    title="Gemini CLI",
    registry=NPM,
    package="@google/gemini-cli",
    version="0.61.0",
    wire=GEMINI,
    executable="node_modules/.bin/gemini",
    flags=flags,
    launcher=LAUNCHER,
    home_files=home_files,
    state_paths=(".gemini/**",),
    transcript=Transcript(".gemini/tmp/*/chats/session-*.jsonl", "gemini-cli"),
)
