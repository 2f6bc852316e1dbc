"""The p-chart of the inconclusive rate and the reasons behind a bad night."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from reviews.trends.statistics import (
    NightRate,
    find_alarm,
    limits,
    p_chart,
    reasons_that_moved,
)

START = date(2026, 1, 1)


def steady(days: int, attempted=100, inconclusive=10, reason="timeout"):
    return [
        NightRate(
            START + timedelta(days=i), attempted, inconclusive, {reason: inconclusive}
        )
        for i in range(days)
    ]


def test_limits_are_three_sigma_around_the_pooled_rate():
    center, lower, upper = limits(steady(28), sample_size=100)
    assert center == pytest.approx(0.10)
    sigma = (0.1 * 0.9 / 100) ** 0.5
    assert upper == pytest.approx(0.10 + 3 * sigma)
    assert lower == pytest.approx(0.10 - 3 * sigma)


def test_limits_widen_for_a_small_night():
    _, low_small, up_small = limits(steady(28), sample_size=10)
    _, low_big, up_big = limits(steady(28), sample_size=1000)
    assert up_small > up_big and low_small <= low_big


def test_the_lower_limit_never_goes_below_zero():
    _, lower, _ = limits(steady(28, inconclusive=1), sample_size=5)
    assert lower == 0.0


def test_a_constructed_bad_night_is_out_of_control_and_the_rest_are_not():
    nights = steady(30)
    bad = NightRate(
        START + timedelta(days=30), 100, 35, {"timeout": 10, "baseline_failed": 25}
    )
    points = p_chart([*nights, bad])

    assert [p.night for p in points if p.out_of_control] == [bad.night]
    assert points[-1].rate == pytest.approx(0.35)
    assert points[-1].center == pytest.approx(0.10)


def test_an_unusually_good_night_is_also_out_of_control():
    good = NightRate(START + timedelta(days=30), 400, 0, {})
    assert p_chart([*steady(30), good])[-1].out_of_control


def test_the_first_night_and_empty_nights_have_no_limits():
    empty = NightRate(START + timedelta(days=5), 0, 0, {})
    points = p_chart([*steady(5), empty])
    assert points[0].upper is None and not points[0].out_of_control
    assert points[-1].rate is None and points[-1].upper is None


def test_only_the_trailing_28_nights_set_the_limits():
    old_bad = steady(40, inconclusive=50)
    recent = [
        NightRate(START + timedelta(days=40 + i), 100, 10, {"timeout": 10})
        for i in range(28)
    ]
    today = NightRate(START + timedelta(days=68), 100, 12, {"timeout": 12})
    point = p_chart([*old_bad, *recent, today])[-1]
    assert point.center == pytest.approx(0.10)


def test_the_reasons_that_moved_name_what_drove_the_night():
    history = steady(28)
    bad = NightRate(
        START + timedelta(days=28), 100, 35, {"timeout": 10, "baseline_failed": 25}
    )

    moved = reasons_that_moved(bad, history)

    assert [m.reason for m in moved] == ["baseline_failed"]
    assert moved[0].rate == pytest.approx(0.25)
    assert moved[0].before == 0.0


def test_reasons_are_ranked_by_how_much_they_rose():
    history = [
        NightRate(START + timedelta(days=i), 100, 4, {"timeout": 2, "flaky_tests": 2})
        for i in range(28)
    ]
    night = NightRate(
        START + timedelta(days=28), 100, 40, {"timeout": 10, "flaky_tests": 30}
    )
    assert [m.reason for m in reasons_that_moved(night, history)] == [
        "flaky_tests",
        "timeout",
    ]


def bad_night(day: int) -> NightRate:
    return NightRate(
        START + timedelta(days=day), 100, 35, {"timeout": 10, "baseline_failed": 25}
    )


def test_the_alarm_is_the_newest_night_out_of_control_with_what_moved():
    nights = [*steady(30), bad_night(30)]

    alarm = find_alarm(nights, p_chart(nights), since=START + timedelta(days=2))

    assert alarm.night == START + timedelta(days=30) and alarm.high
    assert (alarm.inconclusive, alarm.attempted) == (35, 100)
    assert alarm.rate == pytest.approx(0.35)
    assert alarm.center == pytest.approx(0.10)
    assert [(s.reason, s.count) for s in alarm.shifts] == [("baseline_failed", 25)]
    assert alarm.shifts[0].rate == pytest.approx(0.25)
    assert alarm.shifts[0].before == 0.0
    assert alarm.latest == alarm.night and not alarm.latest_in_control


def test_steady_nights_raise_no_alarm():
    nights = steady(40)
    assert find_alarm(nights, p_chart(nights), since=START) is None


def test_a_bad_night_before_the_range_only_serves_as_history():
    after = [
        NightRate(START + timedelta(days=31 + i), 100, 10, {"timeout": 10})
        for i in range(3)
    ]
    nights = [*steady(30), bad_night(30), *after]
    assert find_alarm(nights, p_chart(nights), since=after[0].night) is None


def test_the_alarm_says_when_the_latest_night_is_back_within_its_limits():
    after = NightRate(START + timedelta(days=31), 100, 10, {"timeout": 10})
    nights = [*steady(30), bad_night(30), after]

    alarm = find_alarm(nights, p_chart(nights), since=START)

    assert alarm.night == START + timedelta(days=30)
    assert alarm.latest == after.night and alarm.latest_in_control


def test_an_unusually_good_night_is_an_alarm_that_is_not_high():
    good = NightRate(START + timedelta(days=30), 400, 0, {})
    nights = [*steady(30), good]

    alarm = find_alarm(nights, p_chart(nights), since=START)

    assert alarm.night == good.night and not alarm.high and alarm.shifts == []
