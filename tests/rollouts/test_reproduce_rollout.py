"""``reproduce`` of a rollout: a seed replayed in the sandbox, stored, queued."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from replayhub.demo.model_api import StandInProvider
from replayhub.models import ModelCall, Provider, Replay, ReviewBand
from reviews.services import review_decide
from tests.factories import make_rollout
from tests.gitservers import free_port
from tests.harness import seed_with

pytestmark = pytest.mark.django_db

CONTINUATION = [
    {"role": "assistant", "content": "Used Decimal.quantize for rounding."},
]


def reproduce(*args: str) -> dict:
    out = StringIO()
    call_command("reproduce", *args, "--sync", "--json", stdout=out)
    return json.loads(out.getvalue())


def test_a_seed_replays_to_a_verdict_that_joins_the_top_of_the_queue(rollout_project):
    make_rollout(
        rollout_project,
        external_id="5c1f0e9a",
        reward=1.0,
        seeds=[
            (seed_with(answer="first", reward=0.0), CONTINUATION, ""),
            (
                seed_with(answer="Used ROUND_HALF_UP for rounding.", reward=1.0),
                CONTINUATION,
                "",
            ),
        ],
    )

    summary = reproduce(
        "--project", "invoicer", "--external-id", "5c1f0e9a", "--seed", "2"
    )

    assert summary["verdict"] == "equivalent"
    assert summary["reason_code"] == "rewards_pass"
    assert (summary["original_reward"], summary["replay_reward"]) == (1.0, 1.0)
    assert 0 < summary["similarity"] < 1
    replay = Replay.objects.get(pk=summary["replay"])
    assert replay.seed.number == 2
    assert replay.review_band == ReviewBand.PASSED_DIFF_DIVERGED
    stored = replay.evidence["rollout"]
    assert stored["completion"] == [
        {"role": "assistant", "content": "Used ROUND_HALF_UP for rounding."}
    ]
    assert stored["seed"] == 2 and stored["anchor"] == "tool-call@6"


def test_without_seed_the_first_is_replayed(rollout_project):
    make_rollout(
        rollout_project,
        external_id="t1",
        reward=1.0,
        seeds=[(seed_with(answer="gave up", reward=0.0), CONTINUATION, "")],
    )
    summary = reproduce("--project", "invoicer", "--external-id", "t1")
    assert (summary["verdict"], summary["reason_code"]) == (
        "divergent",
        "replay_reward_fails",
    )
    assert Replay.objects.get(pk=summary["replay"]).review_band == ReviewBand.DIVERGENT


def test_a_seed_that_does_not_exist_is_a_one_line_error(rollout_project):
    make_rollout(
        rollout_project, external_id="t2", reward=1.0, seeds=[(seed_with(), [], "")]
    )
    with pytest.raises(
        CommandError, match="has no seed 4 \\(its seeds are numbered 1 to 1"
    ):
        reproduce("--project", "invoicer", "--external-id", "t2", "--seed", "4")


def test_a_reviewer_rerun_replays_the_same_seed(rollout_project, django_user_model):
    run = make_rollout(
        rollout_project,
        external_id="t3",
        reward=1.0,
        seeds=[
            (seed_with(answer="a", reward=1.0), CONTINUATION, ""),
            (seed_with(answer="b", reward=0.0), CONTINUATION, ""),
        ],
    )
    first = reproduce("--project", "invoicer", "--external-id", "t3", "--seed", "2")
    replay = Replay.objects.get(pk=first["replay"])
    reviewer = django_user_model.objects.create_superuser("rita", "r@x.test", "pw")

    review_decide(replay=replay, reviewer=reviewer, decision="rerun", note="")

    rerun = Replay.objects.exclude(pk=replay.pk).get(run=run)
    assert rerun.seed.number == 2


KEY_ENV = "REPLAYHUB_TEST_PROVIDER_KEY"


def test_the_harness_reaches_its_model_through_the_gateway(
    rollout_project, monkeypatch
):
    monkeypatch.setenv(KEY_ENV, "sk-test-real")
    with StandInProvider(key="sk-test-real") as provider:
        rollout_project.providers.add(
            Provider.objects.create(
                name="acme",
                kind="anthropic",
                base_url=provider.base_url,
                key_env=KEY_ENV,
            )
        )
        make_rollout(
            rollout_project,
            external_id="t4",
            reward=1.0,
            seeds=[(seed_with(model=True, expect="expect"), CONTINUATION, "")],
        )
        summary = reproduce("--project", "invoicer", "--external-id", "t4")

    # The stand-in echoes the last user message, which names "expect".
    assert (summary["verdict"], summary["reason_code"]) == (
        "equivalent",
        "rewards_pass",
    )
    (call,) = ModelCall.objects.filter(replay_id=summary["replay"])
    assert call.status == "200" and call.provider == "acme"
    assert summary["usage"]["measured_by"] == "gateway"


def test_the_harness_is_handed_the_replay_mark(rollout_project):
    seeds = [(seed_with(echo="REPLAYHUB_REPLAY_MARK", reward=1.0), [], "x")]
    make_rollout(rollout_project, external_id="t5", reward=1.0, seeds=seeds)

    summary = reproduce("--project", "invoicer", "--external-id", "t5")

    completion = Replay.objects.get(pk=summary["replay"]).evidence["rollout"]
    mark = json.loads(completion["completion"][0]["content"])
    assert mark == {
        "replay": summary["replay"],
        "seed": "t5:continue:tool-call@3",
        "source": "t5",
    }


def test_a_rollout_whose_remote_does_not_answer_is_inconclusive(
    rollout_project, mirror_dir
):
    rollout_project.repo_path = f"git://127.0.0.1:{free_port()}/invoicer"
    rollout_project.save()
    make_rollout(
        rollout_project,
        external_id="5c1f0e9a",
        reward=1.0,
        seeds=[(seed_with(answer="first", reward=1.0), CONTINUATION, "")],
    )

    summary = reproduce("--project", "invoicer", "--external-id", "5c1f0e9a")

    assert (summary["verdict"], summary["reason_code"]) == (
        "inconclusive",
        "repo_unreachable",
    )
    assert "errno=Connection refused" in summary["reason"]
    assert summary["reason"].startswith("The project's repository could not be")
