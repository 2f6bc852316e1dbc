"""A run's reproducibility rate as one line of text, pure.

"reproduced 7 of 9 samples, 90 % interval 45-94 %; 1 inconclusive" (an en
dash between the bounds): the
samples are the identical, equivalent and divergent replicates, the interval
Wilson's at the given confidence (``replicates.intervals``), in whole
percent; the inconclusive replicates are named after it whenever there are
any, never dropped.
"""

from __future__ import annotations

from replayhub.replicates.intervals import wilson

DASH = "\N{EN DASH}"


def percent(value: float) -> str:
    """0.9 -> "90 %", 0.975 -> "97.5 %" (a confidence, as people write it)."""
    return f"{value * 100:.4g} %"


def rate_text(
    *, successes: int, failures: int, inconclusive: int, confidence: float
) -> str:
    """The rate, its interval and the inconclusive count in one line."""
    if min(successes, failures, inconclusive) < 0:
        raise ValueError("negative counts")
    samples = successes + failures
    if samples:
        low, high = wilson(successes, samples, confidence)
        noun = "sample" if samples == 1 else "samples"
        text = (
            f"reproduced {successes} of {samples} {noun}, {percent(confidence)} "
            f"interval {round(low * 100)}{DASH}{round(high * 100)} %"
        )
    else:
        text = "no samples yet"
    if inconclusive:
        return f"{text}; {inconclusive} inconclusive"
    return text
