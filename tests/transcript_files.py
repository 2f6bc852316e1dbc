"""One hand-written transcript file of each format, made ready for a
repository: what the upload page and the API tests send."""

from __future__ import annotations

import json
from typing import NamedTuple

from tests.gitrepos import Repo
from tests.ingest.test_transcript_parsers import FIXTURES

CART = "def total(lines):\n    return 0\n"
PATCH = (
    "--- a/cart.py\n+++ b/cart.py\n@@ -1,2 +1,2 @@\n def total(lines):\n"
    "-    return 0\n+    return sum(lines)\n"
)


class TranscriptFile(NamedTuple):
    format: str
    name: str
    data: bytes
    external_id: str


def transcript_files(repo: Repo) -> list[TranscriptFile]:
    """Each format's file; ``repo`` holds ``cart.py`` as :data:`CART` at HEAD,
    the base the files that record one name."""
    base = repo.head()

    def fixture(path: str) -> str:
        return (FIXTURES / path).read_text().replace("BASE_SHA_PLACEHOLDER", base)

    prediction = {
        "instance_id": "shop__shop-9",
        "model_name_or_path": "acme-agent-v2",
        "model_patch": PATCH,
        "base_commit": base,
        "problem_statement": "Cart.total() returns 0",
    }
    session = "5f0c9a1e-0000-4000-8000-000000000001"
    return [
        TranscriptFile(
            "claude-code",
            f"{session}.jsonl",
            fixture(f"claude-code/{session}.jsonl").encode(),
            session,
        ),
        TranscriptFile(
            "codex",
            "rollout-2025-06-04T10-00-00-c0de.jsonl",
            fixture("mixed/rollout-2025-06-04T10-00-00-c0de.jsonl").encode(),
            "c0de0000-0000-4000-8000-000000000004",
        ),
        TranscriptFile(
            "aider",
            ".aider.chat.history.md",
            fixture("mixed/.aider.chat.history.md").encode(),
            "aider-20250605T100000",
        ),
        TranscriptFile(
            "swe-agent",
            "shop__shop-7.traj",
            fixture("swe-agent/shop__shop-7.traj").encode(),
            "claude-sonnet-4-20250514:shop__shop-7",
        ),
        TranscriptFile(
            "openhands",
            "trajectory.json",
            fixture("openhands/trajectory.json").encode(),
            "",  # named by the file's bytes
        ),
        TranscriptFile(
            "swebench",
            "predictions.jsonl",
            (json.dumps(prediction) + "\n").encode(),
            "acme-agent-v2:shop__shop-9",
        ),
    ]
