"""A rollout's separate verifier, in the real sandbox: its reward decides, it
runs with no way out, sees nothing the harness phase wrote, and a verifier
that fails ends the replay inconclusive."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.core.checks import run_checks

from replayhub.demo.model_api import StandInProvider
from replayhub.models import Project, Provider
from replayhub.rollouts.replay import RolloutTask, execute_rollout
from tests.factories import make_rollout
from tests.harness import seed_with
from tests.rollouts.test_reproduce_rollout import reproduce

pytestmark = pytest.mark.django_db

ORIGINAL = [{"role": "assistant", "content": "Used Decimal.quantize for rounding."}]
VERIFIER = ("python3", "verifier.py")


def replay(project, *, verifier=VERIFIER, **order):
    task = RolloutTask(
        messages=seed_with(**order),
        original_completion=ORIGINAL,
        original_reward=1.0,
        pass_threshold=0.5,
        harness_command=("python3", "harness.py"),
        verifier_command=verifier,
        trace_id="5c1f0e9a",
        seed_kind="continue",
    )
    return execute_rollout(project=project, task=task, replay_id=515151)


def outcome(report):
    return report.decision.verdict, report.decision.reason_code


def checks(report):
    return {check.name: check for check in report.decision.checks}


def verifier_said(report) -> list[str]:
    return report.rollout["verifier"]["output"].splitlines()


# The harness's honest reward is 0.0; a "tool call" then writes 1.0 over it.
FORGED = {
    "answer": "Gave up on the rounding.",
    "reward": 0.0,
    "forge": 1.0,
    "verify": {"expect": "ROUND_HALF_UP"},
}


def test_a_forged_reward_in_the_result_file_loses_to_the_separate_verifier(
    bare_rollout_project,
):
    report = replay(bare_rollout_project, **FORGED)

    assert outcome(report) == ("divergent", "replay_reward_fails")
    summary = report.summary()
    assert summary["reward_source"] == "separate_verifier"
    assert summary["replay_reward"] == 0.0
    # The forged reward is what the harness's file said; it is kept, ignored.
    assert summary["harness_reward"] == 1.0
    assert report.rollout["harness_reward_ignored"] is True
    reward = checks(report)["replay reward"]
    assert (reward.outcome, reward.evidence_class) == ("fail", "independently_executed")


def test_without_a_separate_verifier_a_forged_pass_is_not_equivalent(
    bare_rollout_project,
):
    report = replay(bare_rollout_project, verifier=(), **FORGED)

    assert outcome(report) == ("inconclusive", "reward_unverified")
    assert report.summary()["reward_source"] == "harness"
    assert report.summary()["replay_reward"] == 1.0
    reward = checks(report)["replay reward"]
    assert reward.evidence_class == "executor_supplied"
    assert "verifier" not in report.rollout


def test_the_verifier_passes_what_it_passes(bare_rollout_project):
    report = replay(
        bare_rollout_project,
        answer="Used ROUND_HALF_UP.",
        no_reward=True,
        verify={"expect": "ROUND_HALF_UP"},
    )
    assert outcome(report) == ("equivalent", "rewards_pass")
    assert report.summary()["harness_reward"] is None
    assert report.rollout["verifier"]["exit_code"] == 0


def test_the_verifier_cannot_reach_the_network_or_the_model(
    bare_rollout_project, monkeypatch
):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    monkeypatch.setenv("REPLAYHUB_TEST_PROVIDER_KEY", "sk-test-real")
    try:
        with StandInProvider(key="sk-test-real") as provider:
            bare_rollout_project.providers.add(
                Provider.objects.create(
                    name="acme",
                    kind="anthropic",
                    base_url=provider.base_url,
                    key_env="REPLAYHUB_TEST_PROVIDER_KEY",
                )
            )
            gateway = urlsplit(provider.base_url).netloc
            host_probe = replay(
                bare_rollout_project,
                model=True,
                expect="expect",
                verify={"probe": f"127.0.0.1:{port}", "reward": 1.0},
            )
            model_probe = replay(
                bare_rollout_project,
                answer="x",
                reward=1.0,
                verify={"probe": gateway, "reward": 1.0},
            )
    finally:
        listener.close()

    # The harness reached its model (the stand-in echoes "expect" back) ...
    assert host_probe.model_calls and outcome(host_probe)[0] == "equivalent"
    # ... the verifier reached nothing, and has no proxy or model to use.
    for report in (host_probe, model_probe):
        said = verifier_said(report)
        assert any(line.startswith("probe: unreachable") for line in said), said
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ANTHROPIC_BASE_URL"):
            assert f"env {name}: unset" in said
        assert "env ANTHROPIC_API_KEY: unset" in said


def test_the_verifier_sees_none_of_the_harness_phase_files(bare_rollout_project):
    left = ["left.txt", "/replayhub/left.txt"]
    report = replay(
        bare_rollout_project,
        answer="Used ROUND_HALF_UP.",
        reward=1.0,
        leave=left,
        verify={"look": [*left, "harness.py", "/replayhub/seed.json"]},
    )

    said = verifier_said(report)
    assert "look left.txt: absent" in said
    assert "look /replayhub/left.txt: absent" in said
    assert "look /replayhub/seed.json: absent" in said
    # A fresh checkout of the same commit, with its inputs read-only.
    assert "look harness.py: present" in said
    assert "inputs: read-only" in said
    assert outcome(report) == ("equivalent", "rewards_pass")
    # Both phases' directories are gone once the replay ends.
    assert not (Path(settings.REPLAYHUB_WORK_DIR) / "replay-515151").exists()


@pytest.mark.parametrize(
    ("verify", "detail"),
    [
        ({"exit": 2, "reward": 1.0}, "status 2"),
        ({"no_result": True}, "wrote no result file"),
        ({"raw": "a pass, trust me"}, "not JSON"),
        ({"raw": '{"reward": 1, "reward": 0}'}, "repeats the key"),
        ({"raw": '{"reward": "1.0"}'}, "not a number"),
        ({"raw": '{"score": 1.0}'}, 'no "reward"'),
        ({"sleep": 5, "reward": 1.0}, "time limit"),
    ],
)
def test_a_verifier_that_fails_leaves_the_replay_inconclusive(
    bare_rollout_project, verify, detail
):
    bare_rollout_project.test_time_limit_seconds = 1
    report = replay(
        bare_rollout_project, answer="Used ROUND_HALF_UP.", reward=1.0, verify=verify
    )

    assert outcome(report) == ("inconclusive", "verifier_failed")
    assert detail in report.decision.reason
    assert report.rollout["replay_reward"] is None
    assert checks(report)["replay reward"].evidence_class == "unavailable"


def test_with_a_verifier_the_harness_reward_is_not_even_read_strictly(
    bare_rollout_project,
):
    report = replay(
        bare_rollout_project,
        raw='{"completion": "Used ROUND_HALF_UP.", "reward": "lots"}',
        verify={"expect": "ROUND_HALF_UP"},
    )
    assert outcome(report) == ("equivalent", "rewards_pass")
    assert report.summary()["harness_reward"] is None


def test_reproduce_json_names_the_reward_source(bare_rollout_project):
    bare_rollout_project.harness_command = ["python3", "harness.py"]
    bare_rollout_project.save()
    make_rollout(
        bare_rollout_project,
        external_id="t9",
        reward=1.0,
        seeds=[(seed_with(answer="Used ROUND_HALF_UP.", reward=1.0), ORIGINAL, "")],
    )

    unverified = reproduce("--project", "invoicer", "--external-id", "t9")
    bare_rollout_project.verifier_command = list(VERIFIER)
    bare_rollout_project.save()
    verified = reproduce("--project", "invoicer", "--external-id", "t9")

    assert (unverified["reward_source"], unverified["reason_code"]) == (
        "harness",
        "reward_unverified",
    )
    assert (verified["reward_source"], verified["reason_code"]) == (
        "separate_verifier",
        "rewards_pass",
    )


def test_check_deploy_warns_of_rollout_projects_without_a_separate_verifier(
    bare_rollout_project,
):
    bare_rollout_project.harness_command = ["python3", "harness.py"]
    bare_rollout_project.save()
    Project.objects.create(
        slug="verified",
        repo_path=bare_rollout_project.repo_path,
        harness_command=["python3", "harness.py"],
        verifier_command=list(VERIFIER),
    )

    found = run_checks(include_deployment_checks=True)
    quiet = run_checks()

    warnings = [str(w) for w in found if w.id == "replayhub.W003"]
    assert len(warnings) == 1 and "invoicer" in warnings[0]
    assert "no separate verifier" in warnings[0]
    # Only the deploy check says it: other commands stay quiet.
    assert not [w for w in quiet if w.id == "replayhub.W003"]
