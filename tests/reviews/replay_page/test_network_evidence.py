"""The detail page's way-out section: model calls as measured, egress attempts,
and a model other than the recorded one flagged first."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from replayhub.models import EgressAttempt, ModelCall
from tests.factories import make_replay

PAYLOAD = "<script>window.__pwned=1</script>"


def page(client, replay) -> str:
    return client.get(
        reverse("reviews:replay_detail", args=[replay.pk])
    ).content.decode()


@pytest.fixture
def replay(db):
    replay = make_replay(verdict="equivalent")
    ModelCall.objects.create(
        replay=replay,
        provider="acme",
        model_requested="claude-x",
        model_answered=f"claude-y{PAYLOAD}",
        input_tokens=1200,
        output_tokens=300,
        cost_usd=Decimal("0.0081"),
        status="200",
        latency_ms=412.0,
    )
    ModelCall.objects.create(
        replay=replay,
        provider="acme",
        model_requested="claude-x",
        status="429",
        error="the tokens cap was reached",
    )
    EgressAttempt.objects.create(
        replay=replay,
        phase="agent",
        host="pypi.org",
        port=443,
        allowed=False,
        outcome="denied",
    )
    EgressAttempt.objects.create(
        replay=replay,
        phase="tests",
        host=f"{PAYLOAD}.example",
        port=443,
        allowed=True,
        outcome="ok",
        bytes_up=512,
        bytes_down=4096,
    )
    replay.evidence["checks"].append(
        {
            "name": "model called",
            "outcome": "fail",
            "evidence_class": "independently_observed",
            "detail": "The agent called claude-y; the record names claude-x.",
        }
    )
    replay.save()
    return replay


def test_model_calls_show_measured_usage_and_money_only_for_leads(
    client, lead, reviewer, replay
):
    client.force_login(lead)
    html = page(client, replay)
    calls = html[html.index('id="model-calls"') :]
    assert "1200" in calls and "300" in calls and "$0.0081" in calls
    assert "429" in calls and "the tokens cap was reached" in calls

    client.force_login(reviewer)
    assert "$0.0081" not in page(client, replay)


def test_every_egress_attempt_is_listed_and_escaped(client, reviewer, replay):
    client.force_login(reviewer)
    html = page(client, replay)

    egress = html[html.index('id="egress"') :]
    assert "pypi.org:443" in egress and "denied" in egress
    assert "allowed" in egress and "4.0\xa0KB" in egress
    assert PAYLOAD not in html


def test_another_model_is_the_first_warning(client, reviewer, replay):
    client.force_login(reviewer)
    html = page(client, replay)

    warnings = html[html.index('class="warnings"') :]
    assert warnings.index("model-warning") < warnings.index("</ul>")
    assert "The agent called claude-y; the record names claude-x." in warnings


def test_the_page_shows_a_calls_reservation_and_an_estimated_usage(client, lead):
    client.force_login(lead)
    replay = make_replay(verdict="inconclusive")
    ModelCall.objects.create(
        replay=replay,
        provider="acme",
        model_requested="coder",
        input_tokens=400,
        output_tokens=4096,
        reserved_tokens=4496,
        usage_estimated=True,
        status="200",
        error="the agent disconnected",
    )

    html = page(client, replay)

    assert "Reserved" in html and ">4496<" in html
    assert "usage: estimated" in html
