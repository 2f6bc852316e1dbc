"""The replicate tier: more samples of undecided runs, on a share of the night
of their own, best-valued first, never of a decided run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from replayhub import services
from replayhub.models import NightShare, Project, Replay, Run
from replayhub.nights import scheduler, tiers
from replayhub.nights.arithmetic import Amounts
from replayhub.nights.replicate_tier import night_admit_replicates
from tests.factories import make_budget, make_runs, share_of

NOW = datetime(2026, 6, 1, 23, 0, tzinfo=UTC)  # inside a 22 → 6 UTC window
POLICY = {
    "replicate_threshold": 0.8,
    "replicate_confidence": 0.9,
    "replicate_most": 10,
}
# Recorded as ``replayhub-record`` writes a tape: its content is not read here.
RECORDED_TAPE = [{"provider_kind": "openai", "method": "POST", "status": 200}]


@pytest.fixture
def shop(db):
    shop = Project.objects.create(
        slug="shop",
        repo_path="/srv/shop.git",
        agentic_enabled=True,
        time_limit_seconds=300,
        test_time_limit_seconds=60,
        flake_reruns=0,
    )
    make_budget(
        shop,
        window_start_hour=22,
        window_end_hour=6,
        timezone="UTC",
        shares={"replicate": {"max_replays": 1, "max_sandbox_minutes": 600}},
        **POLICY,
    )
    return shop


def replayed(run: Run, *verdicts: str, tier: str = "agentic") -> None:
    """Give ``run`` finished replays with these verdicts, two nights ago."""
    for verdict in verdicts:
        replay = Replay.objects.create(run=run, project=run.project, tier=tier)
        Replay.objects.filter(pk=replay.pk).update(
            status="finished",
            verdict=verdict,
            reason_code="x",
            reason="Done.",
            created_at=NOW - timedelta(days=2),
            finished_at=NOW - timedelta(days=2),
            sandbox_seconds=200,
        )


@pytest.fixture
def runs(shop):
    """One success (undecided, a long way to go), five (undecided, one from
    settling), six (reproduces), one failure (does not reproduce at 0.8), and
    one never replayed."""
    one, five, six, failed, fresh = make_runs(shop, 5, now=NOW)
    replayed(one, "identical")
    replayed(five, *["identical"] * 3, "equivalent", "identical")
    replayed(six, *["identical"] * 6)
    replayed(failed, "divergent")
    return {"one": one, "five": five, "six": six, "failed": failed, "fresh": fresh}


def test_a_night_spends_its_replicates_on_the_run_likeliest_to_settle(shop, runs):
    report = night_admit_replicates(project=shop, now=NOW)

    replicates = Replay.objects.filter(replicate=True)
    # The share holds one replicate: the run one sample from settling gets it,
    # the other undecided run is deferred, and no decided run is a candidate.
    assert [r.run_id for r in replicates] == [runs["five"].pk]
    assert report.admitted == [replicates.get().pk]
    assert report.deferred == 1
    replicate = replicates.get()
    assert (replicate.tier, replicate.trigger) == ("agentic", "scheduler")
    share = share_of(report.night, tiers.REPLICATE)
    assert (share.reserved_replays, share.limit_replays, share.deferred) == (1, 1, 1)
    # Nothing was taken from the first replays' share.
    assert share_of(report.night).reserved_replays == 0


def test_a_run_with_a_replicate_in_flight_waits_for_its_verdict(shop, runs):
    room_for(shop, replays=10)
    first = night_admit_replicates(project=shop, now=NOW)
    again = night_admit_replicates(project=shop, now=NOW + timedelta(minutes=2))

    assert {Replay.objects.get(pk=pk).run_id for pk in first.admitted} == {
        runs["one"].pk,
        runs["five"].pk,
    }
    assert again.admitted == []
    assert again.skipped_reason == "no undecided run is ready for another sample"


def test_a_decided_run_never_gets_a_replicate(shop, runs):
    room_for(shop, replays=10)
    replayed(runs["one"], *["identical"] * 5)  # now six of six: reproduces
    replayed(runs["five"], "divergent", "divergent")  # now does not reproduce

    report = night_admit_replicates(project=shop, now=NOW)

    assert report.admitted == []
    assert not Replay.objects.filter(replicate=True).exists()


def test_a_run_at_its_most_samples_gets_no_more(shop, runs):
    room_for(shop, replays=10)
    # Nine of ten, then a tenth failure: 9 of 10 stays undecided at k = 10;
    # its tape would measure the environment, but the run is done with.
    replayed(runs["one"], *["identical"] * 4, "divergent", *["identical"] * 4)
    Run.objects.filter(pk=runs["one"].pk).update(raw={"tape": RECORDED_TAPE})

    night_admit_replicates(project=shop, now=NOW)

    assert not Replay.objects.filter(replicate=True, run=runs["one"]).exists()


def test_a_taped_run_gets_tape_replicates_first(shop, runs):
    room_for(shop, replays=10)
    Run.objects.filter(pk=runs["one"].pk).update(raw={"tape": RECORDED_TAPE})

    night_admit_replicates(project=shop, now=NOW)
    replayed(runs["one"], "identical", "identical", "identical", tier="tape")
    Replay.objects.filter(replicate=True).update(status="cancelled")
    night_admit_replicates(project=shop, now=NOW + timedelta(minutes=2))

    tiers_of_one = list(
        Replay.objects.filter(replicate=True, run=runs["one"])
        .order_by("id")
        .values_list("tier", flat=True)
    )
    # Three tape replays in, the environment is measured: live replicates next.
    assert tiers_of_one == ["tape", "agentic"]


def test_without_a_policy_the_tier_spends_nothing(shop, runs):
    shop.budget.replicate_threshold = None
    shop.budget.save()

    report = night_admit_replicates(project=shop, now=NOW)

    assert report.skipped_reason == "no replicate policy for this project"
    assert not Replay.objects.filter(replicate=True).exists()


def test_the_night_admits_replicates_after_the_first_replays(shop, runs):
    room_for(shop, replays=10)

    report = services.night_run(project=shop, now=NOW)

    more = report.of(tiers.REPLICATE)
    assert more is not None
    # The agentic tier replays every ready run tonight, so none is left with
    # nothing in flight for a replicate; the next tick after their verdicts is.
    assert len(report.admitted) == 5
    assert more.admitted == []
    Replay.objects.filter(replicate=False, night=report.night).update(
        status="finished", verdict="identical", reason_code="x", reason="Done."
    )
    ticked = services.nights_tick(now=NOW + timedelta(minutes=2))

    # Each run's first verdict is in: the three still undecided get a
    # replicate each (two of two, one of two, one of one); the rest decided.
    assert [len(r.of(tiers.REPLICATE).admitted) for r in ticked] == [3]
    assert set(
        Replay.objects.filter(replicate=True).values_list("run_id", flat=True)
    ) == {runs["one"].pk, runs["failed"].pk, runs["fresh"].pk}


def test_a_replicate_settles_on_the_replicate_share(shop, runs):
    report = night_admit_replicates(project=shop, now=NOW)
    replicate = Replay.objects.get(pk=report.admitted[0])

    scheduler.settle(
        replay=replicate, actual=Amounts(1, 90, 1000, 1), now=NOW + timedelta(hours=1)
    )

    share = share_of(report.night, tiers.REPLICATE)
    assert share.amounts("reserved") == Amounts()
    assert share.amounts("used") == Amounts(1, 90, 1000, 1)
    assert share_of(report.night).amounts("used") == Amounts()


def room_for(shop: Project, *, replays: int) -> None:
    """Room for ``replays`` replicates on tonight's share, opened from the
    budget."""
    shop.budget.shares.filter(tier=tiers.REPLICATE).update(max_replays=replays)
    night = scheduler.night_open(project=shop, now=NOW)
    NightShare.objects.filter(night=night, tier=tiers.REPLICATE).update(
        limit_replays=replays
    )


def test_a_replicate_the_night_ended_before_gives_its_share_back(shop, runs):
    report = night_admit_replicates(project=shop, now=NOW)
    replicate = Replay.objects.get(pk=report.admitted[0])
    Replay.objects.filter(pk=replicate.pk).update(
        status="running", lease_owner="w1", lease_expires_at=NOW + timedelta(hours=9)
    )
    replicate.refresh_from_db()

    services.replay_cancel_after_window(replay=replicate, owner="w1")

    share = share_of(report.night, tiers.REPLICATE)
    assert share.amounts("reserved") == Amounts()
    assert share.deferred == 2  # the one the share could not take, and this one
    # A replicate's run is not the agentic tier's deferral.
    assert Run.objects.get(pk=replicate.run_id).deferred_at is None
