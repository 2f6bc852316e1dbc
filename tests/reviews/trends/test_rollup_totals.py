"""The all-projects totals: every night's rollups summed over the projects,
kept right through recomputations, decisions, deletions and concurrent writers."""

from __future__ import annotations

import threading
from collections import defaultdict
from datetime import UTC, date, datetime

import pytest
from django.db import connection, connections, transaction

from replayhub.models import Project, Rollup, RollupTotal
from reviews.trends.rollups import rollup_range, rollup_replay
from tests.factories import make_project
from tests.reviews.trends import data

MARCH_2 = date(2026, 3, 2)
MARCH_3 = date(2026, 3, 3)
IN_NIGHT = datetime(2026, 3, 2, 23, 30, tzinfo=UTC)
COUNTS = ["attempted", "identical", "equivalent", "divergent", "inconclusive"]
KEYED = ["by_reason", "confirmed", "overturned"]


def summed_by_hand() -> dict[tuple, dict]:
    """The Rollup rows summed per (night, model, source) in the test itself."""
    sums: dict[tuple, dict] = {}
    for row in Rollup.objects.values():
        key = (row["date"], row["model"], row["source"])
        total = sums.setdefault(
            key,
            {
                **dict.fromkeys([*COUNTS, "deferred"], 0),
                **{k: defaultdict(int) for k in KEYED},
            },
        )
        for name in [*COUNTS, "deferred"]:
            total[name] += row[name]
        for name in KEYED:
            for k, n in row[name].items():
                total[name][k] += n
    return {
        key: {**t, **{k: dict(sorted(t[k].items())) for k in KEYED}}
        for key, t in sums.items()
    }


def totals() -> dict[tuple, dict]:
    return {
        (r["date"], r["model"], r["source"]): {
            k: r[k] for k in [*COUNTS, "deferred", *KEYED]
        }
        for r in RollupTotal.objects.values()
    }


@pytest.fixture
def two_projects(db, reviewer):
    shop, billing = make_project("shop"), make_project("billing")
    for item, deferred in ((shop, 3), (billing, 5)):
        night = data.night(item, MARCH_2, deferred=deferred)
        data.replay(item, night=night, verdict="identical", finished_at=IN_NIGHT)
        data.replay(
            item,
            night=night,
            verdict="inconclusive",
            reason_code="timeout",
            finished_at=IN_NIGHT,
        )
        data.replay(
            item,
            night=night,
            verdict="divergent",
            model="claude-opus-4",
            finished_at=IN_NIGHT,
        )
    data.replay(
        billing,
        night=night,
        verdict="inconclusive",
        reason_code="flaky_tests",
        finished_at=IN_NIGHT,
    )
    data.replay(
        shop, verdict="equivalent", finished_at=datetime(2026, 3, 3, 23, tzinfo=UTC)
    )
    return shop, billing


def test_the_totals_are_every_projects_rows_summed(two_projects):
    rollup_range(since=MARCH_2, until=MARCH_3)

    stored = totals()
    assert stored == summed_by_hand()
    gpt5 = stored[(MARCH_2, "gpt-5", "code")]
    assert (gpt5["attempted"], gpt5["identical"], gpt5["inconclusive"]) == (5, 2, 3)
    assert gpt5["by_reason"] == {"flaky_tests": 1, "timeout": 2}
    assert stored[(MARCH_2, "", "code")]["deferred"] == 8
    assert stored[(MARCH_2, "claude-opus-4", "code")]["divergent"] == 2


def test_one_projects_recomputation_keeps_the_others_in_the_totals(two_projects):
    shop, _billing = two_projects
    rollup_range(since=MARCH_2, until=MARCH_3)
    data.replay(
        shop,
        night=shop.nights.get(date=MARCH_2),
        verdict="divergent",
        finished_at=IN_NIGHT,
    )

    rollup_range(since=MARCH_2, until=MARCH_2, project=shop)

    assert totals() == summed_by_hand()
    assert totals()[(MARCH_2, "gpt-5", "code")]["divergent"] == 1


def test_a_decision_reaches_the_totals(two_projects, reviewer):
    shop, _billing = two_projects
    rollup_range(since=MARCH_2, until=MARCH_3)
    replay = shop.replays.get(verdict="identical")
    data.decide(replay, reviewer, "overturn", after="divergent")

    rollup_replay(replay.pk)

    assert totals()[(MARCH_2, "gpt-5", "code")]["overturned"] == {"identical": 1}
    assert totals() == summed_by_hand()


def test_deleting_a_project_takes_its_counts_out_of_the_totals(two_projects):
    _shop, billing = two_projects
    rollup_range(since=MARCH_2, until=MARCH_3)

    billing.delete()

    assert totals() == summed_by_hand()
    assert totals()[(MARCH_2, "", "code")]["deferred"] == 3
    assert totals()[(MARCH_2, "gpt-5", "code")]["by_reason"] == {"timeout": 1}


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="SQLite writes one at a time"
)
@pytest.mark.django_db(transaction=True)
def test_two_projects_rolled_up_at_once_both_end_in_the_totals(reviewer):
    shop, billing = make_project("shop"), make_project("billing")
    for item in (shop, billing):
        night = data.night(item, MARCH_2)
        data.replay(item, night=night, verdict="identical", finished_at=IN_NIGHT)
    first_done = threading.Event()
    release = threading.Event()
    finished = []

    def first():
        # Rolls up shop and holds its transaction open until told to commit.
        try:
            with transaction.atomic():
                rollup_range(since=MARCH_2, until=MARCH_2, project=shop)
                first_done.set()
                release.wait(10)
        finally:
            connections.close_all()

    def second():
        try:
            rollup_range(
                since=MARCH_2, until=MARCH_2, project=Project.objects.get(pk=billing.pk)
            )
            finished.append(True)
        finally:
            connections.close_all()

    one = threading.Thread(target=first)
    one.start()
    assert first_done.wait(10)
    two = threading.Thread(target=second)
    two.start()
    two.join(0.5)
    # The second waits for the first to commit before summing the night.
    assert two.is_alive() and not finished
    release.set()
    one.join(10)
    two.join(10)

    assert finished == [True]
    assert totals()[(MARCH_2, "gpt-5", "code")]["identical"] == 2
    assert totals() == summed_by_hand()
