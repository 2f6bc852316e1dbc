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


def test_the_tokens_cap_refuses_a_call_that_could_pass_it(
    gateway_project, calc_base, calc_good, provider
):
    # The agent asks for up to 512 tokens: more than the cap, before it goes up.
    gateway_project.max_tokens = 500
    gateway_project.save()
    run = make_calc_run(
        gateway_project,
        prompt=PROMPT.replace("model", "chatty", 1),
        original=calc_good,
        base=calc_base,
    )

    result = replay(run)

    assert (result.verdict, result.reason_code) == ("inconclusive", "cap_fired")
    assert "tokens cap" in result.reason and "500 tokens" in result.reason
    (call,) = ModelCall.objects.filter(replay=result)
    assert call.status == "refused" and call.reserved_tokens == 0
    assert provider.received == []  # the refused call never left the worker


def test_an_agent_retrying_past_a_cap_is_ended_after_the_grace(
    gateway_project, calc_base, calc_good, provider
):
    gateway_project.max_tokens = 500
    gateway_project.cap_grace_seconds = 1
    gateway_project.time_limit_seconds = 60
    gateway_project.save()
    run = make_calc_run(
        gateway_project,
        prompt=PROMPT.replace("model", "persist", 1),
        original=calc_good,
        base=calc_base,
    )

    result = replay(run)

    assert (result.verdict, result.reason_code) == ("inconclusive", "cap_fired")
    assert "the agent was ended 1 s after" in result.reason
    # It would have retried for a minute.
    assert result.evidence["agent"]["duration_s"] < 20
    assert ModelCall.objects.filter(replay=result).count() >= 1


def test_a_replay_whose_calls_spent_past_a_cap_is_cap_fired(
    gateway_project, calc_base, calc_good, provider
):
    # Reserved within the cap, but the upstream billed far more than the call
    # asked for: the replay is not judged on what it spent past its cap.
    gateway_project.max_tokens = 100_000
    gateway_project.save()
    provider.bill_output_tokens = 250_000
    run = make_calc_run(
        gateway_project, prompt=PROMPT, original=calc_good, base=calc_base
    )

    result = replay(run)

    assert (result.verdict, result.reason_code) == ("inconclusive", "cap_fired")
    assert "250," in result.reason and "100,000 tokens" in result.reason


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


def test_every_call_failing_upstream_is_a_provider_error(
    gateway_project, calc_base, calc_good, provider
):
    # The stand-in fails the agent's calls; the agent gives up and exits 0
    # with nothing changed, as Aider does when every retry fails.
    provider.failures = [500]
    run = make_calc_run(
        gateway_project, prompt=PROMPT, original=calc_good, base=calc_base
    )

    result = replay(run)

    assert (result.verdict, result.reason_code) == ("inconclusive", "provider_error")
    assert "HTTP 500 to 1 call" in result.reason
    checks = {c["name"]: c for c in result.evidence["checks"]}
    assert "None of the agent's 1 model calls" in checks["model called"]["detail"]


def test_a_flood_of_refused_connections_is_counted_not_stored_one_by_one(
    gateway_project, calc_base, calc_good, provider, client, admin_user, settings
):
    settings.REPLAYHUB_EVIDENCE_KEPT = 50
    run = make_calc_run(
        gateway_project, prompt="flood 400", original=calc_good, base=calc_base
    )

    result = replay(run)

    # Every attempt is counted; the replay keeps the first ones whole.
    assert EgressAttempt.objects.filter(replay=result).count() == 50
    assert result.evidence["egress_total"] == 400
    counts = result.evidence["egress_counts"]
    assert sum(row["count"] for row in counts) == 400
    assert {row["host"] for row in counts} == {f"host{n}.example" for n in range(7)}
    client.force_login(admin_user)
    html = client.get(f"/replays/{result.pk}/").content.decode()
    assert "400 in all" in html and "page 1 of 1" not in html
    assert html.count("host3.example") >= 1
