"""Whole replays whose agent calls a model through the gateway, in the real sandbox.

The provider is a local server on 127.0.0.1 speaking the Anthropic messages API
(the stand-in for a paid API); the scripted agent calls it through
``$ANTHROPIC_BASE_URL`` with the placeholder key, as a real agent CLI would.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.core.management import call_command

from replayhub import services
from replayhub.demo.calculator import GOOD, TESTS
from replayhub.demo.model_api import StandInProvider
from replayhub.models import EgressAttempt, ModelCall, Provider, Replay
from tests.factories import make_calc_run
from tests.scripted import original_commit

pytestmark = pytest.mark.django_db

KEY_ENV = "REPLAYHUB_TEST_PROVIDER_KEY"
REAL_KEY = "sk-live-do-not-leak-7f3a9c"
# The agent asks the model with its prompt; the stand-in echoes it, so the fenced
# code in the prompt comes back as the model's answer.
PROMPT = f"model\n\nImplement add() in calc.py:\n```python\n{GOOD}```\n"


@pytest.fixture
def provider(monkeypatch):
    monkeypatch.setenv(KEY_ENV, REAL_KEY)
    with StandInProvider(key=REAL_KEY) as fake:
        yield fake


@pytest.fixture
def gateway_project(calc_project, provider):
    """The calculator project, allowed to call the stand-in as ``acme``."""
    calc_project.providers.add(
        Provider.objects.create(
            name="acme",
            kind="anthropic",
            base_url=provider.base_url,
            key_env=KEY_ENV,
            prices={"coder-large": {"input": "3", "output": "15"}},
        )
    )
    return calc_project


def replay(run) -> Replay:
    created = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=created.pk)
    return Replay.objects.get(pk=created.pk)


def test_an_agent_reaches_its_model_through_the_gateway_with_usage_measured(
    gateway_project, calc_base, calc_good, provider
):
    run = make_calc_run(
        gateway_project,
        prompt=PROMPT,
        original=calc_good,
        base=calc_base,
        model="coder-large",
    )

    result = replay(run)

    assert (result.verdict, result.reason_code) == ("identical", "same_tree")
    (call,) = ModelCall.objects.filter(replay=result)
    assert (call.provider, call.model_requested, call.status) == (
        "acme",
        "coder-large",
        "200",
    )
    assert call.input_tokens > 0 and call.output_tokens > 0
    expected = (Decimal(call.input_tokens) * 3 + Decimal(call.output_tokens) * 15) / (
        10**6
    )
    assert call.cost_usd == expected
    assert result.usage["measured_by"] == "gateway"
    assert result.tokens == call.input_tokens + call.output_tokens
    assert result.cost_usd == expected.quantize(Decimal("0.0001"))
    # The upstream got the real key; the agent only ever held the placeholder.
    assert [r.header("x-api-key") for r in provider.received] == [REAL_KEY]
    assert REAL_KEY not in result.agent_output
    assert REAL_KEY not in json.dumps(result.evidence)
    checks = {c["name"]: c for c in result.evidence["checks"]}
    assert checks["model called"]["outcome"] == "pass"
    denied = EgressAttempt.objects.get(replay=result)
    assert (denied.phase, denied.host, denied.port, denied.allowed) == (
        "agent",
        "pypi.org",
        443,
        False,
    )


def test_the_real_key_is_nowhere_inside_the_sandbox(
    gateway_project, calc_base, calc_good, provider
):
    # The scripted agent prints its environment and every readable /proc environ.
    result = replay(
        make_calc_run(gateway_project, prompt="env", original=calc_good, base=calc_base)
    )

    assert "ANTHROPIC_BASE_URL=http://127.0.0.1:" in result.agent_output
    assert "ANTHROPIC_API_KEY=rh-" in result.agent_output
    assert REAL_KEY not in result.agent_output
    assert KEY_ENV not in result.agent_output


def test_the_tokens_cap_fires_mid_run(gateway_project, calc_base, calc_good, provider):
    gateway_project.max_tokens = 5
    gateway_project.save()
    run = make_calc_run(
        gateway_project,
        prompt=PROMPT.replace("model", "chatty", 1),
        original=calc_good,
        base=calc_base,
    )

    result = replay(run)

    assert (result.verdict, result.reason_code) == ("inconclusive", "cap_fired")
    assert "tokens" in result.reason
    statuses = list(
        ModelCall.objects.filter(replay=result).values_list("status", flat=True)
    )
    assert statuses == ["200", "refused"]
    assert len(provider.received) == 1  # the refused call never left the worker


def test_another_model_is_flagged_and_refused_when_required(
    gateway_project, calc_base, calc_good, provider
):
    provider.answer_model = "coder-tiny"
    run = make_calc_run(
        gateway_project,
        prompt=PROMPT,
        original=calc_good,
        base=calc_base,
        model="coder-large",
    )

    flagged = replay(run)
    gateway_project.require_recorded_model = True
    gateway_project.save()
    refused = replay(run)

    assert flagged.verdict == "identical"
    checks = {c["name"]: c for c in flagged.evidence["checks"]}
    assert checks["model called"]["outcome"] == "fail"
    assert "coder-tiny" in checks["model called"]["detail"]
    assert (refused.verdict, refused.reason_code) == ("inconclusive", "model_mismatch")


def test_a_direct_connection_to_the_upstream_fails(
    gateway_project, calc_base, calc_good, provider
):
    run = make_calc_run(
        gateway_project,
        prompt=f"direct {provider.port}",
        original=calc_good,
        base=calc_base,
    )

    result = replay(run)

    assert "direct connection: failed" in result.agent_output
    assert provider.received == []


def test_a_missing_key_on_the_worker_is_the_harness_s_fault(
    gateway_project, calc_base, calc_good, monkeypatch
):
    monkeypatch.delenv(KEY_ENV)

    result = replay(
        make_calc_run(
            gateway_project, prompt=PROMPT, original=calc_good, base=calc_base
        )
    )

    assert (result.verdict, result.reason_code) == ("inconclusive", "harness_error")
    assert f"${KEY_ENV} is not set" in result.reason


NETWORK_TESTS = TESTS.replace(
    "class AddTests",
    """import urllib.request


class IndexTests(unittest.TestCase):
    def test_index_answers(self):
        urllib.request.urlopen("http://packages.example/simple/", timeout=10)


class AddTests""",
)


def test_tests_that_need_a_denied_host_end_network_required(
    calc_repo, gateway_project, calc_base
):
    original = original_commit(
        calc_repo, GOOD, branch="agent/network", tests=NETWORK_TESTS
    )
    gateway_project.egress_tests = ["127.0.0.1:1"]
    gateway_project.save()
    run = make_calc_run(
        gateway_project, prompt="other", original=original, base=calc_base
    )

    result = replay(run)

    assert (result.verdict, result.reason_code) == (
        "inconclusive",
        "network_required",
    )
    assert "packages.example:80" in result.reason
    attempts = EgressAttempt.objects.filter(replay=result, phase="tests")
    assert attempts.exists() and not attempts.filter(allowed=True).exists()


def test_reproduce_json_lists_model_calls_and_egress(
    gateway_project, calc_base, calc_good, provider, capsys
):
    run = make_calc_run(
        gateway_project,
        prompt=PROMPT,
        original=calc_good,
        base=calc_base,
        model="coder-large",
    )

    call_command("reproduce", str(run.pk), "--sync", "--json")

    out = json.loads(capsys.readouterr().out)
    (call,) = out["model_calls"]
    assert {"provider", "model_requested", "input_tokens", "output_tokens"} <= set(call)
    assert call["status"] == 200 and call["model"] == "coder-large"
    assert [
        (e["host"], e["port"], e["phase"], e["allowed"]) for e in out["egress"]
    ] == [("pypi.org", 443, "agent", False)]
