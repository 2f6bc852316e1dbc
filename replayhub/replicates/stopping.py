"""Sequential stopping: after each replicate, is the run's decision settled?

The statistics: Wald's sequential probability ratio test (SPRT) between the
two edges of an indifference zone around the threshold, truncated at the
policy's most replicates ``k``, its two thresholds calibrated exactly on the
truncated lattice.

- **Samples.** A replicate whose verdict is identical or equivalent is a
  success, divergent a failure; inconclusive replicates are not samples
  (they are counted apart, as coverage).
- **The zone.** With threshold ``p0`` and margin ``d``, the test weighs
  ``low = p0 - d`` against ``high = p0 + d``: the evidence after ``s``
  successes and ``f`` failures is the log-likelihood ratio
  ``s·ln(high/low) + f·ln((1-high)/(1-low))``. At or above the upper
  threshold the run *reproduces*, at or below the lower one it *does not
  reproduce*; between them, or once ``k`` samples are in without either, it
  is *undecided*.
- **The guarantee** (``alpha = 1 - confidence``): for every true rate
  ``p <= low`` the chance of ending *reproduces* is at most ``alpha``, and
  for every ``p >= high`` the chance of ending *does not reproduce* is at
  most ``alpha``. That is what "decided wrongly" means here: inside the zone
  either decision is acceptable, and undecided is never wrong. The bound is
  exact, not Wald's approximation: :func:`boundaries` computes both error
  probabilities over every path of the truncated test (:func:`walk`) and
  sets each threshold to the least evidence that keeps its error within
  ``alpha`` (starting from "never", each threshold only ever moves towards
  zero, which lowers the other side's error, so both bounds hold when the
  search stops). The chance of *reproduces* rises with ``p`` (a path with a
  failure turned into a success crosses the upper threshold no later and
  the lower one no sooner), so the edges are the worst cases.
- **Assumptions.** Given the run, replicates are independent draws of one
  rate (the same conditions, no learning between them), and whether a
  replicate is inconclusive says nothing about whether it would have
  reproduced. The guarantee is for the stopped test: the scheduler never
  samples a settled run. A replicate already running when the run settles
  still counts; a success keeps *reproduces* (the evidence only rises) and a
  failure keeps *does not reproduce*, but a sample against the decision can
  unsettle it, and the stated error then no longer covers the run.

Why not an interval that lies above or below ``p0``: it needs no zone but
cannot decide in time. At ``p0 = 0.8``, 90 % and ``k = 10``, ten successes
of ten give a lower bound of 0.79 (Wilson's, two-sided 90 %; the exact
one-sided 10 % bound is 0.79 too) — never above 0.8 — so *reproduces* would
be unreachable, and a Bonferroni correction for the ten looks lowers the
bound further. Recomputing an uncorrected interval after every replicate
inflates its error instead: ``replicates.simulation`` measures that, and an
exact interval with a Bonferroni correction weighed against the zone's
edges, which holds its errors but spends more replicates and settles fewer
runs. ``docs/replicates.md`` has the figures.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from functools import cache, partial
from math import inf, log

from replayhub.replicates.intervals import wilson

# The most replicates a policy may ask for: the exact calibration walks every
# path of the truncated test, some (k + 1)**2 / 2 states per walk.
MOST_REPLICATES = 50
# Evidence values are sums of two logarithms; equal ones differ by rounding.
_EPSILON = 1e-9


class ReplicateDecision(StrEnum):
    REPRODUCES = "reproduces"
    DOES_NOT_REPRODUCE = "does_not_reproduce"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class ReplicatePolicy:
    """A project's replicate policy: threshold ``p0``, confidence, most ``k``.

    ``margin`` is the indifference zone's half-width; the zone
    ``[p0 - margin, p0 + margin]`` must lie strictly inside (0, 1), so a
    threshold near 0 or 1 needs a narrower margin (0.9 takes one under 0.1).
    """

    threshold: float
    confidence: float
    most: int
    margin: float = 0.15

    def __post_init__(self) -> None:
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence {self.confidence} is not between 0 and 1")
        if not 1 <= self.most <= MOST_REPLICATES:
            raise ValueError(f"most replicates {self.most}: 1 to {MOST_REPLICATES}")
        if self.margin <= 0 or not 0 < self.low < self.high < 1:
            raise ValueError(
                f"threshold {self.threshold} with margin {self.margin}: the zone "
                "must lie strictly between 0 and 1"
            )

    @property
    def low(self) -> float:
        return self.threshold - self.margin

    @property
    def high(self) -> float:
        return self.threshold + self.margin

    @property
    def alpha(self) -> float:
        return 1 - self.confidence


@dataclass(frozen=True)
class Boundaries:
    """The calibrated thresholds and their exact error probabilities.

    ``upper`` is inf (and ``lower`` -inf) when no evidence within ``k``
    samples can say so within ``alpha``.
    """

    upper: float
    lower: float
    wrong_reproduces: float  # P(reproduces | p = low)
    wrong_does_not: float  # P(does not reproduce | p = high)


@dataclass(frozen=True)
class Operating:
    """What a test does from one state on: its outcomes' probabilities and the
    samples it is expected to spend before it stops."""

    reproduces: float
    does_not_reproduce: float
    undecided: float
    expected_samples: float


@dataclass(frozen=True)
class Standing:
    """A run's decision with the counts it rests on and their interval.

    ``interval`` is Wilson's at the policy's confidence: it describes the
    samples and is not what decided (see the module's docstring).
    """

    decision: ReplicateDecision
    successes: int
    failures: int
    inconclusive: int
    interval: tuple[float, float]

    @property
    def samples(self) -> int:
        return self.successes + self.failures

    @property
    def replays(self) -> int:
        return self.samples + self.inconclusive

    @property
    def rate(self) -> float | None:
        return self.successes / self.samples if self.samples else None

    @property
    def coverage(self) -> float | None:
        """The share of replays that were samples; None before any replay."""
        return self.samples / self.replays if self.replays else None


Rule = Callable[[int, int], ReplicateDecision]
Chance = Callable[[int, int], float]


def walk(
    rule: Rule, most: int, chance: Chance, successes: int = 0, failures: int = 0
) -> Operating:
    """Every path of a test truncated at ``most`` samples, from one state.

    ``rule(s, f)`` rules a state; ``chance(s, f)`` is the probability that
    the next sample from it succeeds. ``expected_samples`` counts the samples
    drawn after the starting state.
    """
    layer: dict[tuple[int, int], float] = {(successes, failures): 1.0}
    outcome = dict.fromkeys(ReplicateDecision, 0.0)
    spent = 0.0
    while layer:
        following: dict[tuple[int, int], float] = defaultdict(float)
        for (s, f), weight in layer.items():
            ruling = rule(s, f)
            if ruling is not ReplicateDecision.UNDECIDED or s + f >= most:
                outcome[ruling] += weight
                continue
            spent += weight
            p = chance(s, f)
            following[(s + 1, f)] += weight * p
            following[(s, f + 1)] += weight * (1 - p)
        layer = following
    return Operating(
        reproduces=outcome[ReplicateDecision.REPRODUCES],
        does_not_reproduce=outcome[ReplicateDecision.DOES_NOT_REPRODUCE],
        undecided=outcome[ReplicateDecision.UNDECIDED],
        expected_samples=spent,
    )


def evidence(policy: ReplicatePolicy, successes: int, failures: int) -> float:
    """The log-likelihood ratio of ``high`` against ``low`` for these counts."""
    low, high = policy.low, policy.high
    return successes * log(high / low) + failures * log((1 - high) / (1 - low))


def _rule(policy: ReplicatePolicy, upper: float, lower: float) -> Rule:
    def rule(successes: int, failures: int) -> ReplicateDecision:
        weight = evidence(policy, successes, failures)
        if weight >= upper - _EPSILON:
            return ReplicateDecision.REPRODUCES
        if weight <= lower + _EPSILON:
            return ReplicateDecision.DOES_NOT_REPRODUCE
        return ReplicateDecision.UNDECIDED

    return rule


def _first_within(
    candidates: list[float], error: Callable[[float], float], alpha: float
) -> float:
    """The first candidate whose error is at most ``alpha``; the errors fall
    along the list and its last candidate (never deciding) has none."""
    low, high = 0, len(candidates) - 1
    while low < high:
        middle = (low + high) // 2
        if error(candidates[middle]) <= alpha:
            high = middle
        else:
            low = middle + 1
    return candidates[low]


@cache
def boundaries(policy: ReplicatePolicy) -> Boundaries:
    """The least evidence for each decision that keeps its exact error within
    ``alpha`` (the search is in the module's docstring)."""

    def wrong_reproduces(upper: float, lower: float) -> float:
        rule = _rule(policy, upper, lower)
        return walk(rule, policy.most, lambda s, f: policy.low).reproduces

    def wrong_does_not(lower: float, upper: float) -> float:
        rule = _rule(policy, upper, lower)
        return walk(rule, policy.most, lambda s, f: policy.high).does_not_reproduce

    points = sorted(
        {
            evidence(policy, s, n - s)
            for n in range(1, policy.most + 1)
            for s in range(n + 1)
        }
    )
    # Ordered from the weakest evidence to "never": errors fall along each.
    ups = [x for x in points if x > _EPSILON] + [inf]
    downs = [x for x in reversed(points) if x < -_EPSILON] + [-inf]
    alpha = policy.alpha + _EPSILON
    upper, lower = inf, -inf
    while True:
        lower_next = _first_within(downs, partial(wrong_does_not, upper=upper), alpha)
        upper_next = _first_within(
            ups, partial(wrong_reproduces, lower=lower_next), alpha
        )
        if (upper_next, lower_next) == (upper, lower):
            break
        upper, lower = upper_next, lower_next
    return Boundaries(
        upper=upper,
        lower=lower,
        wrong_reproduces=wrong_reproduces(upper, lower),
        wrong_does_not=wrong_does_not(lower, upper),
    )


def rule(policy: ReplicatePolicy) -> Rule:
    """The policy's test as a function of the counts (truncation aside)."""
    found = boundaries(policy)
    return _rule(policy, found.upper, found.lower)


def operating(policy: ReplicatePolicy, rate: float) -> Operating:
    """What the policy's test does for a run whose true rate is ``rate``."""
    return walk(rule(policy), policy.most, lambda s, f: rate)


def decide(
    policy: ReplicatePolicy, successes: int, failures: int, inconclusive: int = 0
) -> Standing:
    """The run's standing after these replicates.

    Undecided when the evidence crosses neither threshold, whether or not
    ``k`` samples are in. Counts past ``k`` (replicates that were running
    when the run settled) are ruled the same way.
    """
    if min(successes, failures, inconclusive) < 0:
        raise ValueError("negative counts")
    return Standing(
        decision=rule(policy)(successes, failures),
        successes=successes,
        failures=failures,
        inconclusive=inconclusive,
        interval=wilson(successes, successes + failures, policy.confidence),
    )


def next_sample_value(policy: ReplicatePolicy, successes: int, failures: int) -> float:
    """How much one more replicate of this run is worth, for ranking runs.

    The chance the run settles before ``k`` per replicate it is expected to
    spend until it stops, under the rate its samples so far suggest (each
    next sample succeeds with the Jeffreys posterior predictive probability,
    ``(s + 1/2) / (n + 1)``). In (0, 1]: 1 when the next sample settles it
    whatever its verdict. 0 for a settled run or one with ``k`` samples: the
    scheduler admits no replicate there. The chance that the next sample
    alone settles the run would not do: it is 0 for most runs that are a few
    samples from settling, and ranks them all alike.
    """
    if rule(policy)(successes, failures) is not ReplicateDecision.UNDECIDED:
        return 0.0
    if successes + failures >= policy.most:
        return 0.0
    ahead = walk(
        rule(policy),
        policy.most,
        lambda s, f: (s + 0.5) / (s + f + 1),
        successes,
        failures,
    )
    settled = ahead.reproduces + ahead.does_not_reproduce
    return settled / ahead.expected_samples
