"""Binomial intervals for a rate from ``successes`` of ``samples``, pure.

Both are two-sided at ``confidence`` (0.90 leaves 5 % on each side) unless a
caller asks for one side through :func:`one_sided_bound`. Wilson's is the one
shown to people: close to its nominal coverage at small samples and never
outside [0, 1]. Clopper-Pearson's is exact (conservative: at least its nominal
coverage for every rate), used where a bound must hold as stated. Neither
accounts for having looked before: after a sequential test has stopped, the
interval describes the samples; the decision's error guarantee is the test's
(``replicates.stopping``).
"""

from __future__ import annotations

from math import comb, sqrt
from statistics import NormalDist

# Bisection steps for a Clopper-Pearson bound: 2**-60 is below float spacing.
_STEPS = 60


def _check(successes: int, samples: int, confidence: float) -> None:
    if not 0 <= successes <= samples:
        raise ValueError(f"{successes} successes of {samples} samples")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence} is not between 0 and 1")


def wilson(successes: int, samples: int, confidence: float) -> tuple[float, float]:
    """Wilson's score interval; (0, 1) without samples."""
    _check(successes, samples, confidence)
    if samples == 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    rate = successes / samples
    scale = 1 + z * z / samples
    centre = (rate + z * z / (2 * samples)) / scale
    half = z * sqrt(rate * (1 - rate) / samples + z * z / (4 * samples**2)) / scale
    # At no successes (all successes) the bound is 0 (1) exactly; the
    # formula reaches it only up to rounding.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == samples else min(1.0, centre + half)
    return low, high


def _at_least(successes: int, samples: int, rate: float) -> float:
    """P(X >= successes) for X ~ Binomial(samples, rate)."""
    return sum(
        comb(samples, i) * rate**i * (1 - rate) ** (samples - i)
        for i in range(successes, samples + 1)
    )


def one_sided_bound(successes: int, samples: int, tail: float, *, upper: bool) -> float:
    """The exact (Clopper-Pearson) bound leaving ``tail`` on its one side.

    The lower bound is the rate at which ``successes`` or more would be seen
    with probability ``tail``; the upper bound mirrors it. The lower bound of
    no successes is 0 and the upper bound of all successes is 1.
    """
    _check(successes, samples, 1 - tail)
    if upper:
        return 1 - one_sided_bound(samples - successes, samples, tail, upper=False)
    if successes == 0:
        return 0.0
    low, high = 0.0, 1.0
    for _ in range(_STEPS):
        middle = (low + high) / 2
        if _at_least(successes, samples, middle) < tail:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def clopper_pearson(
    successes: int, samples: int, confidence: float
) -> tuple[float, float]:
    """The exact two-sided interval; (0, 1) without samples."""
    _check(successes, samples, confidence)
    if samples == 0:
        return 0.0, 1.0
    tail = (1 - confidence) / 2
    return (
        one_sided_bound(successes, samples, tail, upper=False),
        one_sided_bound(successes, samples, tail, upper=True),
    )
