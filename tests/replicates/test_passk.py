"""pass^k against every subset of the samples, and its unbiasedness."""

from __future__ import annotations

from itertools import combinations
from math import comb

import pytest

from replayhub.replicates.passk import pass_hat_k, pass_hat_ks


def by_subsets(n: int, c: int, k: int) -> float:
    samples = [True] * c + [False] * (n - c)
    subsets = list(combinations(samples, k))
    return sum(all(subset) for subset in subsets) / len(subsets)


def test_pass_hat_k_is_the_share_of_k_subsets_that_all_succeed():
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, min(n, 5) + 1):
                assert pass_hat_k(n, c, k) == pytest.approx(by_subsets(n, c, k))


def test_its_expectation_is_the_chance_that_k_tries_all_succeed():
    for n in (5, 8):
        for k in range(1, 6):
            for rate in (0.1, 0.5, 0.83):
                expected = sum(
                    comb(n, c) * rate**c * (1 - rate) ** (n - c) * pass_hat_k(n, c, k)
                    for c in range(n + 1)
                )
                assert expected == pytest.approx(rate**k)


def test_more_tries_than_samples_is_not_estimated():
    assert pass_hat_k(3, 3, 4) is None
    assert pass_hat_ks(3, 2) == {1: 2 / 3, 2: 1 / 3, 3: 0.0, 4: None, 5: None}


def test_pass_at_one_is_the_rate_and_all_successes_pass_every_k():
    assert pass_hat_k(9, 7, 1) == pytest.approx(7 / 9)
    assert all(value == 1 for value in pass_hat_ks(6, 6).values())


@pytest.mark.parametrize(("n", "c", "k"), [(5, 6, 1), (5, -1, 1), (5, 3, 0)])
def test_impossible_counts_are_refused(n, c, k):
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)
