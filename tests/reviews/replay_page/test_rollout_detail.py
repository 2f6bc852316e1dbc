"""A rollout replay's page: seed, both continuations, both rewards, all escaped."""

from __future__ import annotations

import pytest

from tests.harness import ONERROR, SCRIPT, replayed

pytestmark = pytest.mark.django_db


def test_the_page_shows_the_seed_both_continuations_and_both_rewards(
    client, reviewer, rollout_project
):
    replay_id = replayed(
        rollout_project, answer=f"Used ROUND_HALF_UP {SCRIPT}", reward=0.75
    )
    client.force_login(reviewer)

    html = client.get(f"/replays/{replay_id}/").content.decode()

    assert 'id="seed"' in html and 'id="continuations"' in html
    assert "Used ROUND_HALF_UP" in html and "Used Decimal" in html
    assert 'id="original-reward"' in html and ">1.0<" in html and ">0.75<" in html
    assert "After tool results" in html and "at node 3" in html
    assert "token-level Jaccard" in html
    assert "Harness output" in html
    # The tool call, its arguments laid out, and the result it answers.
    assert "<code>bash</code>" in html and "call_a1" in html
    assert "&quot;command&quot;: &quot;echo" in html
    # A long tool result is collapsed behind its first line.
    assert "<summary>line 0 of a long pytest log" in html
    # No diff or provenance sections for a rollout: the harness commit instead.
    assert 'id="dod"' not in html and 'id="provenance"' not in html
    assert "of the project's repository" in html
    # Where the reward came from, and the verifier's own run.
    assert 'id="reward-source"' in html and "separate verifier" in html
    assert "python3 verifier.py" in html and 'id="verifier-run"' in html
    assert "the harness's own reward, 0.75, ignored" in html


def test_a_reward_from_the_harness_sandbox_is_said_to_be_so(
    client, reviewer, rollout_project
):
    rollout_project.verifier_command = []
    rollout_project.save()
    replay_id = replayed(rollout_project, answer="Used ROUND_HALF_UP", reward=1.0)
    client.force_login(reviewer)

    html = client.get(f"/replays/{replay_id}/").content.decode()

    assert "harness's sandbox" in html
    assert "not independently checked" in html
    assert 'id="verifier-run"' not in html
    assert "Passing reward from the harness" in html  # the reason, not equivalent


def test_hostile_content_in_the_seed_and_completions_renders_escaped(
    client, reviewer, rollout_project
):
    replay_id = replayed(rollout_project, answer=f"Done {SCRIPT} {ONERROR}")
    client.force_login(reviewer)

    html = client.get(f"/replays/{replay_id}/").content.decode()

    assert SCRIPT not in html and ONERROR not in html
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=" in html


def test_a_code_run_page_has_no_rollout_section(client, reviewer):
    from tests.factories import make_replay

    replay = make_replay(verdict="divergent")
    client.force_login(reviewer)
    html = client.get(f"/replays/{replay.pk}/").content.decode()
    assert 'id="rollout"' not in html and 'id="dod"' in html


def test_an_equivalent_rollout_replay_heads_the_queue_marked_as_a_rollout(
    client, reviewer, rollout_project
):
    from tests.factories import make_replay

    make_replay(verdict="divergent", title="Round invoice totals")
    replay_id = replayed(rollout_project, answer="Used ROUND_HALF_UP", reward=1.0)
    client.force_login(reviewer)

    rows = client.get("/").context["rows"]

    assert rows[0]["id"] == replay_id
    assert rows[0]["rollout"] and rows[0]["band_label"] == (
        "Tests or verifier passed, diff diverged"
    )
    assert not rows[1]["rollout"]
