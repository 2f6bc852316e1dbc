"""Faults mid-night: a lost worker, a broker that restarts and forgets its
messages, a database out of reach for a moment; /healthz while they last."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import sys
import threading
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
    database_url,
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


def _need_redis() -> None:
    if shutil.which("redis-server") is None:
        if REQUIRE_SERVICES:
            pytest.fail("redis-server is required (REPLAYHUB_REQUIRE_SERVICES=1)")
        pytest.skip("needs redis-server")


def _queued(calc, *, queued_ago: timedelta):
    """A night with one admitted replay of the calculator, queued
    ``queued_ago`` (its reservation taken), and the night."""
    repo, base, good = calc
    project = make_calc_project(repo, agentic_enabled=True)
    run = make_calc_run(
        project, prompt="same", original=good, base=base, preflight="ready"
    )
    now = timezone.now()
    night = open_night(project, now)
    amount = Amounts(1, 60, 0, Decimal(0))
    assert shares.reserve(night=night, tier="agentic", amount=amount, now=now)
    replay = services.replay_create(
        run=run,
        trigger="scheduler",
        night=night,
        reservation=amount.as_dict() | {"cost_usd": "0"},
        enqueued_at=now - queued_ago,
    )
    return replay, night


def _spawn_beat(tmp_path, **env) -> subprocess.Popen:
    """The beat, as deployed: its static schedule, a schedule file of its own."""
    log = (tmp_path / "beat.log").open("wb")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "replayhub",
            "beat",
            "--schedule",
            str(tmp_path / "beat-schedule"),
            "--loglevel",
            "INFO",
        ],
        cwd=ROOT,
        env=child_env(**env),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _healthz(**env) -> tuple[int, dict]:
    """/healthz as a load balancer sees it, from a process that reaches the
    same broker as the workers."""
    code = (
        "import django; django.setup()\n"
        "from django.test import Client\n"
        "r = Client(HTTP_HOST='localhost').get('/healthz')\n"
        "print(r.status_code, r.content.decode())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=child_env(**env),
        check=True,
        timeout=60,
        capture_output=True,
        text=True,
    ).stdout
    status, body = out.strip().splitlines()[-1].split(" ", 1)
    return int(status), json.loads(body)


# The beat reaps every minute as deployed (REPLAYHUB_REAP_SECONDS, 60); the
# test's beat reaps every few seconds, as a deployment may set, so that its
# next reap comes without a minute's wait.
REAP_SECONDS = 5


@pytest.mark.django_db(transaction=True)
def test_a_broker_that_returns_empty_is_refilled_by_the_beats_next_reap(
    calc, tmp_path, settings
):
    _need_redis()
    # As deployed, the next reap is at most a minute away.
    assert settings.CELERY_BEAT_SCHEDULE["reap-expired-leases"]["schedule"] == 60
    # Queued two minutes ago: the half-hour stale sweep would not touch it.
    replay, night = _queued(calc, queued_ago=timedelta(minutes=2))
    port = _free_port()
    broker = f"redis://127.0.0.1:{port}/0"
    redis = _redis(port)
    worker = beat = None
    try:
        _in_child(
            f"from replayhub import tasks; tasks.run_replay.delay({replay.pk})",
            CELERY_BROKER_URL=broker,
        )
        redis.terminate()
        redis.wait(timeout=10)
        redis = _redis(port)
        restarted = time.monotonic()
        worker = spawn_worker(tmp_path / "worker.log", CELERY_BROKER_URL=broker)

        # Stalled: a queued row, an empty queue, no beat yet. The orchestrator
        # is told so.
        status, health = _healthz(CELERY_BROKER_URL=broker)
        assert status == 503
        assert health["status"] == "stalled"
        assert health["queued_without_messages"] == 1
        assert set(health["stalled"]) == {
            "queued rows without messages",
            "beat stale",
        }

        beat = _spawn_beat(
            tmp_path,
            CELERY_BROKER_URL=broker,
            REPLAYHUB_REAP_SECONDS=str(REAP_SECONDS),
        )
        done = wait_for(
            lambda: Replay.objects.filter(pk=replay.pk, status="finished").first(),
            timeout=150,
            interval=0.5,
        )
        took = time.monotonic() - restarted
        print(f"finished {took:.0f} s after the broker came back empty")
        assert took < 120

        status, health = _healthz(CELERY_BROKER_URL=broker)
        assert (status, health["status"], health["stalled"]) == (200, "ok", [])
        assert health["beat_seconds_ago"] < 120
    finally:
        for proc in (beat, worker):
            if proc is not None:
                stop_worker(proc)
        redis.terminate()
        redis.wait(timeout=10)

    assert done.verdict == "identical"
    share = share_of(night)
    assert share.used_replays == 1
    assert share.reserved_replays == 0
    assert Replay.objects.filter(run=replay.run).count() == 1


class Relay:
    """A TCP relay on 127.0.0.1 in front of the database: a worker reaches
    the database through it, and the test takes the database away (every
    connection cut, new ones refused) and gives it back."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.port = _free_port()
        self._server: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(64)
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            # Shut down first: close() alone leaves a blocked accept() running.
            with contextlib.suppress(OSError):
                self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
            self._server = None
        with self._lock:
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            self._conns.clear()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return  # stopped
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


@pytest.mark.django_db(transaction=True)
def test_a_replay_sent_while_the_database_is_away_finishes_once_it_returns(
    calc, tmp_path, require_postgres
):
    _need_redis()
    from django.db import connection

    replay, night = _queued(calc, queued_ago=timedelta(seconds=0))
    conf = connection.settings_dict
    relay = Relay((conf["HOST"] or "127.0.0.1", int(conf["PORT"] or 5432)))
    relay.start()
    through_relay = database_url().replace(
        f"@{conf['HOST'] or 'localhost'}{':' + conf['PORT'] if conf['PORT'] else ''}/",
        f"@127.0.0.1:{relay.port}/",
    )
    assert f":{relay.port}/" in through_relay
    port = _free_port()
    broker = f"redis://127.0.0.1:{port}/0"
    redis = _redis(port)
    worker = None
    try:
        worker = spawn_worker(
            tmp_path / "worker.log",
            CELERY_BROKER_URL=broker,
            DATABASE_URL=through_relay,
        )
        relay.stop()  # the database goes away for 10 s
        _in_child(
            f"from replayhub import tasks; tasks.run_replay.delay({replay.pk})",
            CELERY_BROKER_URL=broker,
        )
        time.sleep(10)
        # Its claim met the outage: without a retry the message is gone.
        assert Replay.objects.get(pk=replay.pk).status == "queued"
        assert b"OperationalError" in (tmp_path / "worker.log").read_bytes()
        relay.start()
        back = time.monotonic()
        done = wait_for(
            lambda: Replay.objects.filter(pk=replay.pk, status="finished").first(),
            timeout=120,
            interval=0.5,
        )
        print(f"finished {time.monotonic() - back:.0f} s after the database returned")
    finally:
        if worker is not None:
            stop_worker(worker)
        relay.stop()
        redis.terminate()
        redis.wait(timeout=10)

    assert done.verdict == "identical"
    assert share_of(night).used_replays == 1
    assert Replay.objects.filter(run=replay.run).count() == 1


def _sweep(broker: str) -> list[int]:
    """One pass of the beat's orphan sweep, in a process of its own."""
    code = (
        "import django; django.setup()\n"
        "from datetime import timedelta\n"
        "from replayhub import services\n"
        "print(services.replay_requeue_orphaned(older_than=timedelta(seconds=90)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=child_env(CELERY_BROKER_URL=broker),
        check=True,
        timeout=60,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def _redis_call(port: int, *words: str) -> bytes:
    command = f"*{len(words)}\r\n" + "".join(f"${len(w)}\r\n{w}\r\n" for w in words)
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(command.encode())
        return s.recv(256)


@pytest.fixture
def private_broker():
    """A Redis of the test's own, on a free port, that no worker consumes."""
    _need_redis()
    port = _free_port()
    redis = _redis(port)
    yield port, f"redis://127.0.0.1:{port}/0"
    redis.terminate()
    redis.wait(timeout=10)


@pytest.mark.django_db(transaction=True)
def test_the_sweep_never_sends_a_replay_waiting_behind_others_nor_one_twice(
    calc, private_broker
):
    port, broker = private_broker
    waiting, _ = _queued(calc, queued_ago=timedelta(minutes=5))
    lost = services.replay_create(
        run=waiting.run, trigger="scheduler", night=waiting.night
    )
    Replay.objects.filter(pk=lost.pk).update(
        enqueued_at=timezone.now() - timedelta(minutes=5)
    )
    _in_child(
        f"from replayhub import tasks; tasks.run_replay.delay({waiting.pk})",
        CELERY_BROKER_URL=broker,
    )

    # A message waits in the queue: nothing can be told lost, nothing is sent.
    assert _sweep(broker) == []
    assert _redis_call(port, "LLEN", "replay") == b":1\r\n"

    # The broker loses its messages: both are sent again, once.
    _redis_call(port, "DEL", "replay")
    assert sorted(_sweep(broker)) == sorted([waiting.pk, lost.pk])
    assert _redis_call(port, "LLEN", "replay") == b":2\r\n"
    assert _sweep(broker) == []  # they wait in the queue now

    # Lost again at once: not sent again before another 90 s.
    _redis_call(port, "DEL", "replay")
    assert _sweep(broker) == []


@pytest.mark.django_db(transaction=True)
def test_healthz_tells_a_stale_beat_and_queued_rows_without_messages(
    calc, private_broker
):
    from replayhub.models import Heartbeat

    _, broker = private_broker
    Heartbeat.objects.create(
        name=Heartbeat.BEAT, beat_at=timezone.now() - timedelta(minutes=10)
    )
    status, health = _healthz(CELERY_BROKER_URL=broker)
    assert (status, health["status"], health["stalled"]) == (
        503,
        "stalled",
        ["beat stale"],
    )
    assert health["beat_seconds_ago"] >= 600

    services.beat_heartbeat()
    assert _healthz(CELERY_BROKER_URL=broker)[0] == 200

    replay, _ = _queued(calc, queued_ago=timedelta(minutes=5))
    status, health = _healthz(CELERY_BROKER_URL=broker)
    assert (status, health["stalled"]) == (503, ["queued rows without messages"])
    assert health["queued_without_messages"] == 1

    # Its message waits behind others: that is a queue, not a stall.
    _in_child(
        f"from replayhub import tasks; tasks.run_replay.delay({replay.pk})",
        CELERY_BROKER_URL=broker,
    )
    status, health = _healthz(CELERY_BROKER_URL=broker)
    assert (status, health["status"], health["queued_without_messages"]) == (
        200,
        "ok",
        0,
    )
    assert "SECRET" not in json.dumps(health).upper()
