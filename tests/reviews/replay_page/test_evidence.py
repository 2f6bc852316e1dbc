"""The replay page reads a replay's evidence once, typed: stored JSON the
agent's run influenced shows less when odd, never a 500."""

from __future__ import annotations

import pytest
from django.urls import reverse

from reviews.replay_page.evidence import ReplayEvidence, read_evidence
from reviews.services import review_decide
from tests.factories import make_replay

ODD_EVIDENCE = [
    ["not", "a", "mapping"],
    "a string",
    17,
    {
        "checks": "model called",
        "agent": ["exit", 0],
        "unstorable_paths": {"a": 1},
        "unstorable_count": "many",
        "ignored_paths": ["x"],
        "environment": "cached",
        "egress_total": True,
        "tape": ["replay 12"],
    },
    {"checks": [None, 3, {"name": "model called", "outcome": "fail", "detail": 4}]},
    {"tape": {"divergence": "call 3"}},
]


@pytest.mark.parametrize("raw", ODD_EVIDENCE)
def test_odd_evidence_shows_the_page_without_it(client, lead, raw):
    replay = make_replay(verdict="divergent")
    replay.evidence = raw
    replay.save(update_fields=["evidence"])
    client.force_login(lead)

    response = client.get(reverse("reviews:replay_detail", args=[replay.pk]))

    assert response.status_code == 200
    assert 'id="automated-verdict"' in response.content.decode()


def test_missing_or_odd_values_read_as_empty():
    read = read_evidence(ODD_EVIDENCE[3])

    assert read == ReplayEvidence()
    assert read.model_warning == ""
    assert read.tape_origin == ""
    assert read_evidence(None) == ReplayEvidence()
    assert read_evidence({"tape": {"divergence": "call 3"}}).tape_divergence is None


def test_the_values_the_page_shows_are_read_as_stored():
    checks = [
        {"name": "tests", "outcome": "pass"},
        {"name": "model called", "outcome": "fail", "detail": "no call reached it"},
    ]
    divergence = {"call": 3, "detail": "another question"}
    read = read_evidence(
        {
            "checks": [*checks, "not a check"],
            "unstorable_paths": ["a\nb"],
            "unstorable_count": 4,
            "egress_total": 0,
            "tape": {"source": "replay 12", "divergence": divergence},
        }
    )

    assert read.checks == checks
    assert read.model_warning == "no call reached it"
    assert (read.unstorable, read.unstorable_count) == (["a\nb"], 4)
    assert read.egress_total == 0
    assert read.tape_origin == "played from replay 12"
    assert read.tape_divergence == divergence


@pytest.mark.parametrize("raw", ODD_EVIDENCE[:4])
def test_a_replay_with_odd_evidence_can_be_overturned(reviewer, raw):
    replay = make_replay(verdict="divergent")
    replay.evidence = raw
    replay.save(update_fields=["evidence"])

    review = review_decide(
        replay=replay, reviewer=reviewer, decision="overturn", verdict_after="identical"
    )

    assert (review.verdict_before, review.verdict_after) == ("divergent", "identical")
