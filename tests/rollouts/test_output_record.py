"""A replay's output as a verifiers record: downloadable, and never imported back."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from replayhub.rollouts.trace import parse_record
from tests.harness import ONERROR, replayed

pytestmark = pytest.mark.django_db


def test_the_output_record_carries_the_seed_the_completion_and_the_mark(
    client, reviewer, rollout_project, tmp_path
):
    replay_id = replayed(
        rollout_project, answer=f"Used ROUND_HALF_UP {ONERROR}", reward=0.75
    )
    client.force_login(reviewer)

    response = client.get(f"/replays/{replay_id}/rollout.jsonl")

    assert response["Content-Disposition"] == (
        f'attachment; filename="replay-{replay_id}.jsonl"'
    )
    trace, record = parse_record(response.content)
    assert trace.reward == 0.75
    assert trace.replay_mark == {
        "replay": replay_id,
        "seed": "5c1f0e9a:continue:tool-call@3",
        "source": "5c1f0e9a",
    }
    roles = [node.role for node in trace.nodes]
    assert roles == ["system", "user", "assistant", "tool", "user", "assistant"]
    assert [node.sampled for node in trace.nodes][-1] is True
    assert record["nodes"][-1]["message"]["content"] == f"Used ROUND_HALF_UP {ONERROR}"

    # Imported back, it is recognised as ReplayHub's own output.
    path = tmp_path / "train_rollouts_invoicer.jsonl"
    path.write_bytes(response.content)
    out = StringIO()
    call_command(
        "import_runs",
        "--format",
        "verifiers",
        str(path),
        "--project",
        "invoicer",
        "--json",
        stdout=out,
    )
    summary = json.loads(out.getvalue())
    assert summary["imported"] == 0
    assert summary["skipped"]["replayed"] == 1


def test_a_replay_without_output_has_no_record(client, reviewer, rollout_project):
    replay_id = replayed(rollout_project, answer="x", reward=1.0, exit=3)
    client.force_login(reviewer)
    assert client.get(f"/replays/{replay_id}/rollout.jsonl").status_code == 404
