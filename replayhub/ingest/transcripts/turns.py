"""The plain turns a stored transcript is read into: who spoke (the role
constants), what was said, and the tool calls made in a turn with the result
each got. Shared by :mod:`conversation` and the readers that read their own
format back (Gemini CLI, ATIF)."""

from __future__ import annotations

from dataclasses import dataclass, field

USER = "user"
ASSISTANT = "assistant"
# A tool result no call in the transcript asked for.
TOOL = "tool"
# The model's reasoning, where the transcript kept it readable.
REASONING = "reasoning"
# Text the agent's program wrote, not a person or the model (Aider's notes).
SYSTEM = "system"
# The context was compacted here; ``text`` is what it was compacted to, if kept.
COMPACTION = "compaction"
# A summary of the session or of the conversation so far.
SUMMARY = "summary"


@dataclass
class Call:
    """A tool call and the result the transcript holds for it (None: none)."""

    name: str
    input: str
    id: str = ""
    result: str | None = None
    error: bool = False


@dataclass
class Turn:
    role: str
    text: str = ""
    calls: list[Call] = field(default_factory=list)
    # A few words about the turn beyond its role ("auto, 150,000 tokens").
    note: str = ""
