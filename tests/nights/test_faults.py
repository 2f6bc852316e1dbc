"""Faults mid-night: a lost worker, a broker that restarts and forgets its messages."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from replayhub import services
from replayhub.demo.calculator import GOOD
from replayhub.models import Replay
from replayhub.nights import scheduler, shares
from replayhub.nights.arithmetic import Amounts
from tests.conftest import (
    REQUIRE_SERVICES,
    ROOT,
    child_env,
    spawn_worker,
    stop_worker,
    wait_for,
)
from tests.factories import make_budget, make_calc_project, make_calc_run, share_of
from tests.scripted import make_project_repo, original_commit

NOW = datetime(2026, 6, 1, 23, 0, tzinfo=UTC)


@pytest.fixture
def calc(tmp_path):
    repo = make_project_repo(tmp_path)
    return repo, repo.rev("main"), original_commit(repo, GOOD, branch="agent/good")


def open_night(project, now):
    make_budget(
        project,
        window_start_hour=0,
        window_end_hour=0,  # a whole day: "now" is always inside
        timezone="UTC",
        shares={"agentic": {"max_replays": 5}},
    )
    return scheduler.night_open(project=project, now=now)


@pytest.mark.django_db
def test_a_lost_worker_gives_its_reservation_back(calc):
    repo, base, good = calc
    project = make_calc_project(repo, agentic_enabled=True, max_attempts=2)
    run = make_calc_run(
        project, prompt="same", original=good, base=base, preflight="ready"
    )
    now = timezone.now()
    night = open_night(project, now)
    report = services.night_run(project=project, now=now)
    lost = Replay.objects.get(pk=report.admitted[0])
    assert share_of(night).reserved_replays == 1
    Replay.objects.filter(pk=lost.pk).update(
        status="running",
        lease_owner="dead:1:x",
        lease_expires_at=now - timedelta(seconds=1),
    )

    services.replay_reap_expired()

    share = share_of(night)
    assert (share.reserved_replays, share.reserved_sandbox_seconds) == (0, 0)
    assert share.used_replays == 0  # nothing ran to completion
    assert Replay.objects.get(pk=lost.pk).reason_code == "worker_lost"
    retry = Replay.objects.exclude(pk=lost.pk).get(run=run)
    assert (retry.status, retry.attempt) == ("queued", 2)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _redis(port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
    )
    wait_for(lambda: _answers(port), timeout=10, interval=0.05)
    return proc


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _in_child(code: str, **env) -> None:
    subprocess.run(
        [sys.executable, "-c", "import django; django.setup()\n" + code],
        cwd=ROOT,
        env=child_env(**env),
        check=True,
        timeout=60,
    )


@pytest.mark.django_db(transaction=True)
def test_a_broker_restart_mid_night_loses_nothing_and_spends_nothing_twice(
    calc, tmp_path
):
    if shutil.which("redis-server") is None:
        if REQUIRE_SERVICES:
            pytest.fail("redis-server is required (REPLAYHUB_REQUIRE_SERVICES=1)")
        pytest.skip("needs redis-server")
    repo, base, good = calc
    project = make_calc_project(repo, agentic_enabled=True)
    run = make_calc_run(
        project, prompt="same", original=good, base=base, preflight="ready"
    )
    now = timezone.now()
    night = open_night(project, now)
    # Admitted (reserved) and handed to a private Redis that nobody consumes yet.
    assert shares.reserve(
        night=night, tier="agentic", amount=Amounts(1, 60, 0, Decimal(0)), now=now
    )
    replay = services.replay_create(
        run=run,
        trigger="scheduler",
        night=night,
        reservation=Amounts(1, 60, 0, Decimal(0)).as_dict() | {"cost_usd": "0"},
        enqueued_at=now - timedelta(hours=1),
    )
    port = _free_port()
    broker = f"redis://127.0.0.1:{port}/0"
    redis = _redis(port)
    worker = None
    try:
        _in_child(
            f"from replayhub import tasks; tasks.run_replay.delay({replay.pk})",
            CELERY_BROKER_URL=broker,
        )
        # The broker restarts without persistence: the message is gone.
        redis.terminate()
        redis.wait(timeout=10)
        redis = _redis(port)
        worker = spawn_worker(tmp_path / "worker.log", CELERY_BROKER_URL=broker)
        time.sleep(1)
        assert Replay.objects.get(pk=replay.pk).status == "queued"

        # The beat's reaper sends stale queued replays again.
        _in_child(
            "from datetime import timedelta\n"
            "from replayhub import services\n"
            "services.replay_requeue_stale(older_than=timedelta(minutes=10))\n"
            # A second pass sends nothing more: the replay was just sent.
            "services.replay_requeue_stale(older_than=timedelta(minutes=10))",
            CELERY_BROKER_URL=broker,
        )
        done = wait_for(
            lambda: Replay.objects.filter(pk=replay.pk, status="finished").first(),
            timeout=90,
        )
    finally:
        if worker is not None:
            stop_worker(worker)
        redis.terminate()
        redis.wait(timeout=10)

    assert done.verdict == "identical"
    share = share_of(night)
    assert share.used_replays == 1
    assert (share.reserved_replays, share.reserved_sandbox_seconds) == (0, 0)
    assert Replay.objects.filter(run=run).count() == 1
