"""The worker side: replays through a real Celery worker, leases, the reaper."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from replayhub import services
from replayhub.demo.calculator import GOOD
from replayhub.models import Replay, ReviewBand
from tests.conftest import ROOT, child_env, wait_for
from tests.factories import make_calc_project, make_calc_run
from tests.scripted import make_project_repo, original_commit


@pytest.fixture
def calc(tmp_path):
    repo = make_project_repo(tmp_path)
    base = repo.rev("main")
    good = original_commit(repo, GOOD, branch="agent/good")
    return repo, base, good


def expire(replay_id, owner="dead-host:1:abc"):
    Replay.objects.filter(pk=replay_id).update(
        status="running",
        lease_owner=owner,
        lease_expires_at=timezone.now() - timedelta(seconds=5),
    )


@pytest.mark.django_db
def test_an_expired_lease_ends_the_replay_as_worker_lost_and_queues_a_retry(calc):
    repo, base, good = calc
    project = make_calc_project(repo, max_attempts=3)
    run = make_calc_run(project, prompt="same", original=good, base=base)
    lost = services.replay_create(run=run, trigger="command")
    expire(lost.pk)

    assert services.replay_reap_expired() == [lost.pk]

    lost.refresh_from_db()
    assert (lost.status, lost.verdict, lost.reason_code) == (
        "finished",
        "inconclusive",
        "worker_lost",
    )
    assert "dead-host:1:abc" in lost.reason
    assert lost.review_band is None  # a retry is coming
    retry = Replay.objects.exclude(pk=lost.pk).get()
    assert (retry.status, retry.attempt, retry.trigger) == ("queued", 2, "retry")


@pytest.mark.django_db
def test_the_last_attempt_lost_goes_to_the_review_queue(calc):
    repo, base, good = calc
    project = make_calc_project(repo, max_attempts=1)
    run = make_calc_run(project, prompt="same", original=good, base=base)
    lost = services.replay_create(run=run, trigger="command")
    expire(lost.pk)

    services.replay_reap_expired()

    lost.refresh_from_db()
    assert lost.reason_code == "worker_lost"
    assert lost.review_band == ReviewBand.INCONCLUSIVE_EXHAUSTED
    assert Replay.objects.count() == 1


@pytest.mark.django_db
def test_a_fresh_lease_is_left_alone(calc):
    repo, base, good = calc
    project = make_calc_project(repo)
    run = make_calc_run(project, prompt="same", original=good, base=base)
    replay = services.replay_create(run=run, trigger="command")
    assert services.replay_claim(replay_id=replay.pk, owner="me")

    assert services.replay_reap_expired() == []
    assert Replay.objects.get(pk=replay.pk).status == "running"


@pytest.mark.django_db(transaction=True)
def test_a_replay_queued_from_the_cli_is_run_by_a_real_worker(celery_worker, calc):
    repo, base, good = calc
    project = make_calc_project(repo)
    run = make_calc_run(project, prompt="other", original=good, base=base)

    from django.core.management import call_command

    call_command("reproduce", str(run.pk))

    finished = wait_for(
        lambda: Replay.objects.filter(run=run, status="finished").first(), timeout=120
    )
    assert (finished.verdict, finished.reason_code) == ("equivalent", "tests_agree")


def _processes_with(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline.replace(b"\0", b" "):
            pids.append(int(entry.name))
    return pids


@pytest.mark.django_db(transaction=True)
def test_killing_a_worker_mid_replay_leaves_nothing_running(tmp_path, calc, settings):
    repo, base, good = calc
    project = make_calc_project(repo, max_attempts=1, time_limit_seconds=120)
    run = make_calc_run(project, prompt="sleep", original=good, base=base)
    replay = services.replay_create(run=run, trigger="command")

    # Any other "sleep 60" on the machine (another test's, a shell's) is not
    # this replay's agent.
    before = set(_processes_with("sleep 60"))
    # A private worker with a short lease, running the replay directly.
    env = child_env(REPLAYHUB_LEASE_SECONDS="3")
    code = (
        "import django; django.setup();"
        "from replayhub import services;"
        f"services.replay_execute(replay_id={replay.pk})"
    )
    worker = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, env=env, start_new_session=True
    )
    try:
        wait_for(
            lambda: Replay.objects.filter(pk=replay.pk, phase="agent").exists(),
            timeout=60,
        )
        agent = wait_for(
            lambda: set(_processes_with("sleep 60")) - before or None, timeout=30
        )
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)

    # The sandbox dies with its parent: no agent process is left.
    wait_for(lambda: not agent & set(_processes_with("sleep 60")), timeout=15)
    # Once the lease expires, the reaper ends the replay.
    time.sleep(3.5)
    assert services.replay_reap_expired() == [replay.pk]
    replay.refresh_from_db()
    assert (replay.status, replay.reason_code) == ("finished", "worker_lost")
    assert not (settings.REPLAYHUB_WORK_DIR / f"replay-{replay.pk}").exists()
