"""The one way every tier spends its share of a night: open, reserve, admit,
settle, remaining, defer."""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection

from replayhub.models import Budget, Night, NightShare, Project
from replayhub.nights import scheduler, shares
from replayhub.nights.arithmetic import Amounts
from tests.factories import make_budget, make_night, share_of

NOW = datetime(2026, 6, 1, 23, 0, tzinfo=UTC)  # inside a 22 → 6 UTC window


@pytest.fixture
def project(db):
    return Project.objects.create(slug="shop", repo_path="/srv/shop.git")


def tonight(project, **shares_):
    return make_night(project, start=NOW - timedelta(hours=1), hours=8, shares=shares_)


def test_a_new_night_copies_each_tiers_share_of_the_budget(project):
    make_budget(
        project,
        window_start_hour=22,
        window_end_hour=6,
        shares={
            "agentic": {"max_replays": 7, "max_sandbox_minutes": 30},
            # A figure on a dimension the tier does not budget is not copied.
            "tape": {"max_replays": 3, "max_sandbox_minutes": 10, "max_tokens": 99},
        },
    )

    night = scheduler.night_open(project=project, now=NOW)

    assert share_of(night).amounts("limit") == Amounts(7, 1800, 2_000_000, 20)
    assert share_of(night, "tape").amounts("limit") == Amounts(3, 600)
    # The text tier has no row of its own: its default share.
    assert share_of(night, "text").amounts("limit") == Amounts(100, 0, 1_000_000, 5)


def test_a_budget_without_shares_gives_every_tier_its_default(project):
    Budget.objects.create(project=project, window_start_hour=22, window_end_hour=6)

    night = scheduler.night_open(project=project, now=NOW)

    limits = {
        s.tier: s.amounts("limit") for s in NightShare.objects.filter(night=night)
    }
    assert limits == {
        "agentic": Amounts(20, 240 * 60, 2_000_000, 20),
        "text": Amounts(100, 0, 1_000_000, 5),
        "tape": Amounts(50, 120 * 60),
        "replicate": Amounts(20, 240 * 60, 2_000_000, 20),
    }


def test_editing_the_budget_mid_night_changes_the_next_night_only(project):
    make_budget(
        project,
        window_start_hour=22,
        window_end_hour=6,
        shares={"agentic": {"max_replays": 7}},
    )
    night = scheduler.night_open(project=project, now=NOW)
    Budget.objects.get(project=project).shares.update(max_replays=70)

    again = scheduler.night_open(project=project, now=NOW + timedelta(hours=1))
    following = scheduler.night_open(project=project, now=NOW + timedelta(days=1))

    assert again == night and share_of(night).limit_replays == 7
    assert share_of(following).limit_replays == 70


def test_a_reservation_takes_every_dimension_or_nothing(project):
    night = tonight(
        project, agentic={"limit_replays": 5, "limit_tokens": 1000, "used_tokens": 600}
    )

    assert shares.reserve(
        night=night, tier="agentic", amount=Amounts(2, 0, 400), now=NOW
    )
    assert not shares.reserve(
        night=night, tier="agentic", amount=Amounts(1, 0, 1), now=NOW
    )

    share = share_of(night)
    assert (share.reserved_replays, share.reserved_tokens) == (2, 400)
    assert shares.remaining(night, "agentic") == Amounts(3, 0, 0, 0)


def test_a_tier_reserves_only_its_own_dimensions(project):
    night = tonight(project, tape={"limit_replays": 5, "limit_sandbox_seconds": 600})

    # Tokens are not the tape tier's: they neither block nor are taken.
    assert shares.reserve(
        night=night, tier="tape", amount=Amounts(1, 60, 5_000, 1), now=NOW
    )

    assert share_of(night, "tape").amounts("reserved") == Amounts(1, 60)
    assert share_of(night).amounts("reserved") == Amounts()


def test_no_reservation_once_the_night_is_closed_or_its_window_ended(project):
    night = tonight(project, agentic={"limit_replays": 5})

    assert not shares.reserve(
        night=night, tier="agentic", amount=Amounts(1), now=night.window_end
    )
    scheduler.night_close_ended(now=night.window_end)
    assert not shares.reserve(night=night, tier="agentic", amount=Amounts(1), now=NOW)
    assert share_of(night).reserved_replays == 0


def test_admitting_into_a_closed_night_admits_nothing_and_returns(project):
    night = tonight(project, agentic={"limit_replays": 5})
    Night.objects.filter(pk=night.pk).update(status="closed")

    # Room is left on the share, but no reservation can succeed: admission
    # must give up rather than try again forever.
    count = shares.admit(
        night=night, tier="agentic", estimate=Amounts(1), wanted=3, now=NOW
    )

    assert count == 0


def test_admit_reserves_as_many_as_fit_at_once(project):
    night = tonight(project, tape={"limit_replays": 10, "limit_sandbox_seconds": 1000})

    count = shares.admit(
        night=night, tier="tape", estimate=Amounts(1, 300), wanted=5, now=NOW
    )

    assert count == 3
    assert share_of(night, "tape").amounts("reserved") == Amounts(3, 900)


def test_settling_gives_the_reservation_back_and_charges_each_share_its_own(
    project,
):
    night = tonight(
        project,
        agentic={"limit_tokens": 10_000, "limit_cost_usd": 10},
        tape={"limit_replays": 5, "limit_sandbox_seconds": 600},
    )
    assert shares.reserve(night=night, tier="tape", amount=Amounts(1, 300), now=NOW)

    shares.settle(
        night.pk,
        "tape",
        release=Amounts(1, 300),
        actual=Amounts(1, 120, 4_000, Decimal("0.75")),
    )

    tape, agentic = share_of(night, "tape"), share_of(night)
    assert tape.amounts("reserved") == Amounts()
    assert tape.amounts("used") == Amounts(1, 120)
    assert agentic.amounts("used") == Amounts(0, 0, 4_000, Decimal("0.75"))
    assert agentic.amounts("reserved") == Amounts()


def test_an_unadmitted_replay_is_charged_to_the_night_running(project):
    night = tonight(project)
    assert (
        shares.charged_night(project_id=project.pk, night_id=None, now=NOW) == night.pk
    )
    later = night.window_end + timedelta(hours=1)
    assert shares.charged_night(project_id=project.pk, night_id=None, now=later) is None
    assert shares.charged_night(project_id=project.pk, night_id=42, now=later) == 42


def test_deferrals_are_counted_per_share(project):
    night = tonight(project)

    shares.defer(night, "text", 4)
    shares.defer_one(night.pk, "tape")
    shares.defer_one(night.pk, "tape")

    deferred = dict(
        NightShare.objects.filter(night=night).values_list("tier", "deferred")
    )
    assert deferred == {"text": 4, "tape": 2, "agentic": 0, "replicate": 0}


def test_a_night_without_a_share_has_nothing_to_admit(project):
    night = Night.objects.create(
        project=project, date=NOW.date(), window_start=NOW, window_end=NOW
    )
    assert shares.remaining(night, "tape") == Amounts()
    assert not shares.reserve(night=night, tier="tape", amount=Amounts(), now=NOW)


@pytest.mark.django_db(transaction=True)
def test_racing_reservations_on_one_share_never_pass_its_limit(require_postgres):
    """Threads reserve estimates of different sizes on one share at once: the
    share holds what it can and not a replay more, on any dimension."""
    race = Project.objects.create(slug="race", repo_path="/srv/race.git")
    night = tonight(
        race,
        text={
            "limit_replays": 1000,
            "limit_tokens": 100_000,
            "limit_cost_usd": Decimal("40"),
        },
    )
    sizes = [Amounts(1, 0, 1_000 * n, Decimal(n) / 2) for n in (1, 2, 3, 5)]
    admitted: list[Amounts] = []
    barrier = threading.Barrier(16)

    def worker(seed: int):
        pick = random.Random(seed)
        try:
            barrier.wait()
            for _ in range(10):
                amount = pick.choice(sizes)
                if shares.reserve(night=night, tier="text", amount=amount, now=NOW):
                    admitted.append(amount)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    text = share_of(night, "text")
    total = sum(admitted, Amounts())
    assert text.amounts("reserved") == total
    assert text.reserved_tokens <= 100_000 and text.reserved_cost_usd <= 40
    # Full: not one more of the smallest estimate fits on the binding dimension.
    left = shares.remaining(night, "text")
    assert left.tokens < 1_000 or left.cost_usd < Decimal("0.5")
