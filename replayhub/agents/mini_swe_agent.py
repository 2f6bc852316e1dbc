"""mini-swe-agent (``mini-swe-agent`` on PyPI): ``mini``.

It has no prompt-file option, so the launcher gives the prompt file's text
as ``--task``. ``MSWEA_CONFIGURED`` skips its setup wizard (which aborts with no
terminal); unknown models' costs are ignored rather than fatal, and litellm
reads its bundled price map instead of fetching it from GitHub. The model
goes through litellm's ``openai/`` route to ``OPENAI_BASE_URL``, the gateway.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from replayhub.agents.profile import OPENAI_CHAT, PREAMBLE, PYPI, Profile, Transcript

LAUNCHER = (
    PREAMBLE + 'exec "$0" "$@" --task="$(cat "$REPLAYHUB_PROMPT_FILE")" < /dev/null'
)


def flags(version: str, model: str, caps: Mapping[str, Any]) -> list[str]:
    words = ["-y", "--exit-immediately"]
    if model:
        words.append(f"--model=openai/{model}")
    return words


PROFILE = Profile(
    name="mini-swe-agent",
    title="mini-swe-agent",
    registry=PYPI,
    package="mini-swe-agent",
    version="2.4.6",
    wire=OPENAI_CHAT,
    executable="bin/mini",
    flags=flags,
    launcher=LAUNCHER,
    env={
        "MSWEA_CONFIGURED": "true",
        "MSWEA_COST_TRACKING": "ignore_errors",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    },
    transcript=Transcript(
        ".config/mini-swe-agent/last_mini_run.traj.json", "mini-swe-agent"
    ),
)
