"""Claude Code (``@anthropic-ai/claude-code`` on npm): ``claude -p``.

The prompt goes on standard input, with permission prompts off (the sandbox
is the boundary) and its answer printed as one JSON object.
``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`` turns off the six calls it
makes to api.anthropic.com and the billed title call through the model
endpoint. ``--dangerously-skip-permissions`` refuses to run as root unless
``IS_SANDBOX=1``: the launcher sets it only when the sandbox's uid is root
(bubblewrap runs the agent as uid 1000).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from replayhub.agents.profile import ANTHROPIC, NPM, PREAMBLE, Profile, Transcript
from replayhub.recorder.wiring import CLAUDE_CODE_QUIET

LAUNCHER = (
    PREAMBLE + '{ [ "$(id -u)" != 0 ] || export IS_SANDBOX=1; } && '
    'exec "$0" "$@" < "$REPLAYHUB_PROMPT_FILE"'
)


def flags(version: str, model: str, caps: Mapping[str, Any]) -> list[str]:
    words = ["-p"]
    if model:
        # The record's model: the default one goes on the wire with beta
        # headers of its own, so a replay asks for what the run asked for.
        words.append(f"--model={model}")
    turns = caps.get("max_turns")
    if isinstance(turns, int) and not isinstance(turns, bool) and turns > 0:
        # The project's cap, told to the agent so it ends its turn there
        # rather than be refused by the gateway mid-way.
        words.append(f"--max-turns={turns}")
    return [*words, "--dangerously-skip-permissions", "--output-format", "json"]


PROFILE = Profile(
    name="claude-code",
    title="Claude Code",
    registry=NPM,
    package="@anthropic-ai/claude-code",
    version="2.1.197",
    wire=ANTHROPIC,
    executable="node_modules/.bin/claude",
    flags=flags,
    launcher=LAUNCHER,
    env=CLAUDE_CODE_QUIET,
    state_paths=(".claude/**",),
    transcript=Transcript(".claude/projects/*/*.jsonl", "claude-code"),
)
