"""OpenCode (``opencode-ai`` on npm): ``opencode run``.

Its config, laid out under ``$HOME``, names the gateway as an
OpenAI-compatible provider (``rh``) whose URL and key OpenCode reads from
the gateway's variables when it starts (``{env:…}``), with the record's
model and every permission allowed. The prompt goes on standard input (as an
argument it is sent wrapped in quotes); ``--title`` skips the title call,
and the model catalog fetch from models.opencode.ai is off.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from replayhub.agents.profile import NPM, OPENAI_CHAT, Profile, Transcript

CONFIG = ".config/opencode/opencode.json"
MODEL = "default"


def flags(version: str, model: str, caps: Mapping[str, Any]) -> list[str]:
    return ["run", f"--model=rh/{model or MODEL}", "--format=json", "--title=replay"]


def home_files(model: str) -> dict[str, str]:
    model = model or MODEL
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "rh": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "ReplayHub gateway",
                "options": {
                    "baseURL": "{env:OPENAI_BASE_URL}",
                    "apiKey": "{env:OPENAI_API_KEY}",
                },
                "models": {
                    model: {
                        "name": model,
                        "tool_call": True,
                        "limit": {"context": 128000, "output": 8192},
                    }
                },
            }
        },
        "model": f"rh/{model}",
        "permission": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
        "autoupdate": False,
        "share": "disabled",
    }
    return {CONFIG: json.dumps(config, indent=1)}


PROFILE = Profile(
    name="opencode",
    title="OpenCode",
    registry=NPM,
    package="opencode-ai",
    version="1.18.33",
    wire=OPENAI_CHAT,
    executable="node_modules/.bin/opencode",
    flags=flags,
    home_files=home_files,
    env={"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1"},
    state_paths=(".opencode/**",),
    transcript=Transcript(".local/share/opencode/opencode.db", "opencode"),
)
