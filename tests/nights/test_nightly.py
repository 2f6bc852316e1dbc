"""The nightly scheduler: admission against the budget, deferral, ordering, settling."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from replayhub import services
from replayhub.models import BudgetShare, Night, Project, Replay, Run
from replayhub.nights import scheduler, shares
from replayhub.nights.arithmetic import Amounts
from tests.factories import make_budget, make_night, make_runs, share_of

NOW = datetime(2026, 6, 1, 23, 0, tzinfo=UTC)  # inside a 22 → 6 UTC window


@pytest.fixture
def nightly_project(db):
    """A project replayed nightly: three replays a night, 22:00 to 06:00 UTC."""
    project = Project.objects.create(
        slug="shop",
        repo_path="/srv/shop.git",
        agentic_enabled=True,
        time_limit_seconds=300,
        flake_reruns=0,
    )
    make_budget(
        project,
        window_start_hour=22,
        window_end_hour=6,
        timezone="UTC",
        shares={
            "agentic": {
                "max_replays": 3,
                "max_sandbox_minutes": 600,
                "max_tokens": 10_000_000,
                "max_cost_usd": 100,
            }
        },
    )
    return project


def set_agentic_share(project, **limits):
    BudgetShare.objects.filter(budget__project=project, tier="agentic").update(**limits)


def finish(replay, verdict="equivalent", when=None, seconds=100):
    Replay.objects.filter(pk=replay.pk).update(
        status="finished",
        verdict=verdict,
        reason_code="x",
        reason="Done.",
        finished_at=when or NOW - timedelta(days=2),
        sandbox_seconds=seconds,
    )


def test_a_night_stops_exactly_at_the_budget_and_defers_the_rest(nightly_project):
    runs = make_runs(nightly_project, 5, now=NOW)

    report = services.night_run(project=nightly_project, now=NOW)

    share = share_of(Night.objects.get())
    assert len(report.admitted) == 3
    assert report.deferred == 2
    assert (share.reserved_replays, share.limit_replays, share.deferred) == (3, 3, 2)
    admitted_runs = set(Replay.objects.values_list("run__external_id", flat=True))
    assert admitted_runs == {"run-0", "run-1", "run-2"}  # oldest first
    deferred = Run.objects.filter(deferred_at__isnull=False)
    assert {r.external_id for r in deferred} == {"run-3", "run-4"}
    assert all(r.preflight == "ready" for r in runs)


def test_deferred_runs_are_first_in_line_the_next_night(nightly_project):
    make_runs(nightly_project, 5, now=NOW)
    services.night_run(project=nightly_project, now=NOW)
    for replay in Replay.objects.all():
        finish(replay, when=NOW + timedelta(hours=1))
    make_runs(
        nightly_project, 3, prefix="newer", now=NOW
    )  # never replayed, but not deferred

    next_night = NOW + timedelta(days=1)
    report = services.night_run(project=nightly_project, now=next_night)

    admitted = Replay.objects.filter(pk__in=report.admitted)
    assert {r.run.external_id for r in admitted} == {"run-3", "run-4", "newer-0"}
    assert not Run.objects.filter(external_id__in=["run-3", "run-4"]).exclude(
        deferred_at=None
    )


def test_never_replayed_runs_come_before_retries_and_re_checks(nightly_project):
    set_agentic_share(nightly_project, max_replays=10)
    checked, retry, exhausted, fresh_retry = make_runs(
        nightly_project, 4, prefix="old", now=NOW
    )
    finish(nightly_replay(checked), "equivalent")
    finish(nightly_replay(retry), "inconclusive")
    for _ in range(nightly_project.max_attempts):
        finish(nightly_replay(exhausted), "inconclusive")
    finish(nightly_replay(fresh_retry), "inconclusive", when=NOW - timedelta(hours=1))
    never = make_runs(nightly_project, 1, prefix="never", now=NOW)[0]

    order = [r.external_id for r in scheduler.candidates(nightly_project, NOW)]

    assert order == [never.external_id, retry.external_id, checked.external_id]


def nightly_replay(run):
    from replayhub import services

    return services.replay_create(run=run, trigger="scheduler")


def test_runs_that_preflight_ruled_out_are_never_candidates(nightly_project):
    make_runs(nightly_project, 2, now=NOW)
    Run.objects.filter(external_id="run-0").update(preflight="unreproducible")
    assert [r.external_id for r in scheduler.candidates(nightly_project, NOW)] == [
        "run-1"
    ]


def test_a_project_not_opted_in_spends_nothing(nightly_project):
    Project.objects.filter(pk=nightly_project.pk).update(agentic_enabled=False)
    nightly_project.refresh_from_db()
    make_runs(nightly_project, 2, now=NOW)

    report = services.night_run(project=nightly_project, now=NOW)

    assert report.admitted == [] and "off" in report.skipped_reason
    assert not Replay.objects.exists()


def test_outside_the_window_nothing_starts(nightly_project):
    make_runs(nightly_project, 2, now=NOW)
    report = services.night_run(project=nightly_project, now=NOW.replace(hour=12))
    assert report.admitted == []
    assert "window" in report.skipped_reason


def test_a_replay_is_started_with_caps_no_larger_than_what_remains(nightly_project):
    set_agentic_share(nightly_project, max_sandbox_minutes=7)  # 420 s: < one's caps
    make_runs(nightly_project, 1, now=NOW)
    # Recent replays cost 60 s each, so the estimate fits.
    old = make_runs(nightly_project, 3, prefix="hist", now=NOW)
    for run in old:
        finish(nightly_replay(run), seconds=60)

    report = services.night_run(project=nightly_project, now=NOW)

    replay = Replay.objects.get(pk=report.admitted[0])
    assert replay.reservation["sandbox_seconds"] == 60
    assert replay.caps["wall_seconds"] <= 420
    assert replay.caps["wall_seconds"] == 300  # the project's own limit is smaller


def test_settling_returns_the_reservation_and_records_the_actual(nightly_project):
    make_runs(nightly_project, 1, now=NOW)
    report = services.night_run(project=nightly_project, now=NOW)
    replay = Replay.objects.get(pk=report.admitted[0])
    estimate = Amounts.from_dict(replay.reservation)

    scheduler.settle(
        replay=replay,
        actual=Amounts(1, 42, 1000, Decimal("0.25")),
        now=NOW + timedelta(hours=1),
    )
    scheduler.settle(  # a second settle changes nothing
        replay=replay,
        actual=Amounts(1, 42, 1000, Decimal("0.25")),
        now=NOW + timedelta(hours=1),
    )

    share = share_of(Night.objects.get())
    assert estimate.sandbox_seconds > 42
    assert (share.reserved_replays, share.reserved_sandbox_seconds) == (0, 0)
    assert (share.used_replays, share.used_sandbox_seconds, share.used_tokens) == (
        1,
        42,
        1000,
    )
    assert share.used_cost_usd == Decimal("0.25")


def test_an_explicit_replay_is_charged_to_the_open_night(nightly_project):
    from replayhub import services

    run = make_runs(nightly_project, 1, now=NOW)[0]
    scheduler.night_open(project=nightly_project, now=NOW)
    replay = services.replay_create(run=run, trigger="command")

    scheduler.settle(replay=replay, actual=Amounts(1, 30, 0, 0), now=NOW)

    night = Night.objects.get()
    share = share_of(night)
    assert (share.used_replays, share.used_sandbox_seconds) == (1, 30)
    assert Replay.objects.get(pk=replay.pk).night_id == night.pk


def test_the_tick_runs_each_night_once_and_closes_it_after_its_window(nightly_project):
    make_runs(nightly_project, 5, now=NOW)

    first = services.nights_tick(now=NOW)
    again = services.nights_tick(now=NOW + timedelta(minutes=5))

    assert len(first) == 1 and len(first[0].admitted) == 3
    assert again == []
    services.nights_tick(now=NOW + timedelta(hours=8))
    assert Night.objects.get(date=NOW.date()).status == "closed"


def test_the_nightly_command_runs_a_night_now(nightly_project, capsys):
    make_runs(nightly_project, 4, now=NOW)
    call_command("nightly", "--project", "shop", "--now")
    out = capsys.readouterr().out
    assert "admitted 3, deferred 1" in out
    assert "replays reserved 3/3" in out


def test_a_night_run_now_by_another_operator_a_moment_later_is_found_open(
    nightly_project,
):
    """Two ``nightly --now`` at once: the one whose clock read a moment
    earlier finds the night the other opened, from the other's moment, and
    says it is admitted already, not that its window has ended."""
    make_runs(nightly_project, 2, now=NOW)
    later = scheduler.night_admit(project=nightly_project, now=NOW, immediate=True)
    earlier = scheduler.night_admit(
        project=nightly_project, now=NOW - timedelta(seconds=1), immediate=True
    )

    assert (len(later.admitted), later.skipped_reason) == (2, "")
    assert (len(earlier.admitted), earlier.already, earlier.skipped_reason) == (
        0,
        2,
        "",
    )


@pytest.mark.django_db(transaction=True)
def test_concurrent_admissions_never_overspend_any_dimension(require_postgres):
    project = Project.objects.create(slug="race", repo_path="/srv/race.git")
    night = make_night(
        project,
        start=NOW - timedelta(hours=1),
        hours=6,
        shares={
            "agentic": {
                "limit_replays": 1000,
                "limit_sandbox_seconds": 10_000,
                "limit_tokens": 55_000,
                "limit_cost_usd": Decimal("1000"),
            }
        },
    )
    estimate = Amounts(1, 700, 5_000, Decimal("1"))
    admitted = []
    barrier = threading.Barrier(24)

    def worker():
        try:
            barrier.wait()
            for _ in range(5):
                if shares.reserve(
                    night=night, tier="agentic", amount=estimate, now=NOW
                ):
                    admitted.append(1)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    share = share_of(night)
    # Sandbox seconds allow 14, tokens 11: tokens are the binding dimension.
    assert len(admitted) == 11
    assert share.reserved_tokens == 55_000
    assert share.reserved_sandbox_seconds == 7_700 <= share.limit_sandbox_seconds


def test_near_the_end_of_the_budget_each_replay_gets_only_what_is_left(nightly_project):
    set_agentic_share(nightly_project, max_sandbox_minutes=9)  # 540 s
    old = make_runs(nightly_project, 3, prefix="hist", now=NOW)
    for run in old:
        finish(nightly_replay(run), seconds=250)  # estimate: 250 s each
    make_runs(nightly_project, 3, now=NOW)

    report = services.night_run(project=nightly_project, now=NOW)

    caps = [Replay.objects.get(pk=pk).caps["wall_seconds"] for pk in report.admitted]
    # 540 s admit two replays of 250 s; 40 s are left over. The first may run
    # its full 300 s limit, the last only its own 250 s and the 40 s spare.
    assert caps == [300, 290]
    admitted = Replay.objects.filter(pk__in=report.admitted)
    assert {r.run.external_id for r in admitted} == {"run-0", "run-1"}
    assert report.deferred == 4  # run-2 and the three re-checks


def test_no_admitted_replay_starts_after_its_night_has_ended(nightly_project):
    from replayhub import services

    make_runs(nightly_project, 2, now=NOW)
    report = services.night_run(project=nightly_project, now=NOW)
    night = Night.objects.get()
    Night.objects.filter(pk=night.pk).update(window_end=timezone.now())

    assert services.replay_execute(replay_id=report.admitted[0]) is None

    replay = Replay.objects.get(pk=report.admitted[0])
    assert replay.status == "cancelled"
    share = share_of(night)
    assert share.reserved_replays == 1  # the other one still holds its share
    assert share.used_replays == 0
    assert share.deferred == 1
    assert Run.objects.get(pk=replay.run_id).deferred_at is not None
