"""Which night a replay belongs to, in the project's own time zone."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from replayhub.models import Rollup
from reviews.trends.rollups import night_of, night_start, rollup_range
from tests.factories import make_project
from tests.reviews.trends import data


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("finished", "start_hour", "tz", "night"),
    [
        # Before the start hour the replay still belongs to the previous night.
        (utc(2026, 3, 5, 0, 30), 1, "UTC", date(2026, 3, 4)),
        (utc(2026, 3, 5, 1, 0), 1, "UTC", date(2026, 3, 5)),
        # 00:30 in Los Angeles (PST, UTC-8) is 08:30 UTC.
        (utc(2026, 3, 5, 8, 30), 1, "America/Los_Angeles", date(2026, 3, 4)),
        (utc(2026, 3, 5, 9, 0), 1, "America/Los_Angeles", date(2026, 3, 5)),
        # Tokyo is a day ahead of UTC for most of its evening.
        (utc(2026, 3, 4, 15, 30), 1, "Asia/Tokyo", date(2026, 3, 4)),
        (utc(2026, 3, 4, 16, 0), 1, "Asia/Tokyo", date(2026, 3, 5)),
        # Start hour 0: the local date itself.
        (utc(2026, 3, 4, 23, 59), 0, "UTC", date(2026, 3, 4)),
        # Late windows (22 → 6): a replay at 23:00 belongs to that date...
        (utc(2026, 3, 4, 23, 0), 22, "UTC", date(2026, 3, 4)),
        # ...and one at 05:00 the next morning still to the night before.
        (utc(2026, 3, 5, 5, 0), 22, "UTC", date(2026, 3, 4)),
    ],
)
def test_a_replay_belongs_to_the_night_that_last_started_before_it_finished(
    finished, start_hour, tz, night
):
    assert night_of(finished, start_hour=start_hour, tz=tz) == night


def test_the_boundary_follows_the_local_clock_across_the_autumn_dst_change():
    # Europe/Berlin falls back at 03:00 CEST on 25 Oct 2026. With nights
    # starting at 03:00, the night of the 25th starts at 03:00 CET = 02:00 UTC.
    # A replay finishing at 01:30 UTC (02:30 CET, the repeated hour) is before
    # that start: it belongs to the night of the 24th. Subtracting three hours
    # in UTC before converting would have put it on the 25th.
    finished = utc(2026, 10, 25, 1, 30)
    assert night_of(finished, start_hour=3, tz="Europe/Berlin") == date(2026, 10, 24)
    assert night_start(date(2026, 10, 25), start_hour=3, tz="Europe/Berlin") == utc(
        2026, 10, 25, 2, 0
    )


def test_a_start_hour_skipped_by_spring_dst_starts_the_night_after_the_gap():
    # Los Angeles skips 02:00-03:00 on 8 Mar 2026; 03:00 PDT is 10:00 UTC.
    start = night_start(date(2026, 3, 8), start_hour=2, tz="America/Los_Angeles")
    assert start == utc(2026, 3, 8, 10, 0)
    assert night_of(start, start_hour=2, tz="America/Los_Angeles") == date(2026, 3, 8)
    before = start - timedelta(minutes=1)
    assert night_of(before, start_hour=2, tz="America/Los_Angeles") == date(2026, 3, 7)


@pytest.mark.parametrize("tz", ["UTC", "Europe/Berlin", "America/Los_Angeles"])
@pytest.mark.parametrize("start_hour", [0, 1, 2, 3, 22])
def test_night_of_agrees_with_the_nights_own_start_times_through_both_dst_changes(
    tz, start_hour
):
    for first in (date(2026, 3, 6), date(2026, 10, 23), date(2026, 10, 30)):
        instant = night_start(first, start_hour=start_hour, tz=tz)
        end = instant + timedelta(days=4)
        while instant < end:
            night = night_of(instant, start_hour=start_hour, tz=tz)
            assert night_start(night, start_hour=start_hour, tz=tz) <= instant
            following = night + timedelta(days=1)
            assert instant < night_start(following, start_hour=start_hour, tz=tz)
            instant += timedelta(minutes=20)


def test_the_rollup_places_replays_without_a_night_in_their_projects_time_zone(db):
    tokyo = make_project("tokyo", tz="Asia/Tokyo", start_hour=1)
    plain = make_project("plain")  # no Budget row: UTC, nights start at 01:00
    for item in (tokyo, plain):
        data.replay(item, verdict="identical", finished_at=utc(2026, 3, 4, 15, 30))
        data.replay(item, verdict="divergent", finished_at=utc(2026, 3, 4, 16, 0))
        data.replay(item, verdict="equivalent", finished_at=utc(2026, 3, 5, 0, 30))

    rollup_range(since=date(2026, 3, 4), until=date(2026, 3, 5))

    counted = {
        (r.project.slug, r.date): (r.identical, r.divergent, r.equivalent)
        for r in Rollup.objects.select_related("project")
    }
    assert counted == {
        # 00:30 and 01:00 JST on the 5th, and 09:30 JST on the 5th.
        ("tokyo", date(2026, 3, 4)): (1, 0, 0),
        ("tokyo", date(2026, 3, 5)): (0, 1, 1),
        # 15:30 and 16:00 UTC on the 4th, and 00:30 UTC on the 5th.
        ("plain", date(2026, 3, 4)): (1, 1, 1),
    }


def test_the_rollup_handles_the_autumn_dst_night_in_berlin(db):
    berlin = make_project("berlin", tz="Europe/Berlin", start_hour=3)
    data.replay(berlin, verdict="identical", finished_at=utc(2026, 10, 25, 1, 30))
    data.replay(berlin, verdict="divergent", finished_at=utc(2026, 10, 25, 2, 0))

    rollup_range(since=date(2026, 10, 24), until=date(2026, 10, 25))

    counted = dict(Rollup.objects.values_list("date", "attempted"))
    assert counted == {date(2026, 10, 24): 1, date(2026, 10, 25): 1}
    assert Rollup.objects.get(date=date(2026, 10, 25)).divergent == 1
