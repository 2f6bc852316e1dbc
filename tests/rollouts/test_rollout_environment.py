"""A rollout replay in the project's environment, in the real sandbox: the
harness and the separate verifier see what the setup phase built, read-only,
and a setup that fails ends the replay inconclusive before the harness runs."""

from __future__ import annotations

import pytest

from replayhub.rollouts.replay import RolloutTask, execute_rollout
from tests.factories import make_rollout_project
from tests.harness import make_environment_repo, seed_with

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("env_cache")]

BUILD = [
    "sh",
    "-c",
    'echo built > "$REPLAYHUB_ENV_DIR/marker"; echo "setup ran" >&2',
]


def replay(project, **order):
    task = RolloutTask(
        messages=seed_with(**order),
        original_completion=[{"role": "assistant", "content": "/replayhub-env"}],
        original_reward=1.0,
        pass_threshold=0.5,
        harness_command=("python3", "harness.py"),
        verifier_command=("python3", "verifier.py"),
        trace_id="5c1f0e9a",
        seed_kind="continue",
    )
    return execute_rollout(project=project, task=task, replay_id=616161)


def test_the_harness_and_the_verifier_run_in_the_built_environment(tmp_path):
    project = make_rollout_project(make_environment_repo(tmp_path), setup_command=BUILD)
    order = {
        # The harness answers with the variable naming the environment.
        "echo": "REPLAYHUB_ENV_DIR",
        "reward": 1.0,
        "verify": {"look": ["/replayhub-env/marker"], "expect": "/replayhub-env"},
    }

    first = replay(project, **order)
    second = replay(project, **order)

    assert (first.decision.verdict, first.decision.reason_code) == (
        "identical",
        "same_completion",
    )
    assert first.rollout["completion"][0]["content"] == "/replayhub-env"
    said = first.rollout["verifier"]["output"].splitlines()
    assert "look /replayhub-env/marker: present" in said
    assert first.environment["cached"] is False
    assert second.environment == {**first.environment, "cached": True}


def test_a_failing_setup_ends_the_rollout_setup_failed(tmp_path):
    project = make_rollout_project(
        make_environment_repo(tmp_path),
        setup_command=["sh", "-c", "echo 'no index reachable' >&2; exit 3"],
    )

    report = replay(project, answer="x", reward=1.0)

    assert (report.decision.verdict, report.decision.reason_code) == (
        "inconclusive",
        "setup_failed",
    )
    assert "setup phase failed" in report.decision.reason
    assert "no index reachable" in report.decision.reason
    assert report.environment["failed"] is True
    # The harness never ran: no completion, nothing verified.
    assert report.rollout["completion"] is None
    assert "verifier" not in report.rollout
