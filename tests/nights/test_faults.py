"""Faults mid-night, rule by rule: a lost worker gives its reservation back,
the beat's sweep sends a queued replay again only when its message is gone,
and /healthz names a stale beat and queued rows without messages.

The faults themselves (the database stopped, the broker restarted empty, a
full disk, a remote down, a worker killed) are met whole, on servers of the
test's own, in test_fault_battery.py."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
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


# A process of its own that reaches the test's broker, set up once and then
# handed pieces of code, each answered with what it printed: Django's set-up
# takes a second of CPU (several on a busy machine), which a process per step
# would pay again for every step of a test.
CHILD = """
import contextlib, io, json, sys
import django
django.setup()
for line in sys.stdin:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(json.loads(line), {})
    print("answer:", json.dumps(out.getvalue()), flush=True)
"""


class Child:
    """The other process: a web server's, a beat's or a worker's, as each
    step says. Started at its first step, when the test's database is set
    up."""

    def __init__(self, broker: str) -> None:
        self.broker = broker
        self.proc: subprocess.Popen | None = None

    def run(self, code: str) -> str:
        """What ``code`` printed; fails when the process ended."""
        if self.proc is None:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", CHILD],
                cwd=ROOT,
                env=child_env(CELERY_BROKER_URL=self.broker),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(code) + "\n")
        self.proc.stdin.flush()
        # Lines before the answer are the process's own (a log line).
        for line in self.proc.stdout:
            if line.startswith("answer: "):
                return json.loads(line.removeprefix("answer: "))
        raise AssertionError(f"the child ended ({self.proc.wait(timeout=60)})")

    def close(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)

    def send(self, replay: Replay) -> None:
        """The replay's message, as a night's dispatch sends it."""
        self.run(f"from replayhub import tasks; tasks.run_replay.delay({replay.pk})")

    def healthz(self) -> tuple[int, dict]:
        """/healthz as a load balancer sees it."""
        out = self.run(
            "from django.test import Client\n"
            "r = Client(HTTP_HOST='localhost').get('/healthz')\n"
            "print(r.status_code, r.content.decode())"
        )
        status, body = out.strip().splitlines()[-1].split(" ", 1)
        return int(status), json.loads(body)

    def sweep(self) -> list[int]:
        """One pass of the beat's orphan sweep."""
        out = self.run(
            "from datetime import timedelta\n"
            "from replayhub import services\n"
            "print(services.replay_requeue_orphaned("
            "older_than=timedelta(seconds=90)))"
        )
        return json.loads(out.strip().splitlines()[-1])


def _redis_call(port: int, *words: str) -> bytes:
    command = f"*{len(words)}\r\n" + "".join(f"${len(w)}\r\n{w}\r\n" for w in words)
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(command.encode())
        return s.recv(256)


@pytest.fixture
def private_broker():
    """A Redis of the test's own, on a free port, that no worker consumes,
    and another process reaching it."""
    _need_redis()
    port = _free_port()
    redis = _redis(port)
    broker = f"redis://127.0.0.1:{port}/0"
    child = Child(broker)
    try:
        yield port, child
    finally:
        child.close()
        redis.terminate()
        redis.wait(timeout=10)


@pytest.mark.django_db(transaction=True)
def test_the_sweep_never_sends_a_replay_waiting_behind_others_nor_one_twice(
    calc, private_broker
):
    port, child = private_broker
    waiting, _ = _queued(calc, queued_ago=timedelta(minutes=5))
    lost = services.replay_create(
        run=waiting.run, trigger="scheduler", night=waiting.night
    )
    Replay.objects.filter(pk=lost.pk).update(
        enqueued_at=timezone.now() - timedelta(minutes=5)
    )
    child.send(waiting)

    # A message waits in the queue: nothing can be told lost, nothing is sent.
    assert child.sweep() == []
    assert _redis_call(port, "LLEN", "replay") == b":1\r\n"

    # The broker loses its messages: both are sent again, once.
    _redis_call(port, "DEL", "replay")
    assert sorted(child.sweep()) == sorted([waiting.pk, lost.pk])
    assert _redis_call(port, "LLEN", "replay") == b":2\r\n"
    assert child.sweep() == []  # they wait in the queue now

    # Lost again at once: not sent again before another 90 s.
    _redis_call(port, "DEL", "replay")
    assert child.sweep() == []


@pytest.mark.django_db(transaction=True)
def test_healthz_tells_a_stale_beat_and_queued_rows_without_messages(
    calc, private_broker
):
    from replayhub.models import Heartbeat

    _, child = private_broker
    Heartbeat.objects.create(
        name=Heartbeat.BEAT, beat_at=timezone.now() - timedelta(minutes=10)
    )
    status, health = child.healthz()
    assert (status, health["status"], health["stalled"]) == (
        503,
        "stalled",
        ["beat stale"],
    )
    assert health["beat_seconds_ago"] >= 600

    services.beat_heartbeat()
    assert child.healthz()[0] == 200

    replay, _ = _queued(calc, queued_ago=timedelta(minutes=5))
    status, health = child.healthz()
    assert (status, health["stalled"]) == (503, ["queued rows without messages"])
    assert health["queued_without_messages"] == 1

    # Its message waits behind others: that is a queue, not a stall.
    child.send(replay)
    status, health = child.healthz()
    assert (status, health["status"], health["queued_without_messages"]) == (
        200,
        "ok",
        0,
    )
    assert "SECRET" not in json.dumps(health).upper()
