"""Rollups counted from replays: hand-counted nights, idempotence, the nightly hook."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from replayhub.models import Night, Replay, Rollup
from replayhub.nights import scheduler
from reviews.trends.rollups import rollup_closed_night, rollup_range
from tests.factories import make_project
from tests.reviews.trends import data

MARCH_2 = date(2026, 3, 2)
IN_NIGHT = datetime(2026, 3, 2, 23, 30, tzinfo=UTC)


def rows(**filters) -> dict[tuple, dict]:
    """The stored rollups as plain values, keyed by (date, project, model)."""
    return {
        (r["date"], r["project__slug"], r["model"]): {
            k: v for k, v in r.items() if k not in {"date", "project__slug", "model"}
        }
        for r in Rollup.objects.filter(**filters).values(
            "date",
            "project__slug",
            "model",
            "attempted",
            "identical",
            "equivalent",
            "divergent",
            "inconclusive",
            "by_reason",
            "confirmed",
            "overturned",
            "deferred",
        )
    }


@pytest.fixture
def counted_night(db, reviewer):
    """One night of the project "shop", counted by hand in the test below."""
    shop = make_project("shop", tz="UTC", start_hour=22)
    march_2 = data.night(shop, MARCH_2, deferred=4)

    def at(minutes):
        return IN_NIGHT + timedelta(minutes=minutes)

    # gpt-5, admitted by the night.
    confirmed = data.replay(shop, night=march_2, verdict="identical", finished_at=at(1))
    data.decide(confirmed, reviewer, "confirm")
    data.replay(shop, night=march_2, verdict="identical", finished_at=at(2))
    changed_mind = data.replay(
        shop, night=march_2, verdict="equivalent", finished_at=at(3)
    )
    data.decide(changed_mind, reviewer, "overturn", after="divergent")
    data.decide(changed_mind, reviewer, "confirm", minutes=10)  # the latest counts
    overturned = data.replay(
        shop, night=march_2, verdict="divergent", finished_at=at(4)
    )
    data.decide(overturned, reviewer, "overturn", after="equivalent")
    data.replay(
        shop,
        night=march_2,
        verdict="inconclusive",
        reason_code="timeout",
        finished_at=at(5),
    )
    data.replay(
        shop,
        night=march_2,
        verdict="inconclusive",
        reason_code="flaky_tests",
        # Admitted by the night, finished long after its window: still its own.
        finished_at=datetime(2026, 3, 4, 12, tzinfo=UTC),
    )
    # gpt-5, no night: a rerun that finished before the next night began.
    data.replay(
        shop,
        verdict="inconclusive",
        reason_code="baseline_failed",
        finished_at=datetime(2026, 3, 3, 21, 59, tzinfo=UTC),
    )
    # claude-opus-4.
    rerun = data.replay(
        shop,
        night=march_2,
        verdict="equivalent",
        model="claude-opus-4",
        finished_at=at(6),
    )
    data.decide(rerun, reviewer, "rerun")
    data.replay(
        shop,
        night=march_2,
        verdict="inconclusive",
        reason_code="timeout",
        model="claude-opus-4",
        finished_at=at(7),
    )
    # A run that recorded no model.
    data.replay(shop, night=march_2, verdict="identical", model="", finished_at=at(8))

    # Not counted: unfinished replays, the next night, another project.
    data.replay(shop, night=march_2, status="running", finished_at=at(9))
    data.replay(shop, night=march_2, status="cancelled", finished_at=at(9))
    data.replay(
        shop, verdict="divergent", finished_at=datetime(2026, 3, 3, 22, tzinfo=UTC)
    )
    other = make_project("billing")
    data.replay(other, verdict="identical", finished_at=IN_NIGHT)
    return shop


HAND_COUNTED = {
    (MARCH_2, "shop", ""): {
        "attempted": 1,
        "identical": 1,
        "equivalent": 0,
        "divergent": 0,
        "inconclusive": 0,
        "by_reason": {},
        "confirmed": {},
        "overturned": {},
        "deferred": 4,
    },
    (MARCH_2, "shop", "claude-opus-4"): {
        "attempted": 2,
        "identical": 0,
        "equivalent": 1,
        "divergent": 0,
        "inconclusive": 1,
        "by_reason": {"timeout": 1},
        "confirmed": {},
        "overturned": {},
        "deferred": 0,
    },
    (MARCH_2, "shop", "gpt-5"): {
        "attempted": 7,
        "identical": 2,
        "equivalent": 1,
        "divergent": 1,
        "inconclusive": 3,
        "by_reason": {"baseline_failed": 1, "flaky_tests": 1, "timeout": 1},
        "confirmed": {"equivalent": 1, "identical": 1},
        "overturned": {"divergent": 1},
        "deferred": 0,
    },
}


def test_a_night_is_counted_exactly_as_by_hand(counted_night):
    written = rollup_range(since=MARCH_2, until=MARCH_2, project=counted_night)

    assert written == 3
    assert rows(project=counted_night) == HAND_COUNTED


def test_rolling_up_all_projects_counts_each_on_its_own_rows(counted_night):
    rollup_range(since=MARCH_2, until=MARCH_2)

    assert rows(project=counted_night) == HAND_COUNTED
    billing = rows(project__slug="billing")
    assert list(billing) == [(MARCH_2, "billing", "gpt-5")]
    assert billing[(MARCH_2, "billing", "gpt-5")]["identical"] == 1


def test_recomputing_twice_writes_the_same_rows_and_no_duplicates(counted_night):
    first = rollup_range(since=MARCH_2, until=MARCH_2, project=counted_night)
    before = rows()
    second = rollup_range(since=MARCH_2, until=MARCH_2, project=counted_night)

    assert first == second == 3
    assert rows() == before
    assert Rollup.objects.count() == 3


def test_recomputing_picks_up_late_verdicts_and_drops_rows_with_nothing_left(
    counted_night,
):
    rollup_range(since=MARCH_2 - timedelta(days=1), until=MARCH_2)
    counted_night.replays.filter(run__model="claude-opus-4").delete()
    data.replay(
        counted_night,
        night=Night.objects.get(date=MARCH_2),
        verdict="divergent",
        finished_at=IN_NIGHT,
    )

    rollup_range(since=MARCH_2, until=MARCH_2, project=counted_night)

    stored = rows(project=counted_night)
    assert (MARCH_2, "shop", "claude-opus-4") not in stored
    assert stored[(MARCH_2, "shop", "gpt-5")]["divergent"] == 2
    assert stored[(MARCH_2, "shop", "gpt-5")]["attempted"] == 8


def test_nights_outside_the_range_are_left_alone(counted_night):
    rollup_range(since=MARCH_2, until=MARCH_2 + timedelta(days=1))
    march_3 = rows(date=MARCH_2 + timedelta(days=1))
    assert march_3[(MARCH_2 + timedelta(days=1), "shop", "gpt-5")]["divergent"] == 1

    counted_night.replays.all().delete()
    rollup_range(since=MARCH_2, until=MARCH_2, project=counted_night)

    assert rows(date=MARCH_2 + timedelta(days=1)) == march_3
    # The night still exists, so its model "" row remains with zero counts.
    assert rows(date=MARCH_2, project=counted_night) == {
        (MARCH_2, "shop", ""): {
            **HAND_COUNTED[(MARCH_2, "shop", "")],
            "attempted": 0,
            "identical": 0,
        }
    }


def test_a_night_that_ran_nothing_still_gets_its_deferred_row(db):
    shop = make_project("shop")
    data.night(shop, MARCH_2, deferred=12)

    assert rollup_range(since=MARCH_2, until=MARCH_2) == 1
    (row,) = Rollup.objects.all()
    assert (row.model, row.attempted, row.deferred) == ("", 0, 12)


def test_the_rollup_aggregates_in_the_database_not_per_replay(counted_night):
    with CaptureQueriesContext(connection) as queries:
        rollup_range(since=MARCH_2, until=MARCH_2, project=counted_night)
    replay_queries = [q for q in queries if '"replayhub_replay"' in q["sql"]]
    assert len(replay_queries) == 1
    assert "GROUP BY" in replay_queries[0]["sql"]


def test_closing_a_night_rolls_it_up_with_the_night_before(counted_night):
    Night.objects.filter(date=MARCH_2).update(status="open")
    march_1 = data.night(counted_night, MARCH_2 - timedelta(days=1), status="closed")
    data.replay(counted_night, night=march_1, verdict="identical", finished_at=IN_NIGHT)

    scheduler.night_close_ended(now=datetime(2026, 3, 3, 7, tzinfo=UTC))

    assert Night.objects.get(date=MARCH_2).status == "closed"
    assert rows(project=counted_night, date=MARCH_2) == HAND_COUNTED
    assert rows(date=march_1.date)[(march_1.date, "shop", "gpt-5")]["identical"] == 1


def test_a_night_closed_by_someone_else_is_not_rolled_up_twice(counted_night):
    rollup_closed_night(Night.objects.get(date=MARCH_2))
    computed = Rollup.objects.values_list("computed_at", flat=True).first()

    # Already closed: the tick finds nothing to close and writes nothing.
    scheduler.night_close_ended(now=datetime(2026, 3, 3, 7, tzinfo=UTC))

    assert Rollup.objects.values_list("computed_at", flat=True).first() == computed


def test_the_command_recomputes_a_range_and_says_how_many_rows_it_wrote(
    counted_night, capsys
):
    call_command("rollup", "--since", "2026-03-02", "--until", "2026-03-02")
    out = capsys.readouterr().out
    assert "Wrote 4 rollup rows" in out
    assert "2026-03-02 to 2026-03-02 (all projects)" in out

    call_command("rollup", "--since", "2026-03-02", "--project", "shop")
    assert "(project shop)" in capsys.readouterr().out
    assert rows(project=counted_night, date=MARCH_2) == HAND_COUNTED


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "yesterday"], "is not a date"),
        (["--since", "2026-03-02", "--until", "2026-03-01"], "is before --since"),
        (["--since", "2026-03-02", "--project", "nope"], "there is no project"),
    ],
)
def test_the_command_refuses_bad_arguments_with_a_clear_message(db, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("rollup", *args)


def test_an_inconclusive_replay_without_a_reason_code_still_adds_up(db):
    shop = make_project("shop")
    replay = data.replay(shop, verdict="inconclusive", finished_at=IN_NIGHT)
    Replay.objects.filter(pk=replay.pk).update(reason_code="")

    rollup_range(since=MARCH_2, until=MARCH_2)

    (row,) = Rollup.objects.all()
    assert (row.inconclusive, row.by_reason) == (1, {"": 1})
