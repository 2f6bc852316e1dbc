"""The intervals against known values and their exact coverage."""

from __future__ import annotations

from math import comb

import pytest

from replayhub.replicates.intervals import clopper_pearson, one_sided_bound, wilson


def test_wilson_matches_the_textbook_values():
    low, high = wilson(7, 9, 0.95)
    assert (round(low, 3), round(high, 3)) == (0.453, 0.937)
    assert wilson(0, 0, 0.9) == (0.0, 1.0)
    assert wilson(10, 10, 0.9)[1] == 1.0


def test_clopper_pearson_matches_its_closed_forms():
    # All successes (or none): the bound is a power of the tail.
    assert clopper_pearson(10, 10, 0.9)[0] == pytest.approx(0.05 ** (1 / 10))
    assert clopper_pearson(0, 10, 0.95)[1] == pytest.approx(1 - 0.025 ** (1 / 10))
    assert one_sided_bound(10, 10, 0.1, upper=False) == pytest.approx(0.1**0.1)


def coverage(interval, samples: int, rate: float, confidence: float) -> float:
    covered = 0.0
    for s in range(samples + 1):
        low, high = interval(s, samples, confidence)
        if low <= rate <= high:
            covered += comb(samples, s) * rate**s * (1 - rate) ** (samples - s)
    return covered


def test_clopper_pearson_covers_every_rate_at_least_as_stated():
    for samples in (1, 4, 10):
        for rate in [i / 50 for i in range(1, 50)]:
            assert coverage(clopper_pearson, samples, rate, 0.9) >= 0.9 - 1e-9


def test_both_intervals_hold_the_rate_so_far_and_stay_in_zero_to_one():
    for samples in range(1, 12):
        for s in range(samples + 1):
            for interval in (wilson, clopper_pearson):
                low, high = interval(s, samples, 0.9)
                assert 0 <= low <= s / samples <= high <= 1


@pytest.mark.parametrize(("s", "n", "confidence"), [(3, 2, 0.9), (1, 2, 1.0)])
def test_impossible_arguments_are_refused(s, n, confidence):
    with pytest.raises(ValueError):
        wilson(s, n, confidence)
