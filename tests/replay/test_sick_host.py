"""A sick host stops itself, not the night: it declines replays while its
work folder is short of space, sends a replay it could not provision to
another host, and stops claiming after host failures in a row, saying so on
the status page."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from replayhub import services
from replayhub.celery import REPLAY_QUEUE, app
from replayhub.demo.calculator import GOOD
from replayhub.models import Heartbeat, Replay
from replayhub.nights.arithmetic import Amounts
from replayhub.replay.services import (
    THIS_PROCESS,
    TRIES,
    host_count,
    host_declines,
    host_name,
    host_restarted,
    replay_retry_later,
    short_of_disk,
    stopped_row_name,
)
from replayhub.replay.workspace import Report
from replayhub.verdicts import Facts, Reason, decide
from tests.conftest import ROOT, child_env, spawn_worker, stop_worker, wait_for
from tests.factories import make_calc_project, make_calc_run, make_night
from tests.scripted import make_project_repo, original_commit


@pytest.fixture(autouse=True)
def fresh_count():
    THIS_PROCESS.in_a_row = 0
    yield
    THIS_PROCESS.in_a_row = 0


@pytest.fixture
def calc(tmp_path):
    repo = make_project_repo(tmp_path)
    good = original_commit(repo, GOOD, branch="agent/good")
    project = make_calc_project(repo, agentic_enabled=True)
    run = make_calc_run(project, prompt="same", original=good, base=repo.rev("main"))
    return project, run


def stopped_hosts() -> list[str]:
    return list(
        Heartbeat.objects.filter(name__startswith=Heartbeat.STOPPED).values_list(
            "name", flat=True
        )
    )


def test_free_space_below_the_minimum_is_short_and_above_it_is_not():
    mib = 1024 * 1024
    assert short_of_disk(600 * mib, minimum_mb=512) == ""
    assert short_of_disk(512 * mib, minimum_mb=512) == ""
    assert short_of_disk(100 * mib, minimum_mb=512) == (
        "only 100 MiB free in the work folder (REPLAYHUB_MIN_FREE_DISK_MB is 512)"
    )


@pytest.mark.django_db
def test_a_host_short_of_disk_declines_and_the_replay_stays_queued(calc, settings):
    _, run = calc
    replay = services.replay_create(run=run, trigger="command")
    # More than any disk here has free.
    settings.REPLAYHUB_MIN_FREE_DISK_MB = 10**9

    why = host_declines(replay_id=replay.pk)

    assert why.startswith("only ") and why.endswith(
        "MiB free in the work folder (REPLAYHUB_MIN_FREE_DISK_MB is 1000000000)"
    )
    replay.refresh_from_db()
    assert (replay.status, replay.lease_owner) == ("queued", "")
    settings.REPLAYHUB_MIN_FREE_DISK_MB = 1
    assert host_declines(replay_id=replay.pk) == ""


@pytest.mark.django_db
def test_host_failures_in_a_row_stop_the_host_until_a_worker_starts_there(
    calc, settings
):
    _, run = calc
    replay = services.replay_create(run=run, trigger="command")
    settings.REPLAYHUB_HOST_FAILURES_TO_STOP = 3
    host_count(failed=True)
    host_count(failed=True)
    host_count(failed=False)  # a replay provisioned: the row is broken
    host_count(failed=True)
    host_count(failed=True)
    assert stopped_hosts() == []

    host_count(failed=True)

    assert stopped_hosts() == [stopped_row_name(host_name())]
    assert host_declines(replay_id=replay.pk) == (
        "stopped after host failures in a row"
    )
    assert Replay.objects.get(pk=replay.pk).status == "queued"

    host_restarted()

    assert stopped_hosts() == []
    assert host_declines(replay_id=replay.pk) == ""


def host_failed(replay_id: int) -> Report:
    return Report(
        decision=decide(
            Facts(
                harness_failure=Reason.HOST_FAILED,
                harness_detail="worker-2 could not provision the workspace at "
                "0123456789ab: git checkout failed with exit code 128: No space "
                "left on device",
            )
        )
    )


@pytest.mark.django_db
def test_a_host_failure_goes_back_to_the_queue_keeping_its_night_until_hosts_run_out(
    calc, settings
):
    project, run = calc
    settings.REPLAYHUB_HOST_TRIES = 2
    now = timezone.now()
    night = make_night(project, start=now - timedelta(hours=1))
    reservation = Amounts(1, 60, 0, 0).as_dict() | {"cost_usd": "0"}
    replay = services.replay_create(
        run=run, trigger="scheduler", night=night, reservation=reservation
    )

    def try_once(at):
        assert Replay.objects.claim(replay.pk, owner="w", now=at)
        claimed = Replay.objects.select_related("night").get(pk=replay.pk)
        report = host_failed(replay.pk)
        went_back = replay_retry_later(replay=claimed, report=report, owner="w", now=at)
        return went_back, report

    went_back, _ = try_once(now)

    assert went_back
    waiting = Replay.objects.get(pk=replay.pk)
    assert (waiting.status, waiting.night_id) == ("queued", night.pk)
    assert waiting.reservation == reservation
    assert waiting.enqueued_at == now + timedelta(seconds=15)
    assert waiting.evidence[TRIES]["count"] == 1
    # A duplicate message before it is due (a night's dispatch sent again)
    # claims nothing: the one sent with the countdown is on its way.
    assert not Replay.objects.claim(replay.pk, owner="w", now=now)

    went_back, report = try_once(now + timedelta(seconds=20))

    assert not went_back
    assert report.decision.reason_code == Reason.HOST_FAILED
    assert report.decision.reason.startswith(
        "The worker's host could not provision the replay, so the run was not "
        "replayed there: worker-2 could not provision the workspace"
    )
    assert report.decision.reason.endswith(
        "(tried 2 times over 20 s; no other host is left to try)."
    )


@pytest.mark.django_db
def test_only_the_hosts_own_failures_make_or_break_its_row(calc):
    _, run = calc

    def ruled(reason):
        replay = services.replay_create(run=run, trigger="command")
        assert Replay.objects.claim(replay.pk, owner="w")
        claimed = Replay.objects.get(pk=replay.pk)
        report = Report(decision=decide(Facts(harness_failure=reason)))
        assert not replay_retry_later(replay=claimed, report=report, owner="w")
        return THIS_PROCESS.in_a_row

    assert ruled(Reason.HOST_FAILED) == 1
    # A remote out of reach, or a sandbox one project asks for, leaves it.
    assert ruled(Reason.REPO_UNREACHABLE) == 1
    assert ruled(Reason.SANDBOX_UNAVAILABLE) == 1
    assert ruled(Reason.HOST_FAILED) == 2
    # Anything else: the host provisioned the replay.
    assert ruled(Reason.TIMEOUT) == 0


@pytest.mark.django_db
def test_the_status_page_and_healthz_name_a_stopped_host(client, admin_user):
    client.force_login(admin_user)
    assert b"Every worker host claims replays." in client.get("/status/").content
    Heartbeat.objects.create(name=stopped_row_name("worker-2"), beat_at=timezone.now())

    page = client.get("/status/").content.decode()

    assert "<code>worker-2</code>" in page
    assert "stopped claiming replays after host failures in a row" in page
    health = client.get("/healthz").json()
    assert health["stopped_hosts"] == ["worker-2"]


@pytest.mark.django_db(transaction=True)
def test_a_worker_short_of_disk_claims_nothing_and_stops_then_a_sound_one_replays(
    calc, tmp_path
):
    _, run = calc
    with only_new_workers_take_replays():
        sick_then_sound(run, tmp_path)


@contextlib.contextmanager
def only_new_workers_take_replays():
    """The session's worker, when this test process started one, leaves the
    replay queue to the workers this test starts, and takes it back after."""
    app.control.cancel_consumer(REPLAY_QUEUE, reply=True, limit=1, timeout=3)
    try:
        yield
    finally:
        app.control.add_consumer(REPLAY_QUEUE, reply=True, limit=1, timeout=3)


def sick_then_sound(run, tmp_path) -> None:
    log = tmp_path / "sick.log"
    sick = spawn_worker(
        log,
        REPLAYHUB_MIN_FREE_DISK_MB=str(10**9),
        REPLAYHUB_RETRY_FIRST_SECONDS="1",
        REPLAYHUB_HOST_FAILURES_TO_STOP="2",
    )
    try:
        replay = services.replay_request(run=run, trigger="command")
        # Its worker stops consuming the replay queue.
        wait_for(lambda: "Canceling queue replay" in log.read_text(), timeout=30)
        assert stopped_hosts()
        assert Replay.objects.get(pk=replay.pk).status == "queued"
    finally:
        stop_worker(sick)
    said = log.read_text()
    assert f"declined replay {replay.pk}: only " in said
    assert "stops claiming replays after 2 host failures in a row" in said

    # A sound worker on the host (restarted: its disk seen to) replays it.
    sound = spawn_worker(tmp_path / "sound.log")
    try:
        done = wait_for(
            lambda: Replay.objects.filter(pk=replay.pk, status="finished").first(),
            timeout=60,
        )
    finally:
        stop_worker(sound)
    assert (done.verdict, done.reason_code) == ("identical", "same_tree")
    assert stopped_hosts() == []


# Provisions a workspace in a work folder whose disk is then filled; prints
# the reason and detail it stopped with.
FILL_AND_PROVISION = """
import sys
from pathlib import Path

import django

django.setup()
from replayhub.git.scratch import Scratch
from replayhub.replay.stops import NotRun
from replayhub.replay.surroundings import Placement
from replayhub.replay.workspace import Report, _provision

work, repo, base = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
scratch = Scratch(work / "replay-1", repo)
scratch.create()
try:
    with open(work / "filler", "wb", buffering=0) as filler:
        while True:
            filler.write(bytes(4096))
except OSError:
    pass
try:
    _provision(scratch, base, Placement(), {}, Report(decision=None))
except NotRun as stop:
    print(stop.reason, stop.detail, sep=" | ")
"""


def test_a_full_disk_while_provisioning_is_the_hosts_failure_not_the_runs(tmp_path):
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare")
    repo = make_project_repo(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    script = tmp_path / "provision.py"
    script.write_text(FILL_AND_PROVISION)
    # A 1 MiB disk of its own for the work folder, in a mount namespace.
    mount = f"mount -t tmpfs -o size=1m tmpfs {work}"
    run = subprocess.run(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            f'{mount} && exec "$0" "$@"',
            sys.executable,
            str(script),
            str(work),
            str(repo.path),
            repo.rev("main"),
        ],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "mount" in run.stderr and run.returncode != 0:
        pytest.skip(f"cannot mount a small disk here: {run.stderr.strip()}")

    reason, _, detail = run.stdout.strip().partition(" | ")
    assert reason == "host_failed", run.stdout + run.stderr
    assert detail.startswith(f"{host_name()} could not provision the workspace at ")
