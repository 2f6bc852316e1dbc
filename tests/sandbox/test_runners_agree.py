"""The same recorded runs replay to the same verdicts under every runner.

The scripted calculator project (its agent a shell script, its tests
``python3 -m unittest``) is replayed under bubblewrap, under Docker on
podman (an image with busybox and the host's python3, imported here), and
under gVisor; each replay names the runner that isolated it. An agent that
asks a model reaches it through the gateway, relayed into each runner.
"""

from __future__ import annotations

import pytest

from replayhub import services
from replayhub.demo.calculator import GOOD
from replayhub.demo.model_api import StandInProvider
from replayhub.models import ModelCall, Provider, Replay
from replayhub.sandbox.base import SandboxUnavailable
from replayhub.sandbox.gvisor import GvisorRunner
from tests.factories import make_calc_run
from tests.sandbox.engines import Podman

pytestmark = pytest.mark.django_db

EXPECTED = {
    "same": ("identical", "same_tree"),
    "other": ("equivalent", "tests_agree"),
    "bad": ("divergent", "replay_fails_tests"),
    "outside": ("divergent", "disallowed_paths"),
}


@pytest.fixture(params=["bwrap", "docker", "gvisor"])
def runner_project(request, calc_project, monkeypatch):
    kind = request.param
    if kind == "docker":
        podman: Podman = request.getfixturevalue("podman")
        monkeypatch.setenv("DOCKER_HOST", podman.host)
        calc_project.sandbox_image = podman.python_image()
    elif kind == "gvisor":
        try:
            GvisorRunner().check()
        except SandboxUnavailable as error:
            pytest.skip(str(error))
    calc_project.runner = kind
    if kind == "gvisor":
        # Required, not only chosen: the replay must still run.
        calc_project.min_isolation = "gvisor"
    calc_project.save()
    return calc_project


@pytest.mark.parametrize("prompt", sorted(EXPECTED))
def test_a_run_replays_to_the_same_verdict_under_every_runner(
    runner_project, calc_base, calc_good, prompt
):
    run = make_calc_run(
        runner_project, prompt=prompt, original=calc_good, base=calc_base
    )
    replay = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=replay.pk)
    result = Replay.objects.get(pk=replay.pk)

    assert (result.verdict, result.reason_code) == EXPECTED[prompt], result.reason
    agent = result.evidence["agent"]
    assert agent["runner"] == runner_project.runner
    assert agent["isolation"] == {"bwrap": "bwrap", "docker": "oci"}.get(
        runner_project.runner, "gvisor"
    )


KEY_ENV = "REPLAYHUB_TEST_PROVIDER_KEY"


def test_an_agent_reaches_its_model_through_the_gateway_under_every_runner(
    runner_project, calc_base, calc_good, monkeypatch
):
    key = "sk-live-runners-agree-4c1d"
    monkeypatch.setenv(KEY_ENV, key)
    with StandInProvider(key=key) as provider:
        runner_project.providers.add(
            Provider.objects.create(
                name="acme",
                kind="anthropic",
                base_url=provider.base_url,
                key_env=KEY_ENV,
                prices={"coder-large": {"input": "3", "output": "15"}},
            )
        )
        run = make_calc_run(
            runner_project,
            prompt=f"model\n\nImplement add() in calc.py:\n```python\n{GOOD}```\n",
            original=calc_good,
            base=calc_base,
            model="coder-large",
        )
        replay = services.replay_create(run=run, trigger="command")
        services.replay_execute(replay_id=replay.pk)
    result = Replay.objects.get(pk=replay.pk)

    assert (result.verdict, result.reason_code) == ("identical", "same_tree"), (
        result.reason,
        result.agent_output,
    )
    (call,) = ModelCall.objects.filter(replay=result)
    assert call.status == "200" and call.input_tokens > 0
    assert result.evidence["agent"]["runner"] == runner_project.runner
