"""The rate as people read it."""

from __future__ import annotations

import pytest

from replayhub.replicates.rates import percent, rate_text


def test_the_rate_its_interval_and_the_inconclusive_in_one_line():
    text = rate_text(successes=7, failures=2, inconclusive=1, confidence=0.95)
    assert (
        text
        == "reproduced 7 of 9 samples, 95 % interval 45\N{EN DASH}94 %; 1 inconclusive"
    )


def test_no_inconclusive_replicate_is_named_only_when_there_is_none():
    text = rate_text(successes=1, failures=0, inconclusive=0, confidence=0.9)
    assert text == "reproduced 1 of 1 sample, 90 % interval 27\N{EN DASH}100 %"


def test_no_samples_yet_still_counts_the_inconclusive():
    assert (
        rate_text(successes=0, failures=0, inconclusive=2, confidence=0.9)
        == "no samples yet; 2 inconclusive"
    )
    assert rate_text(successes=0, failures=0, inconclusive=0, confidence=0.9) == (
        "no samples yet"
    )


def test_confidences_read_as_written():
    assert [percent(c) for c in (0.9, 0.95, 0.975, 0.8)] == [
        "90 %",
        "95 %",
        "97.5 %",
        "80 %",
    ]


def test_negative_counts_are_refused():
    with pytest.raises(ValueError):
        rate_text(successes=-1, failures=0, inconclusive=0, confidence=0.9)
