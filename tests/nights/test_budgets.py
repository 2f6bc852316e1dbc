"""Budget arithmetic and night windows, without a database."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from replayhub.nights.arithmetic import (
    DIMENSIONS,
    Amounts,
    blocking_dimensions,
    caps_for_replay,
    estimate,
    fits,
    night_containing,
    remaining,
    window_for,
)

LIMITS = Amounts(10, 3600, 100_000, Decimal("5.00"))
CAPS = Amounts(1, 600, 20_000, Decimal("1.00"))


def test_remaining_subtracts_reserved_and_used():
    left = remaining(
        limits=LIMITS,
        reserved=Amounts(2, 1200, 40_000, Decimal("2.00")),
        used=Amounts(3, 600, 10_000, Decimal("0.50")),
    )
    assert left == Amounts(5, 1800, 50_000, Decimal("2.50"))


def test_an_overrun_leaves_nothing_rather_than_a_negative_amount():
    left = remaining(
        limits=LIMITS, reserved=Amounts(), used=Amounts(1, 4000, 0, Decimal("6"))
    )
    assert left.sandbox_seconds == 0
    assert left.cost_usd == 0
    assert left.replays == 9


@pytest.mark.parametrize("dimension", DIMENSIONS)
def test_an_estimate_that_does_not_fit_on_one_dimension_is_refused(dimension):
    left = Amounts(1, 600, 20_000, Decimal("1.00"))
    too_much = Amounts(**{**left.as_dict(), dimension: getattr(left, dimension) + 1})
    assert blocking_dimensions(too_much, left) == [dimension]
    assert not fits(too_much, left)
    assert fits(left, left)  # exactly what is left fits


def test_fits_is_exactly_every_dimension_at_most_what_is_left():
    values = [0, 1, 2]
    for est, left in itertools.product(
        itertools.product(values, repeat=4), itertools.product(values, repeat=4)
    ):
        e, r = Amounts(*est), Amounts(*left)
        assert fits(e, r) == all(a <= b for a, b in zip(est, left, strict=True))


def test_with_no_history_the_estimate_is_the_caps():
    assert estimate(recent=[], caps=CAPS) == CAPS


def test_the_estimate_is_the_median_of_recent_actuals_within_the_caps():
    recent = [
        Amounts(1, 100, 5_000, Decimal("0.10")),
        Amounts(1, 300, 50_000, Decimal("0.30")),
        Amounts(1, 200, 7_000, Decimal("0.20")),
    ]
    assert estimate(recent=recent, caps=CAPS) == Amounts(1, 200, 7_000, Decimal("0.20"))
    huge = [Amounts(1, 9999, 999_999, Decimal("99"))] * 3
    assert estimate(recent=huge, caps=CAPS) == CAPS


def test_the_estimate_looks_only_at_the_most_recent_replays():
    old = [Amounts(1, 500, 0, 0)] * 30
    new = [Amounts(1, 10, 0, 0)] * 20
    assert estimate(recent=old + new, caps=CAPS).sandbox_seconds == 10


def test_a_replay_never_gets_a_cap_larger_than_what_remains():
    left = Amounts(3, 120, 5_000, Decimal("1"))
    caps = caps_for_replay(time_limit_seconds=600, max_tokens=20_000, left=left)
    assert (caps.wall_seconds, caps.max_tokens) == (120, 5_000)
    roomy = Amounts(3, 10_000, 1_000_000, Decimal("1"))
    caps = caps_for_replay(time_limit_seconds=600, max_tokens=None, left=roomy)
    assert (caps.wall_seconds, caps.max_tokens) == (600, 1_000_000)


def test_a_window_crossing_midnight_ends_the_next_day():
    start, end = window_for(date(2026, 6, 1), start_hour=22, end_hour=6, tz="UTC")
    assert start == datetime(2026, 6, 1, 22, tzinfo=UTC)
    assert end == datetime(2026, 6, 2, 6, tzinfo=UTC)


def test_a_window_is_in_the_projects_time_zone():
    start, end = window_for(
        date(2026, 6, 1), start_hour=1, end_hour=5, tz="America/New_York"
    )
    assert start == datetime(2026, 6, 1, 5, tzinfo=UTC)  # EDT is UTC-4
    assert end == datetime(2026, 6, 1, 9, tzinfo=UTC)


def test_the_night_of_a_spring_dst_change_is_an_hour_shorter():
    # Europe/Berlin skips 02:00-03:00 on 2026-03-29.
    start, end = window_for(
        date(2026, 3, 29), start_hour=1, end_hour=5, tz="Europe/Berlin"
    )
    assert (end - start).total_seconds() == 3 * 3600


def test_a_start_hour_skipped_by_dst_moves_to_the_first_valid_instant():
    start, _ = window_for(
        date(2026, 3, 29), start_hour=2, end_hour=5, tz="Europe/Berlin"
    )
    assert start == datetime(2026, 3, 29, 1, tzinfo=UTC)  # 03:00 CEST


def test_the_night_of_an_autumn_dst_change_is_an_hour_longer():
    start, end = window_for(
        date(2026, 10, 25), start_hour=1, end_hour=5, tz="Europe/Berlin"
    )
    assert (end - start).total_seconds() == 5 * 3600


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (datetime(2026, 6, 1, 21, 59, tzinfo=UTC), None),
        (datetime(2026, 6, 1, 22, 0, tzinfo=UTC), date(2026, 6, 1)),
        (datetime(2026, 6, 2, 5, 59, tzinfo=UTC), date(2026, 6, 1)),
        (datetime(2026, 6, 2, 6, 0, tzinfo=UTC), None),
    ],
)
def test_the_window_boundaries_are_start_inclusive_end_exclusive(now, expected):
    assert night_containing(now, start_hour=22, end_hour=6, tz="UTC") == expected


def test_the_night_containing_a_moment_uses_the_local_date():
    # 03:30 UTC on June 2nd is 23:30 on June 1st in New York.
    now = datetime(2026, 6, 2, 3, 30, tzinfo=UTC)
    assert night_containing(
        now, start_hour=22, end_hour=6, tz="America/New_York"
    ) == date(2026, 6, 1)


def test_how_many_fit_is_bounded_by_the_tightest_dimension():
    from replayhub.nights.arithmetic import how_many_fit

    estimate = Amounts(1, 100, 1_000, Decimal("0.5"))
    left = Amounts(50, 450, 100_000, Decimal("10"))
    assert how_many_fit(estimate, left, wanted=100) == 4  # sandbox seconds
    assert how_many_fit(estimate, left, wanted=3) == 3
    assert how_many_fit(Amounts(1, 0, 0, 0), left, wanted=100) == 50
    assert how_many_fit(estimate, Amounts(), wanted=5) == 0
