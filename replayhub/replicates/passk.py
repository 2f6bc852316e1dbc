"""pass^k: the probability that all of k tries succeed, estimated from samples.

From ``n`` independent samples of one run, ``c`` of them successes,
``C(c, k) / C(n, k)`` is the unbiased estimator of ``p**k``: it is the share
of the k-sample subsets of the n samples that are all successes, so its
expectation over the samples is exactly the chance that k fresh tries all
succeed (τ-bench's pass^k). It needs ``k <= n``: the expectation of anything
computed from n Bernoulli samples is a polynomial of degree at most n in
``p``, so no unbiased estimator of ``p**k`` exists for ``k > n``, and
:func:`pass_hat_k` answers None there rather than a biased figure.
"""

from __future__ import annotations

from math import comb

# pass^1 ... pass^5, the tries the trends show.
TRIES = range(1, 6)


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """``C(c, k) / C(n, k)``; None when ``k > n`` (not estimable without bias).

    ``n`` samples, ``c`` successes among them (``0 <= c <= n``), ``k >= 1``
    tries; anything else is a ValueError. Inconclusive replays are not samples.
    """
    if k < 1:
        raise ValueError(f"k = {k}: pass^k needs at least one try")
    if not 0 <= c <= n:
        raise ValueError(f"{c} successes of {n} samples")
    if k > n:
        return None
    return comb(c, k) / comb(n, k)


def pass_hat_ks(n: int, c: int) -> dict[int, float | None]:
    """pass^k for k = 1..5 from ``n`` samples with ``c`` successes."""
    return {k: pass_hat_k(n, c, k) for k in TRIES}
