"""Aider (``aider-chat`` on PyPI).

One exchange from ``--message-file``, yes to every question, no commits, and
``.gitignore`` left alone (by default aider adds ``.aider*`` to it, which
would be a change). The launcher points aider's OpenAI client at the
gateway (``OPENAI_API_BASE``). A model-metadata file under ``$HOME`` names
the model's context size, which stops aider fetching the price list from
GitHub and fixes its repository map's budget; litellm is told to read its
bundled copy for the same reason. Its chat history and tag cache
are written into the checkout: they are its state, not the change.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from replayhub.agents.profile import (
    HOME_FILES,
    OPENAI_CHAT,
    PREAMBLE,
    PYPI,
    Profile,
    Transcript,
)

LAUNCHER = (
    PREAMBLE + 'export OPENAI_API_BASE="$OPENAI_BASE_URL" && '
    'exec "$0" "$@" --message-file "$REPLAYHUB_PROMPT_FILE" < /dev/null'
)
METADATA = ".aider/model-metadata.json"


def flags(version: str, model: str, caps: Mapping[str, Any]) -> list[str]:
    words = [
        "--yes-always",
        "--no-auto-commits",
        "--no-gitignore",
        "--no-check-update",
        "--analytics-disable",
        "--no-show-model-warnings",
        "--no-pretty",
        "--no-fancy-input",
    ]
    if model:
        words += [
            f"--model=openai/{model}",
            "--model-metadata-file",
            f"{HOME_FILES}/{METADATA}",
        ]
    return words


def home_files(model: str) -> dict[str, str]:
    if not model:
        return {}
    metadata = {
        f"openai/{model}": {
            "max_input_tokens": 128000,
            "max_output_tokens": 8192,
            "max_tokens": 8192,
            "input_cost_per_token": 0,
            "output_cost_per_token": 0,
            "litellm_provider": "openai",
            "mode": "chat",
        }
    }
    return {METADATA: json.dumps(metadata, indent=1)}


PROFILE = Profile(
    name="aider",
    title="Aider",
    registry=PYPI,
    package="aider-chat",
    version="0.86.2",
    wire=OPENAI_CHAT,
    executable="bin/aider",
    flags=flags,
    launcher=LAUNCHER,
    # litellm, which aider imports, fetches the same price list when it loads.
    env={"LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    home_files=home_files,
    state_paths=(".aider*", ".aider*/**"),
    transcript=Transcript(".aider.chat.history.md", "aider", in_checkout=True),
)
