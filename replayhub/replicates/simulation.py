"""Runs of known rate, simulated: how often a stopping rule decides wrongly,
and how many replicates it spends. Pure; the caller seeds the randomness.

"Wrongly" is the zone's (``replicates.stopping``): *reproduces* for a run
whose true rate is at or below ``p0 - margin``, *does not reproduce* for one
at or above ``p0 + margin``. Each error rate is counted over the runs on its
side of the zone only; undecided is never wrong.

Besides the policy's own test (``stopping.rule``), the rules it was chosen
over, kept here so the test suite and the benchmark measure them in the same
runs:

- :func:`fixed_rule`: ``k`` replicates every time, then *reproduces* at or
  above a cut of successes, the cut chosen exactly for the same ``alpha`` at
  both edges of the zone: what "k = 10 replicates a run" spends.
- :func:`interval_rule`: decide as soon as an interval clears an edge of the
  zone (its lower bound above ``p0 - margin``: reproduces; its upper bound
  below ``p0 + margin``: does not). With Wilson's interval at the stated
  confidence and no correction for looking after every replicate
  (:func:`uncorrected_rule`) it decides wrongly more often than ``alpha``
  says; with exact bounds at ``alpha / k`` a side (:func:`bonferroni_rule`,
  one look in k may be wrong at most) it holds, and spends more.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from math import comb

from replayhub.replicates.intervals import one_sided_bound, wilson
from replayhub.replicates.stopping import (
    ReplicateDecision,
    ReplicatePolicy,
    Rule,
)

Bounds = Callable[[int, int], tuple[float, float]]


@dataclass(frozen=True)
class Tally:
    """What a rule did over a set of simulated runs."""

    runs: int
    replays: int
    decided: int
    below: int  # runs whose true rate is at or below p0 - margin
    above: int  # ... at or above p0 + margin
    wrong_reproduces: int
    wrong_does_not: int

    @property
    def replays_per_run(self) -> float:
        return self.replays / self.runs

    @property
    def wrong_reproduces_rate(self) -> float:
        return self.wrong_reproduces / self.below if self.below else 0.0

    @property
    def wrong_does_not_rate(self) -> float:
        return self.wrong_does_not / self.above if self.above else 0.0

    @property
    def worst_error(self) -> float:
        return max(self.wrong_reproduces_rate, self.wrong_does_not_rate)


def lattice(rule: Rule, most: int) -> dict[tuple[int, int], ReplicateDecision]:
    """``rule`` ruled once for every state of up to ``most`` samples."""
    return {(s, n - s): rule(s, n - s) for n in range(most + 1) for s in range(n + 1)}


def simulate(
    policy: ReplicatePolicy, rule: Rule, rates: Iterable[float], rng: random.Random
) -> Tally:
    """One simulated run per rate: replicate until ``rule`` settles or ``k``."""
    ruled = lattice(rule, policy.most)
    runs = replays = decided = below = above = wrong_up = wrong_down = 0
    for rate in rates:
        s = f = 0
        while (ruling := ruled[s, f]) is ReplicateDecision.UNDECIDED and (
            s + f < policy.most
        ):
            if rng.random() < rate:
                s += 1
            else:
                f += 1
        runs += 1
        replays += s + f
        decided += ruling is not ReplicateDecision.UNDECIDED
        if rate <= policy.low:
            below += 1
            wrong_up += ruling is ReplicateDecision.REPRODUCES
        if rate >= policy.high:
            above += 1
            wrong_down += ruling is ReplicateDecision.DOES_NOT_REPRODUCE
    return Tally(runs, replays, decided, below, above, wrong_up, wrong_down)


def fixed_rule(policy: ReplicatePolicy) -> Rule:
    """``k`` samples, then a cut; never decides when no cut holds ``alpha``."""
    k = policy.most

    def at_least(cut: int, rate: float) -> float:
        return sum(
            comb(k, i) * rate**i * (1 - rate) ** (k - i) for i in range(cut, k + 1)
        )

    cuts = [
        cut
        for cut in range(k + 1)
        if at_least(cut, policy.low) <= policy.alpha
        and 1 - at_least(cut, policy.high) <= policy.alpha
    ]

    def rule(successes: int, failures: int) -> ReplicateDecision:
        if successes + failures < k or not cuts:
            return ReplicateDecision.UNDECIDED
        if successes >= cuts[0]:
            return ReplicateDecision.REPRODUCES
        return ReplicateDecision.DOES_NOT_REPRODUCE

    return rule


def interval_rule(policy: ReplicatePolicy, bounds: Bounds) -> Rule:
    """Decide when ``bounds(s, n)`` clears an edge of the zone (both edges at
    once: the interval lies inside the zone, and the rate so far decides)."""

    def rule(successes: int, failures: int) -> ReplicateDecision:
        samples = successes + failures
        if not samples:
            return ReplicateDecision.UNDECIDED
        lower, upper = bounds(successes, samples)
        up, down = lower > policy.low, upper < policy.high
        if up and down:
            up = successes / samples >= policy.threshold
        if up:
            return ReplicateDecision.REPRODUCES
        if down:
            return ReplicateDecision.DOES_NOT_REPRODUCE
        return ReplicateDecision.UNDECIDED

    return rule


def uncorrected_rule(policy: ReplicatePolicy) -> Rule:
    """Wilson's bounds, ``alpha`` a side, after every replicate."""
    confidence = 1 - 2 * policy.alpha
    return interval_rule(policy, lambda s, n: wilson(s, n, confidence))


def bonferroni_rule(policy: ReplicatePolicy) -> Rule:
    """Exact bounds at ``alpha / k`` a side after every replicate."""
    tail = policy.alpha / policy.most
    return interval_rule(
        policy,
        lambda s, n: (
            one_sided_bound(s, n, tail, upper=False),
            one_sided_bound(s, n, tail, upper=True),
        ),
    )
