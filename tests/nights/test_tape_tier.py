"""The tape tier: runs with a tape are replayed from it first, on a share of
the night of their own, without model spend."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from replayhub import services
from replayhub.models import Budget, BudgetShare, Night, Project, Replay, Run, Tape
from replayhub.nights import scheduler, shares, tiers
from replayhub.nights.arithmetic import Amounts
from replayhub.nights.tape_tier import tape_candidates
from tests.factories import (
    make_budget,
    make_calc_run,
    make_night,
    make_runs,
    share_of,
)
from tests.replay.test_real_agent import agent_index  # noqa: F401 -- a fixture
from tests.replay.test_tape_replay import (  # noqa: F401 -- fixtures
    answer_commit,
    first_line,
    project,
    provider,
    replay,
)

NOW = datetime(2026, 6, 1, 23, 0, tzinfo=UTC)  # inside a 22 → 6 UTC window
# One recorded exchange, as ``replayhub-record`` writes it.
RECORDED_TAPE = [
    {
        "provider_kind": "openai",
        "method": "POST",
        "path": "/v1/chat/completions",
        "request": {"model": "gpt-test", "messages": [{"role": "user"}]},
        "status": 200,
        "stream": False,
        "response": {"choices": []},
        "usage": {},
        "model": "gpt-test",
    }
]
# The project's caps make one replay's estimate 300 + 2 * 60 = 420 s (7 min).
ESTIMATE_SECONDS = 420


def test_a_tape_replay_is_estimated_without_model_spend():
    recent = [Amounts(1, 100, 5000, Decimal("0.4")), Amounts(1, 300, 9000, 1)]
    caps = Amounts(1, 600, 0, Decimal(0))

    estimate = tiers.tape_estimate(recent=recent, caps=caps)

    assert estimate == Amounts(replays=1, sandbox_seconds=100)
    assert tiers.tape_estimate(recent=[], caps=caps) == Amounts(1, 600)


def test_the_tape_share_is_a_count_and_sandbox_time_only():
    share = tiers.Share(4, 30, 9_000, Decimal(3))
    assert tiers.night_limits(tiers.TAPE, share) == Amounts(
        replays=4, sandbox_seconds=1800
    )


@pytest.fixture
def taped_project(db):
    """Agentic replays nightly, and a tape tier of 20 replays and 15 minutes:
    two tape replays' estimates fit, a third does not."""
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
        tape_enabled=True,
        shares={
            "agentic": {
                "max_replays": 10,
                "max_sandbox_minutes": 600,
                "max_tokens": 10_000_000,
                "max_cost_usd": 100,
            },
            "tape": {"max_replays": 20, "max_sandbox_minutes": 15},
        },
    )
    return shop


def recorded(shop: Project, n: int, prefix: str) -> list[Run]:
    return make_runs(shop, n, now=NOW, prefix=prefix, raw={"tape": RECORDED_TAPE})


def with_replay_tape(run: Run) -> Replay:
    """A live replay of ``run`` that finished two nights ago, with its tape."""
    live = Replay.objects.create(run=run, project=run.project)
    Replay.objects.filter(pk=live.pk).update(
        status="finished",
        verdict="divergent",
        reason_code="x",
        reason="Done.",
        created_at=NOW - timedelta(days=2),
        finished_at=NOW - timedelta(days=2),
        sandbox_seconds=200,
    )
    Tape.objects.create(replay=live, exchanges=2, data=b"")
    return live


def test_a_night_replays_taped_runs_from_their_tapes_first(taped_project):
    untaped = make_runs(taped_project, 3, now=NOW, prefix="plain")
    taped = recorded(taped_project, 2, "recorded")
    # Imported an hour after the others: last in line.
    replayed = make_runs(
        taped_project, 1, now=NOW + timedelta(hours=1), prefix="replayed"
    )
    with_replay_tape(replayed[0])

    report = services.night_run(project=taped_project, now=NOW)

    night = Night.objects.get()
    tape_replays = Replay.objects.filter(night=night, tier="tape")
    # The tape share holds two estimates (15 min / 7 min): the two runs whose
    # record has a tape go first (never tape-replayed, oldest import first);
    # the run with a replay's tape waits for the next admission.
    assert sorted(tape_replays.values_list("run_id", flat=True)) == sorted(
        r.pk for r in taped
    )
    assert report.of("tape").admitted == list(
        tape_replays.order_by("id").values_list("pk", flat=True)
    )
    tape = share_of(night, "tape")
    assert (report.of("tape").deferred, tape.deferred) == (1, 1)
    assert (tape.reserved_replays, tape.reserved_sandbox_seconds) == (
        2,
        2 * ESTIMATE_SECONDS,
    )
    assert tape.reserved_sandbox_seconds <= tape.limit_sandbox_seconds
    # The agentic tier leaves every taped run to the tape tier, even the one
    # its share could not take tonight: no model money is spent on them.
    agentic = Replay.objects.filter(night=night, tier="agentic")
    assert sorted(agentic.values_list("run_id", flat=True)) == sorted(
        r.pk for r in untaped
    )
    assert share_of(night).reserved_replays == 3
    for row in tape_replays:
        assert row.trigger == "scheduler"
        assert row.reservation["tokens"] == 0
        assert Decimal(row.reservation["cost_usd"]) == 0
        assert row.caps["wall_seconds"] == taped_project.time_limit_seconds


def test_a_run_goes_back_to_the_tape_tier_after_a_live_replay(taped_project):
    (run,) = recorded(taped_project, 1, "recorded")
    # An empty or malformed record tape is no tape.
    make_runs(taped_project, 1, now=NOW, prefix="empty", raw={"tape": []})
    make_runs(taped_project, 1, now=NOW, prefix="odd", raw={"tape": "abc"})
    assert list(tape_candidates(taped_project)) == [run]

    played = Replay.objects.create(run=run, project=taped_project, tier="tape")
    Replay.objects.filter(pk=played.pk).update(
        status="finished",
        verdict="identical",
        reason_code="x",
        reason="Done.",
        created_at=NOW - timedelta(days=3),
        finished_at=NOW - timedelta(days=3),
    )
    # Tape-replayed since its last live replay: the agentic tier's now.
    assert list(tape_candidates(taped_project)) == []

    with_replay_tape(run)
    assert list(tape_candidates(taped_project)) == [run]


def test_the_tape_tier_never_reserves_past_its_sandbox_minutes(taped_project):
    recorded(taped_project, 6, "recorded")
    BudgetShare.objects.filter(budget__project=taped_project, tier="tape").update(
        max_sandbox_minutes=30
    )

    first = services.night_run(project=taped_project, now=NOW)
    later = services.night_run(project=taped_project, now=NOW + timedelta(hours=1))

    tape = share_of(Night.objects.get(), "tape")
    # 30 minutes hold four estimates of 7; the second admission finds no room.
    assert len(first.of("tape").admitted) == 4 and later.of("tape").admitted == []
    assert tape.deferred == 2
    assert tape.reserved_sandbox_seconds == 4 * ESTIMATE_SECONDS <= 30 * 60
    assert Replay.objects.filter(tier="agentic").count() == 0


def test_a_tape_replay_settles_on_the_tape_share(taped_project):
    recorded(taped_project, 1, "recorded")
    report = services.night_run(project=taped_project, now=NOW)
    row = Replay.objects.get(pk=report.of("tape").admitted[0])

    scheduler.settle(replay=row, actual=Amounts(1, 95), now=NOW)

    night = Night.objects.get()
    tape, agentic = share_of(night, "tape"), share_of(night)
    assert (tape.reserved_replays, tape.reserved_sandbox_seconds) == (0, 0)
    assert (tape.used_replays, tape.used_sandbox_seconds) == (1, 95)
    assert (agentic.used_replays, agentic.used_sandbox_seconds) == (0, 0)
    assert (agentic.used_tokens, agentic.used_cost_usd) == (0, 0)


def test_a_tape_replay_that_went_live_charges_its_model_spend_to_the_agentic_share(
    taped_project,
):
    recorded(taped_project, 1, "recorded")
    report = services.night_run(project=taped_project, now=NOW)
    row = Replay.objects.get(pk=report.of("tape").admitted[0])

    scheduler.settle(replay=row, actual=Amounts(1, 95, 4_000, Decimal("0.75")), now=NOW)

    night = Night.objects.get()
    tape, agentic = share_of(night, "tape"), share_of(night)
    assert (tape.used_replays, tape.used_sandbox_seconds) == (1, 95)
    assert (tape.used_tokens, tape.used_cost_usd) == (0, 0)
    assert (agentic.used_tokens, agentic.used_cost_usd) == (4_000, Decimal("0.75"))
    assert (agentic.used_replays, agentic.used_sandbox_seconds) == (0, 0)


def test_with_the_tape_tier_off_taped_runs_go_to_the_agentic_tier(taped_project):
    taped = recorded(taped_project, 2, "recorded")
    Budget.objects.filter(project=taped_project).update(tape_enabled=False)

    report = services.night_run(project=taped_project, now=NOW)

    assert report.of("tape").skipped_reason == "the tape tier is off for this project"
    assert sorted(
        Replay.objects.filter(tier="agentic").values_list("run_id", flat=True)
    ) == sorted(r.pk for r in taped)


@pytest.mark.django_db
@pytest.mark.usefixtures("env_cache")
def test_a_night_plays_a_live_replays_tape_in_the_sandbox_at_no_model_cost(
    project,  # noqa: F811
    calc_repo,
    provider,  # noqa: F811
):
    """End to end: the scheduler admits the tape replay, the worker's code
    runs it in the sandbox behind the gateway, and the night is charged its
    sandbox time on the tape share and nothing else."""
    base = calc_repo.rev("main")
    original = answer_commit(calc_repo, base, first_line(calc_repo, base), "agent/a")
    run = make_calc_run(
        project, prompt="say hello", original=original, base=base, preflight="ready"
    )
    live = replay(run)
    assert live.verdict == "identical" and provider.calls == 2
    make_budget(
        project,
        window_start_hour=0,
        window_end_hour=0,
        tape_enabled=True,
        shares={"tape": {"max_replays": 5, "max_sandbox_minutes": 60}},
    )

    report = services.night_run(project=project, immediate=True)
    (admitted,) = report.of("tape").admitted
    services.replay_execute(replay_id=admitted)

    played = Replay.objects.get(pk=admitted)
    assert (played.tier, played.verdict) == ("tape", "identical"), played.reason
    assert provider.calls == 2  # nothing reached the model
    assert played.tokens == 0 and played.cost_usd == 0
    night = Night.objects.get(pk=report.of("tape").night.pk)
    tape, agentic = share_of(night, "tape"), share_of(night)
    assert tape.used_replays == 1
    assert 0 < tape.used_sandbox_seconds <= 60 * 60
    assert tape.reserved_sandbox_seconds == 0
    assert (agentic.used_tokens, agentic.used_cost_usd) == (0, 0)
    assert timezone.now() < night.window_end


def test_the_nightly_command_reports_the_tape_tier(taped_project, capsys):
    recorded(taped_project, 3, "recorded")
    call_command("nightly", "--now", "--project", "shop")

    out = capsys.readouterr().out
    assert "shop tape tier: admitted 2, deferred 1" in out


@pytest.mark.django_db(transaction=True)
def test_concurrent_tape_reservations_never_overspend(require_postgres):
    race = Project.objects.create(slug="race", repo_path="/srv/race.git")
    night = make_night(
        race,
        start=NOW - timedelta(hours=1),
        hours=6,
        shares={"tape": {"limit_replays": 1000, "limit_sandbox_seconds": 30 * 60}},
    )
    admitted = []
    barrier = threading.Barrier(16)

    def worker():
        try:
            barrier.wait()
            for _ in range(5):
                if shares.reserve(
                    night=night, tier="tape", amount=Amounts(1, 420), now=NOW
                ):
                    admitted.append(1)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    tape = share_of(night, "tape")
    # 30 minutes hold four replays of 7 minutes, however the 80 tries race.
    assert len(admitted) == 4
    assert tape.reserved_sandbox_seconds == 4 * 420 <= 30 * 60
    agentic = share_of(night)
    assert (agentic.reserved_tokens, agentic.reserved_cost_usd) == (0, 0)
