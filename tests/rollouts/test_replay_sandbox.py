"""Rollout replays in the real sandbox: the harness reaches each verdict."""

from __future__ import annotations

import json

import pytest

from replayhub.rollouts.replay import RolloutTask, execute_rollout
from tests.harness import seed_with

pytestmark = pytest.mark.django_db

ORIGINAL = [{"role": "assistant", "content": "Used Decimal.quantize for rounding."}]


def replay(
    project,
    *,
    original_reward=1.0,
    original=ORIGINAL,
    verifier=("python3", "verifier.py"),
    **order,
):
    task = RolloutTask(
        messages=seed_with(**order),
        original_completion=original,
        original_reward=original_reward,
        pass_threshold=0.5,
        harness_command=("python3", "harness.py"),
        verifier_command=verifier,
        trace_id="5c1f0e9a",
        seed_kind="continue",
    )
    return execute_rollout(project=project, task=task, replay_id=424242)


def outcome(report):
    return report.decision.verdict, report.decision.reason_code


def test_another_passing_completion_is_equivalent(bare_rollout_project):
    report = replay(
        bare_rollout_project, answer="Rounded half up with Decimal.", reward=1.0
    )
    assert outcome(report) == ("equivalent", "rewards_pass")
    summary = report.summary()
    assert (summary["original_reward"], summary["replay_reward"]) == (1.0, 1.0)
    assert 0 < summary["similarity"] < 1
    assert report.rollout["completion"] == [
        {"role": "assistant", "content": "Rounded half up with Decimal."}
    ]


def test_the_same_completion_is_identical(bare_rollout_project):
    report = replay(bare_rollout_project, answer=ORIGINAL, reward=1.0)
    assert outcome(report) == ("identical", "same_completion")
    assert report.summary()["similarity"] == 1.0


def test_a_reward_on_the_other_side_is_divergent(bare_rollout_project):
    assert outcome(replay(bare_rollout_project, answer="gave up", reward=0.0)) == (
        "divergent",
        "replay_reward_fails",
    )
    assert outcome(
        replay(bare_rollout_project, original_reward=0.0, answer="fixed", reward=1)
    ) == (
        "divergent",
        "replay_reward_passes",
    )


def test_a_harness_that_fails_is_inconclusive_even_with_a_result(bare_rollout_project):
    report = replay(bare_rollout_project, answer="x", reward=1.0, exit=3)
    assert outcome(report) == ("inconclusive", "harness_failed")
    assert "status 3" in report.decision.reason
    assert "harness done" in report.agent.output


def test_a_missing_result_is_inconclusive(bare_rollout_project):
    assert outcome(replay(bare_rollout_project, no_result=True)) == (
        "inconclusive",
        "result_missing",
    )


@pytest.mark.parametrize(
    "raw",
    [
        "not json",
        '{"completion": "x", "reward": NaN}',
        '{"completion": "x", "reward": "1.0"}',
        '{"completion": {"role": "assistant"}, "reward": 1}',
    ],
)
def test_a_malformed_result_is_inconclusive(bare_rollout_project, raw):
    # Without a separate verifier, whose absence makes the reward required.
    report = replay(bare_rollout_project, raw=raw, verifier=())
    assert outcome(report) == ("inconclusive", "result_malformed")
    assert report.rollout["replay_reward"] is None


def test_a_result_linked_to_a_host_file_is_never_read(bare_rollout_project, tmp_path):
    secret = tmp_path / "host-secret.json"
    secret.write_text(json.dumps({"completion": "host secret", "reward": 1}))
    report = replay(bare_rollout_project, link=str(secret))
    assert outcome(report) == ("inconclusive", "result_malformed")
    assert "host secret" not in json.dumps(report.summary())


def test_a_harness_past_its_time_limit_is_inconclusive(bare_rollout_project):
    bare_rollout_project.time_limit_seconds = 1
    report = replay(bare_rollout_project, sleep=5, answer="late", reward=1)
    assert outcome(report) == ("inconclusive", "timeout")


def test_a_project_without_a_harness_command_is_refused_with_a_reason(
    bare_rollout_project,
):
    task = RolloutTask(
        messages=seed_with(answer="x", reward=1),
        original_completion=ORIGINAL,
        original_reward=1.0,
        pass_threshold=0.5,
        harness_command=(),
        trace_id="t",
    )
    report = execute_rollout(project=bare_rollout_project, task=task, replay_id=424243)
    assert outcome(report) == ("inconclusive", "fixture_failed")
    assert "harness command" in report.decision.reason
