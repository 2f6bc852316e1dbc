"""Native records and files of them, for the ingest tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "runs.jsonl"
PINNED = "ghcr.io/acme/agent@sha256:" + "ab" * 32


def record(number: int = 1, **fields: Any) -> dict[str, Any]:
    """A valid native record with ``fields`` replacing its values.

    ``drop=[...]`` leaves keys out entirely (None sends a JSON null).
    """
    value: dict[str, Any] = {
        "external_id": f"run-{number:04d}",
        "title": f"Task {number}",
        "prompt": f"Fix bug {number} in the cart module.",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "effort": "high",
        "original_commit": f"{number:040x}",
        "original_branch": f"agent/task-{number}",
        "original_tests_passed": True,
        "sandbox": {"image": PINNED, "config_sha256": "c" * 64},
        "started_at": "2024-11-03T02:14:07Z",
        "output": "Done; 12 tests passed.",
        "usage": {"input_tokens": 1200, "output_tokens": 300, "cost_usd": 0.01},
    }
    for key in fields.pop("drop", []):
        value.pop(key, None)
    value.update(fields)
    return value


def line(value: Any) -> bytes:
    return json.dumps(value).encode() + b"\n"


def jsonl(*values: Any) -> bytes:
    return b"".join(line(value) for value in values)


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
