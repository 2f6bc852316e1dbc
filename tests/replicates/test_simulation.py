"""Simulated runs of known rate: the sequential test's errors and its spend.

A run is decided wrongly when it ends *reproduces* while its true rate is at
or below ``p0 - margin``, or *does not reproduce* while its rate is at or
above ``p0 + margin`` (0.65 and 0.95 for the policy here: 0.8 at 90 %,
k = 10, margin 0.15); each error rate counts the runs on its side only, and
undecided is never wrong. The runs: 10,000 with their rate drawn uniformly
from [0, 1], and 2,000 at each edge of the zone, where a wrong decision is
likeliest. Every rule sees the same rates; a measured rate at an edge is
allowed three standard errors over ``alpha``.
"""

from __future__ import annotations

import random
from math import sqrt

import pytest

from replayhub.replicates.simulation import (
    Tally,
    bonferroni_rule,
    fixed_rule,
    simulate,
    uncorrected_rule,
)
from replayhub.replicates.stopping import (
    ReplicatePolicy,
    boundaries,
    rule,
    walk,
)

POLICY = ReplicatePolicy(threshold=0.8, confidence=0.90, most=10)
RUNS = 10_000
EDGE_RUNS = 2_000
SLACK = 3 * sqrt(POLICY.alpha * (1 - POLICY.alpha) / EDGE_RUNS)
RULES = {
    "sequential": rule(POLICY),
    "fixed": fixed_rule(POLICY),
    "uncorrected": uncorrected_rule(POLICY),
    "bonferroni": bonferroni_rule(POLICY),
}


def runs(name: str, policy: ReplicatePolicy = POLICY) -> tuple[Tally, Tally]:
    """The rule over the uniform runs and over the runs at the zone's edges."""
    rates = random.Random(38).choices([i / 1000 for i in range(1001)], k=RUNS)
    spread = simulate(policy, RULES[name], rates, random.Random(1))
    edges = [policy.low] * EDGE_RUNS + [policy.high] * EDGE_RUNS
    return spread, simulate(policy, RULES[name], edges, random.Random(2))


@pytest.fixture(scope="module")
def tallies() -> dict[str, tuple[Tally, Tally]]:
    return {name: runs(name) for name in RULES}


def test_sequential_stopping_is_wrong_no_more_often_than_its_confidence_allows(
    tallies,
):
    spread, edges = tallies["sequential"]
    assert spread.below > 5000 and spread.above > 400
    assert spread.wrong_reproduces_rate <= POLICY.alpha
    assert spread.wrong_does_not_rate <= POLICY.alpha
    assert edges.wrong_reproduces_rate <= POLICY.alpha + SLACK
    assert edges.wrong_does_not_rate <= POLICY.alpha + SLACK
    # The simulation agrees with the exact walk of every path.
    exact = boundaries(POLICY)
    assert edges.wrong_reproduces_rate == pytest.approx(
        exact.wrong_reproduces, abs=SLACK
    )
    assert edges.wrong_does_not_rate == pytest.approx(exact.wrong_does_not, abs=SLACK)


def test_it_spends_at_most_60_percent_of_the_replicates_of_a_fixed_ten(tallies):
    sequential, _ = tallies["sequential"]
    fixed, fixed_edges = tallies["fixed"]
    assert fixed.replays == RUNS * 10
    assert sequential.replays <= 0.60 * fixed.replays
    # The fixed ten holds the same bound: the comparison is at equal error.
    assert fixed_edges.worst_error <= POLICY.alpha + SLACK


def test_held_to_the_fixed_tens_own_error_it_is_no_worse_and_still_spends_less():
    fixed = RULES["fixed"]
    own = max(
        walk(fixed, 10, lambda s, f: POLICY.low).reproduces,
        walk(fixed, 10, lambda s, f: POLICY.high).does_not_reproduce,
    )
    assert 0.08 < own < 0.09  # nine of ten to reproduce: 8.6 % a side
    matched = ReplicatePolicy(threshold=0.8, confidence=1 - own, most=10)
    exact = boundaries(matched)
    assert max(exact.wrong_reproduces, exact.wrong_does_not) <= own
    rates = random.Random(38).choices([i / 1000 for i in range(1001)], k=RUNS)
    spent = simulate(matched, rule(matched), rates, random.Random(1))
    assert spent.replays <= 0.60 * RUNS * 10


def test_stopping_on_an_uncorrected_interval_is_caught(tallies):
    """Wilson's bounds after every replicate, no correction for the looks: the
    simulation sees it decide wrongly well past alpha."""
    _, edges = tallies["uncorrected"]
    assert edges.wrong_reproduces_rate > POLICY.alpha + SLACK
    assert edges.wrong_does_not_rate > POLICY.alpha + SLACK


def test_a_bonferroni_corrected_interval_holds_its_errors_but_spends_more(tallies):
    spread, edges = tallies["bonferroni"]
    assert edges.worst_error <= POLICY.alpha + SLACK
    sequential, _ = tallies["sequential"]
    assert spread.replays > 1.4 * sequential.replays
    assert spread.decided < sequential.decided
