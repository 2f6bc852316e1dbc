"""A replayed agent cannot erase its own verdict or its model spend.

The agent of these replays, in the real sandbox, asks the stand-in model once
as any agent does, then sends one call whose JSON nests 700 levels deep, then
writes a wrong ``add``. The gateway refuses the deep call in the Anthropic
shape before it goes up and keeps it; the replay still rules on what the
agent left (``divergent``), with both calls, the usage the gateway measured,
and the night charged. And should anything fail after the agent ran, the
calls and the usage stay on the replay and the night is charged all the same.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.utils import timezone

from replayhub import services
from replayhub.demo.calculator import GOOD
from replayhub.demo.model_api import StandInProvider
from replayhub.models import ModelCall, Provider, Replay
from replayhub.nights import scheduler, shares, tiers
from replayhub.replay import execute
from tests.factories import make_calc_project, make_calc_run
from tests.scripted import original_commit

pytestmark = pytest.mark.django_db

KEY_ENV = "REPLAYHUB_TEST_DEEP_KEY"
REAL_KEY = "sk-deep-test-key-3c1e"
DEPTH = 700
AGENT = r"""
import json, os, sys, urllib.error, urllib.request

depth = int(sys.argv[1])
message = {
    "model": "coder-large",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "implement add"}],
}


def ask(body):
    request = urllib.request.Request(
        os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
        json.dumps(body).encode(),
        {
            "x-api-key": os.environ["ANTHROPIC_API_KEY"],
            "anthropic-version": "2023-06-01",
            "content-type": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            print("answered", answer.status)
    except urllib.error.HTTPError as error:
        print("refused", error.code, error.read().decode()[:400])


ask(message)
if depth:
    pad = []
    for _ in range(depth):
        pad = [pad]
    ask({**message, "pad": pad})
open("calc.py", "w").write("def add(a, b):\n    return a - b\n")
"""


@pytest.fixture
def provider(monkeypatch):
    monkeypatch.setenv(KEY_ENV, REAL_KEY)
    with StandInProvider(key=REAL_KEY) as fake:
        yield fake


@pytest.fixture
def project(calc_repo, provider):
    project = make_calc_project(calc_repo, time_limit_seconds=60)
    project.providers.add(
        Provider.objects.create(
            name="acme",
            kind="anthropic",
            base_url=provider.base_url,
            key_env=KEY_ENV,
            # Dear enough that a few tokens cost cents the night's sums show.
            prices={"coder-large": {"input": "30000", "output": "150000"}},
        )
    )
    return project


def agent_sends(project, depth: int) -> None:
    project.agent_command = ["python3", "-c", AGENT, str(depth)]
    project.save(update_fields=["agent_command"])


def replay_in_a_night(project, calc_repo, calc_base):
    """One replay, run while the project's night is open; the replay and what
    the night's agentic share has left before and after."""
    good = original_commit(calc_repo, GOOD, branch="agent/good")
    run = make_calc_run(project, prompt="deep", original=good, base=calc_base)
    night = scheduler.night_open(project=project, now=timezone.now(), immediate=True)
    before = shares.remaining(night, tiers.AGENTIC)
    created = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=created.pk)
    after = shares.remaining(night, tiers.AGENTIC)
    return Replay.objects.get(pk=created.pk), before, after


def test_a_700_deep_model_call_is_refused_kept_and_the_replay_still_ruled(
    project, calc_repo, calc_base, provider
):
    agent_sends(project, DEPTH)

    result, before, after = replay_in_a_night(project, calc_repo, calc_base)

    assert (result.verdict, result.reason_code) == ("divergent", "replay_fails_tests")
    answered, refused = ModelCall.objects.filter(replay=result).order_by("started_at")
    assert (answered.status, answered.input_tokens > 0) == ("200", True)
    assert refused.status == "refused"
    assert "nests deeper than 100 levels" in refused.error
    # The deep call never went up: the provider saw the first call only.
    assert provider.calls == 1
    # The agent got the refusal in the Anthropic API's own shape.
    assert "refused 400" in result.agent_output
    assert '"type": "error"' in result.agent_output
    assert '"invalid_request_error"' in result.agent_output
    # What the gateway measured is the replay's, and the night's.
    assert result.usage["measured_by"] == "gateway"
    assert result.tokens == answered.input_tokens + answered.output_tokens > 0
    assert result.cost_usd > 0
    assert result.settled and result.night_id is not None
    assert before.tokens - after.tokens == result.tokens
    assert before.cost_usd - after.cost_usd == result.cost_usd


def test_a_failure_after_the_agent_ran_keeps_its_calls_and_charges_the_night(
    project, calc_repo, calc_base, monkeypatch
):
    agent_sends(project, 0)

    def explode(*args, **kwargs):
        raise RuntimeError("the comparison broke\nsecond line")

    monkeypatch.setattr(execute, "compare", explode)

    result, before, after = replay_in_a_night(project, calc_repo, calc_base)

    assert (result.verdict, result.reason_code) == ("inconclusive", "harness_error")
    assert "RuntimeError: the comparison broke" in result.reason
    [call] = ModelCall.objects.filter(replay=result)
    assert call.status == "200" and call.input_tokens > 0
    assert result.tokens == call.input_tokens + call.output_tokens
    assert result.cost_usd > Decimal(0)
    assert result.evidence["agent"]["exit_code"] == 0
    assert before.tokens - after.tokens == result.tokens
    assert before.replays - after.replays == 1
