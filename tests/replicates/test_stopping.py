"""The stopping rule over every state of a few policies, and its exact errors."""

from __future__ import annotations

from itertools import pairwise

import pytest

from replayhub.replicates.stopping import (
    ReplicateDecision,
    ReplicatePolicy,
    boundaries,
    decide,
    evidence,
    next_sample_value,
    operating,
    rule,
    walk,
)

REPRODUCES = ReplicateDecision.REPRODUCES
DOES_NOT = ReplicateDecision.DOES_NOT_REPRODUCE
UNDECIDED = ReplicateDecision.UNDECIDED
ORDER = {DOES_NOT: 0, UNDECIDED: 1, REPRODUCES: 2}

POLICIES = [
    ReplicatePolicy(threshold=0.8, confidence=0.90, most=10),
    ReplicatePolicy(threshold=0.5, confidence=0.90, most=10),
    ReplicatePolicy(threshold=0.7, confidence=0.95, most=10, margin=0.1),
    ReplicatePolicy(threshold=0.8, confidence=0.90, most=20),
    ReplicatePolicy(threshold=0.3, confidence=0.80, most=6, margin=0.2),
    ReplicatePolicy(threshold=0.9, confidence=0.90, most=10, margin=0.05),
]
GRID = [i / 100 for i in range(1, 100)]


def states(policy: ReplicatePolicy):
    for n in range(policy.most + 1):
        for s in range(n + 1):
            yield s, n - s


@pytest.mark.parametrize("policy", POLICIES, ids=str)
def test_more_successes_never_move_a_decision_down(policy):
    for s, f in states(policy):
        here = ORDER[decide(policy, s, f).decision]
        if s + f < policy.most:
            assert ORDER[decide(policy, s + 1, f).decision] >= here, (s, f)
            assert ORDER[decide(policy, s, f + 1).decision] <= here, (s, f)


@pytest.mark.parametrize("policy", POLICIES, ids=str)
def test_a_decision_stays_as_samples_agreeing_with_it_come_in(policy):
    for s, f in states(policy):
        decision = decide(policy, s, f).decision
        for more in range(1, 4):
            if decision is REPRODUCES:
                assert decide(policy, s + more, f).decision is REPRODUCES
            if decision is DOES_NOT:
                assert decide(policy, s, f + more).decision is DOES_NOT


@pytest.mark.parametrize("policy", POLICIES, ids=str)
def test_no_sample_decides_nothing_and_k_samples_leave_the_rest_undecided(policy):
    assert decide(policy, 0, 0).decision is UNDECIDED
    for rate in (0.0, 0.3, policy.threshold, 1.0):
        ran = operating(policy, rate)
        total = ran.reproduces + ran.does_not_reproduce + ran.undecided
        assert total == pytest.approx(1)
        assert ran.expected_samples <= policy.most
    found = boundaries(policy)
    for s, f in states(policy):
        weight = evidence(policy, s, f)
        between = found.lower < weight < found.upper
        assert (decide(policy, s, f).decision is UNDECIDED) == between, (s, f)


@pytest.mark.parametrize("policy", POLICIES, ids=str)
def test_wrong_decisions_are_within_alpha_on_both_sides_of_the_zone(policy):
    found = boundaries(policy)
    assert found.wrong_reproduces <= policy.alpha
    assert found.wrong_does_not <= policy.alpha
    for rate in GRID:
        ran = operating(policy, rate)
        if rate <= policy.low:
            assert ran.reproduces <= policy.alpha, rate
        if rate >= policy.high:
            assert ran.does_not_reproduce <= policy.alpha, rate


@pytest.mark.parametrize("policy", POLICIES, ids=str)
def test_the_chance_of_reproduces_rises_with_the_rate(policy):
    chances = [operating(policy, rate).reproduces for rate in GRID]
    assert all(a <= b + 1e-12 for a, b in pairwise(chances))


@pytest.mark.parametrize("policy", POLICIES, ids=str)
def test_each_threshold_is_the_least_evidence_within_alpha(policy):
    """One lattice step weaker and the exact error passes alpha: the
    calibration spends no replicate it does not need."""
    found = boundaries(policy)
    weights = {evidence(policy, s, f) for s, f in states(policy)}
    weaker_up = [w for w in weights if 1e-9 < w < found.upper - 1e-9]
    weaker_down = [w for w in weights if found.lower + 1e-9 < w < -1e-9]
    if weaker_up:
        up = max(weaker_up) - 1e-12

        def looser(s, f):
            weight = evidence(policy, s, f)
            if weight >= up:
                return REPRODUCES
            return DOES_NOT if weight <= found.lower + 1e-9 else UNDECIDED

        ran = walk(looser, policy.most, lambda s, f: policy.low)
        assert ran.reproduces > policy.alpha
    if weaker_down:
        down = min(weaker_down) + 1e-12

        def looser_down(s, f):
            weight = evidence(policy, s, f)
            if weight <= down:
                return DOES_NOT
            return REPRODUCES if weight >= found.upper - 1e-9 else UNDECIDED

        ran = walk(looser_down, policy.most, lambda s, f: policy.high)
        assert ran.does_not_reproduce > policy.alpha


def test_the_default_policy_settles_as_its_evidence_says():
    policy = POLICIES[0]  # 0.8 at 90 %, k = 10: 0.65 against 0.95
    assert decide(policy, 6, 0).decision is REPRODUCES
    assert decide(policy, 5, 0).decision is UNDECIDED
    assert decide(policy, 0, 2).decision is DOES_NOT
    assert decide(policy, 4, 1).decision is UNDECIDED
    assert decide(policy, 9, 1).decision is UNDECIDED  # inside the zone: 0.9


def test_a_decision_no_k_samples_can_support_is_never_claimed():
    policy = ReplicatePolicy(threshold=0.9, confidence=0.90, most=10, margin=0.05)
    assert boundaries(policy).upper == float("inf")
    assert decide(policy, 10, 0).decision is UNDECIDED
    assert all(
        decide(policy, s, f).decision is not REPRODUCES for s, f in states(policy)
    )


def test_the_standing_counts_inconclusive_replicates_apart():
    standing = decide(POLICIES[0], 7, 2, inconclusive=1)
    assert (standing.samples, standing.replays) == (9, 10)
    assert standing.rate == pytest.approx(7 / 9)
    assert standing.coverage == pytest.approx(0.9)
    low, high = standing.interval
    assert low < 7 / 9 < high
    empty = decide(POLICIES[0], 0, 0)
    assert (empty.rate, empty.coverage, empty.interval) == (None, None, (0.0, 1.0))
    assert decide(POLICIES[0], 0, 0, inconclusive=3).coverage == 0


@pytest.mark.parametrize(
    "arguments",
    [
        {"threshold": 0.9, "confidence": 0.9, "most": 10},  # zone past 1
        {"threshold": 0.8, "confidence": 1.0, "most": 10},
        {"threshold": 0.8, "confidence": 0.9, "most": 0},
        {"threshold": 0.8, "confidence": 0.9, "most": 51},
        {"threshold": 0.8, "confidence": 0.9, "most": 10, "margin": 0},
    ],
)
def test_a_policy_that_cannot_be_tested_is_refused(arguments):
    with pytest.raises(ValueError):
        ReplicatePolicy(**arguments)


def test_negative_counts_are_refused():
    with pytest.raises(ValueError):
        decide(POLICIES[0], -1, 0)


@pytest.mark.parametrize("policy", POLICIES, ids=str)
def test_a_settled_run_or_one_at_k_is_worth_no_replicate(policy):
    for s, f in states(policy):
        value = next_sample_value(policy, s, f)
        if decide(policy, s, f).decision is not UNDECIDED or s + f == policy.most:
            assert value == 0
            continue
        assert 0 < value <= 1 or not reachable_decision(policy, s, f), (s, f)
        after = {rule(policy)(s + 1, f), rule(policy)(s, f + 1)}
        if UNDECIDED not in after:
            assert value == pytest.approx(1)


def reachable_decision(policy, s, f):
    ran = walk(rule(policy), policy.most, lambda a, b: 0.5, s, f)
    return ran.reproduces + ran.does_not_reproduce > 0


def test_runs_closer_to_settling_rank_first():
    policy = POLICIES[0]
    # Five straight successes: the next one settles it at once if it comes.
    assert next_sample_value(policy, 5, 0) > next_sample_value(policy, 1, 0)
    assert next_sample_value(policy, 1, 1) > next_sample_value(policy, 4, 1)
    # Past one failure, 0.95 is out of reach in ten: only "does not" is left,
    # and it needs another failure, which the samples say is unlikely.
    assert next_sample_value(policy, 6, 1) < next_sample_value(policy, 1, 1)
