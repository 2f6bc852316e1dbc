"""Which format a file is in, from its name and its first bytes.

Used by ``--format auto``; each file of a mixed directory is judged alone.
None when nothing matches: the file is reported, not guessed at. A file
imported in another format whose every line failed gets a hint naming the
format told here (``format_hint``).
"""

from __future__ import annotations

import re
from typing import Any

from replayhub.ingest.transcripts import codex
from replayhub.lib import boundedjson, jsonvalues
from replayhub.models.ingest import ImportFormat

HEAD_BYTES = 64 * 1024
# ATIF names its version first, but its files are pretty-printed: the first
# line is "{" alone, so the head is searched rather than its first line read.
_ATIF = re.compile(r'"schema_version"\s*:\s*"ATIF-v\d+\.\d+"')
_MINI = re.compile(r'"trajectory_format"\s*:\s*"mini-swe-agent')
# ``opencode export`` prints the session's info first, its id first in it.
_OPENCODE = re.compile(r'\A\{\s*"info"\s*:\s*\{\s*"id"\s*:\s*"ses_')


# What a file of each format ``detect`` tells is, for a hint.
WHAT = {
    "native": "a file of native run records",
    "claude-code": "a Claude Code session",
    "codex": "a Codex CLI rollout",
    "aider": "an Aider chat history",
    "swe-agent": "a SWE-agent trajectory",
    "openhands": "an OpenHands trajectory",
    "swebench": "a file of SWE-bench predictions",
    "mini-swe-agent": "a mini-swe-agent trajectory",
    "gemini-cli": "a Gemini CLI session",
    "atif": "an ATIF trajectory",
    "opencode": "an OpenCode session export",
}


def format_hint(name: str, head: bytes, chosen: str) -> str:
    """One line for a file imported in the ``chosen`` format whose every line
    failed, when ``detect`` tells another format ("" when it does not)."""
    kind = detect(name, head)
    if kind is None or kind == chosen or kind not in WHAT:
        return ""
    # Named as the upload page lists it and as the command takes it.
    label = ImportFormat(kind).label
    return f"This looks like {WHAT[kind]}: choose its format, “{label}” ({kind})."


def detect(name: str, head: bytes) -> str | None:
    base = name.rsplit("/", 1)[-1]
    text = head.decode("utf-8", "replace").lstrip("\ufeff \t\r\n")
    if base.endswith(".traj"):
        return "swe-agent"
    if base.endswith(".md") or text.startswith("# aider chat started at"):
        return "aider" if "# aider chat started at" in text else None
    if text.startswith("{") and _ATIF.search(text):
        return "atif"
    if _OPENCODE.match(text):
        return "opencode"
    if text.startswith("["):
        return _list_kind(text)
    if text.startswith("{") and base.endswith(".json"):
        return _object_kind(base, text)
    first = _first_object(text)
    if first is None:
        return None
    kind = jsonvalues.text(first.get("type"))
    if kind in codex.LINE_TYPES and isinstance(first.get("payload"), dict):
        return "codex"
    if "instructions" in first and "id" in first and "timestamp" in first:
        return "codex"
    # Gemini CLI's first line: the session and the hash of its project root
    # (Claude Code's lines carry a sessionId too, never a projectHash).
    if isinstance(first.get("sessionId"), str) and "projectHash" in first:
        return "gemini-cli"
    if "sessionId" in first or (first.get("type") == "summary" and "leafUuid" in first):
        return "claude-code"
    if "model_patch" in first and "instance_id" in first:
        return "swebench"
    if "external_id" in first and "prompt" in first:
        return "native"
    return None


def _list_kind(text: str) -> str | None:
    """A JSON list: OpenHands events or SWE-bench predictions, by the key met
    first (a key, not text inside a string, where its quotes are escaped)."""
    events = [
        at for key in ('"action"', '"observation"') if (at := text.find(key)) >= 0
    ]
    patch = text.find('"model_patch"')
    if patch >= 0 and (not events or patch < min(events)):
        return "swebench"
    return "openhands" if events else None


def _object_kind(base: str, text: str) -> str | None:
    """A ``.json`` object. mini-swe-agent is asked first, as its trajectory
    holds an ``info`` too; its ``mini_version`` follows its configuration and
    its ``trajectory_format`` comes last, so past a long configuration its
    ``.traj.json`` name is what tells it."""
    if _MINI.search(text) or '"mini_version"' in text:
        return "mini-swe-agent"
    if '"trajectory"' in text and '"info"' in text:
        return "swe-agent"
    if base.endswith(".traj.json"):
        return "mini-swe-agent"
    if '"model_patch"' in text:
        return "swebench"
    # An older Gemini CLI recording: the whole record, pretty-printed.
    if '"sessionId"' in text and '"projectHash"' in text and '"messages"' in text:
        return "gemini-cli"
    return None


def _first_object(text: str) -> dict[str, Any] | None:
    line = text.split("\n", 1)[0]
    try:
        value = boundedjson.loads(line)
    except boundedjson.Refused:
        return None
    return value if isinstance(value, dict) else None
