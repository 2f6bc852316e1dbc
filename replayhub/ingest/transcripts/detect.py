"""Which format a file is in, from its name and its first bytes.

Used by ``--format auto``; each file of a mixed directory is judged alone.
None when nothing matches: the file is reported, not guessed at.
"""

from __future__ import annotations

from typing import Any

from replayhub.ingest.transcripts import codex
from replayhub.lib import boundedjson

HEAD_BYTES = 64 * 1024


def detect(name: str, head: bytes) -> str | None:
    base = name.rsplit("/", 1)[-1]
    text = head.decode("utf-8", "replace").lstrip("\ufeff \t\r\n")
    if base.endswith(".traj"):
        return "swe-agent"
    if base.endswith(".md") or text.startswith("# aider chat started at"):
        return "aider" if "# aider chat started at" in text else None
    if text.startswith("["):
        return "openhands" if '"action"' in text or '"observation"' in text else None
    if text.startswith("{") and base.endswith(".json"):
        return "swe-agent" if '"trajectory"' in text and '"info"' in text else None
    first = _first_object(text)
    if first is None:
        return None
    if first.get("type") in codex.LINE_TYPES and isinstance(first.get("payload"), dict):
        return "codex"
    if "instructions" in first and "id" in first and "timestamp" in first:
        return "codex"
    if "sessionId" in first or (first.get("type") == "summary" and "leafUuid" in first):
        return "claude-code"
    if "model_patch" in first and "instance_id" in first:
        return "swebench"
    if "external_id" in first and "prompt" in first:
        return "native"
    return None


def _first_object(text: str) -> dict[str, Any] | None:
    line = text.split("\n", 1)[0]
    try:
        value = boundedjson.loads(line)
    except boundedjson.Refused:
        return None
    return value if isinstance(value, dict) else None
