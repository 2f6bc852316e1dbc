"""The fault battery: a night's faults one after another on a stack of the
test's own, as a user of ReplayHub meets them.

The stack (module-scoped): a PostgreSQL and a Redis started on free ports
(tests/servers.py), two worker hosts — each a real Celery worker with its own
var, work and mirror folders and its own host name, sharing one environment
store — a beat, and the web app serving /healthz. Each scenario has its
project and its night of the calculator's scripted agent, and asserts what a
user would see: every queued replay reaches its verdict within two minutes of
the fault's end, /healthz names the stall while it lasts, and nothing is
spent twice.

Short settings keep the module within two minutes of wall time: the beat
reaps every 3 s (60 s deployed), a queued replay without a message is sent
again after 3 s (90 s), a remote out of reach is tried again after 1 s,
doubling up to 4 s (15 s up to 300 s).
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connections
from django.utils import timezone

from replayhub import services
from replayhub.demo.calculator import GOOD
from replayhub.models import Heartbeat, Night, Project, Replay, Run
from replayhub.replay.services import stopped_row_name
from tests.conftest import wait_for
from tests.factories import make_budget, make_calc_project, make_calc_run, share_of
from tests.gitrepos import Executable
from tests.gitservers import GitDaemon
from tests.nights.stack import REGULAR, Stack, create_tables
from tests.scripted import make_project_repo, original_commit
from tests.servers import Postgres, Redis, default_database, need_servers

# The stack is the module's: its tests run on one xdist worker.
pytestmark = pytest.mark.xdist_group("fault-battery")

# Within this long of a fault's end, every queued replay has its verdict.
RECOVERY_SECONDS = 120
# Bounds for what is not a promise of the product but a machine's speed: a
# replay or a worker's start, beside the rest of the suite on 2 cores, takes
# several times what it takes alone (a replay 5-10 s, a start 3-5 s). Each wait
# prints what it took, for the log of a run that fails.
REPLAY_SECONDS = 240
START_SECONDS = 120


def waited(what: str, predicate, timeout: float):
    """``wait_for``, naming what was waited for, and printing how long it took."""
    start = time.monotonic()
    try:
        value = wait_for(predicate, timeout=timeout, interval=0.25)
    except pytest.fail.Exception:
        pytest.fail(f"{what}: not within {timeout:.0f} s")
    print(f"{what}: {time.monotonic() - start:.1f} s")
    return value


@pytest.fixture(scope="module")
def stack(django_db_blocker):
    need_servers("the fault battery")
    root = Path(tempfile.mkdtemp(prefix="replayhub-battery-"))
    # The sandbox's uid reaches the workspaces and mirrors below it.
    root.chmod(0o755)
    pg, redis = Postgres(), Redis()
    made = Stack(pg, redis, root)
    try:
        pg.init()
        redis.start()
        with django_db_blocker.unblock(), default_database(pg.url):
            create_tables()
            made.start_beat()
            made.start_web()
            # "Full": less free than the minimum, the way the workers measure it.
            sick = made.host(
                "host-c",
                REPLAYHUB_MIN_FREE_DISK_MB=str(10**9),
                REPLAYHUB_HOST_FAILURES_TO_STOP="1",
            )
            made.start(*(made.host(name) for name in REGULAR), sick)
            made.everyone()
            waited(
                "/healthz up", lambda: made.healthz()[0] in (200, 503), START_SECONDS
            )
            yield made
            made.stop_all()
    finally:
        made.stop_all()
        redis.stop()
        pg.remove()
        shutil.rmtree(root, ignore_errors=True)


# --- projects, nights and what the user sees of them ---------------------------


@dataclass
class Calc:
    project: Project
    good: str  # the original run's commit
    base: str


def night_project(
    tmp_path: Path, slug: str, prompts: list[str], *, setup: str = "", **fields
) -> Calc:
    """The calculator on a repository of its own (with ``setup``, a setup
    phase), a run per prompt, and a budget whose window is half a day away:
    only ``nightly --now`` opens tonight (the beat's tick leaves it alone)."""
    repo = make_project_repo(tmp_path / slug)
    if setup:
        repo.commit({"setup.sh": Executable(setup)}, "setup")
        fields["setup_command"] = ["sh", "setup.sh"]
    good = original_commit(repo, GOOD, branch="agent/good")
    project = make_calc_project(repo, slug=slug, agentic_enabled=True, **fields)
    start = (timezone.now().hour + 12) % 24
    make_budget(
        project,
        window_start_hour=start,
        window_end_hour=(start + 4) % 24,
        timezone="UTC",
        shares={"agentic": {"max_replays": 10}},
    )
    calc = Calc(project, good, repo.rev("main"))
    for prompt in prompts:
        make_run(calc, prompt)
    return calc


def make_run(calc: Calc, prompt: str):
    n = Run.objects.filter(project=calc.project)
    return make_calc_run(
        calc.project,
        prompt=prompt,
        original=calc.good,
        base=calc.base,
        preflight="ready",
        external_id=f"{calc.project.slug}-{n.count()}",
    )


# Each prompt's verdict, as the scripted agent lands it.
VERDICTS = {
    "same": ("identical", "same_tree"),
    "bad": ("divergent", "replay_fails_tests"),
}


def verdicts(project: Project) -> list[tuple[str, str, str]]:
    return sorted(
        (r.run.prompt, r.verdict, r.reason_code)
        for r in Replay.objects.filter(project=project).select_related("run")
    )


def reasons(project: Project) -> list[str]:
    """The reasons of the replays that came to no verdict, for a failure."""
    inconclusive = Replay.objects.filter(project=project).exclude(
        verdict__in=("identical", "divergent")
    )
    return [f"{r.pk} {r.status} {r.reason}" for r in inconclusive]


def expected(prompts: list[str]) -> list[tuple[str, str, str]]:
    return sorted((p, *VERDICTS[p]) for p in prompts)


def all_finished(
    project: Project, n: int, *, since: float, bound: float = RECOVERY_SECONDS
) -> float:
    """Seconds from ``since`` (a ``time.monotonic()``) until ``n`` replays of
    ``project`` are finished; fails past ``bound``."""
    done = Replay.objects.filter(project=project, status="finished")
    left = bound - (time.monotonic() - since)
    what = f"{n} replays of {project.slug} finished"
    waited(what, lambda: done.count() >= n, timeout=max(left, 1))
    return time.monotonic() - since


def nothing_spent_twice(project: Project, runs: int) -> None:
    """One replay a run, each counted once in its night's share."""
    assert Replay.objects.filter(project=project).count() == runs
    share = share_of(Night.objects.get(project=project))
    assert share.used_replays == runs
    assert (share.reserved_replays, share.reserved_sandbox_seconds) == (0, 0)


def healthy(stack: Stack) -> None:
    """/healthz is back to "ok" within the beat's next reap or two: a
    replay of another night sent back to wait (the remote-down night's) may
    show as a queued row without a message for a moment."""
    waited("/healthz ok", lambda: stack.healthz()[0] == 200, timeout=30)
    status, health = stack.healthz()
    assert (status, health["status"], health["stalled"]) == (200, "ok", []), health


def running(project: Project) -> bool:
    return Replay.objects.filter(project=project, status="running").exists()


# --- (a) the database away ------------------------------------------------------

PROMPTS = ["same", "bad", "same", "bad"]


def test_a_database_stopped_for_10_s_mid_night_every_replay_finishes_after(
    stack, tmp_path
):
    project = night_project(tmp_path, "db-away", PROMPTS).project
    assert "admitted 4, deferred 0" in stack.nightly("db-away")
    waited(
        f"a replay of {project.slug} running", lambda: running(project), REPLAY_SECONDS
    )

    connections.close_all()
    stack.pg.stop()
    away = time.monotonic()
    status, health = stack.healthz()
    assert (status, health["status"]) == (503, "error")
    assert health["database"] == "error: OperationalError"
    time.sleep(max(0.0, 10 - (time.monotonic() - away)))
    stack.pg.start()
    back = time.monotonic()
    connections.close_all()

    took = all_finished(project, 4, since=back)
    print(f"(a) every replay finished {took:.0f} s after the database returned")
    assert verdicts(project) == expected(PROMPTS), reasons(project)
    nothing_spent_twice(project, 4)
    healthy(stack)


# --- (b) the broker restarted empty ----------------------------------------------


def test_b_redis_restarted_empty_mid_night_every_replay_finishes_after(stack, tmp_path):
    project = night_project(tmp_path, "broker-empty", PROMPTS).project
    # One host takes the night's first replays: three still wait in the
    # broker when the first runs.
    stack.only(stack.hosts["host-a"])
    assert "admitted 4, deferred 0" in stack.nightly("broker-empty")
    waited(
        f"a replay of {project.slug} running", lambda: running(project), REPLAY_SECONDS
    )

    # The beat waits while the stall is looked at: its next reap would end it
    # within 3 s, too soon to be sure to see it. The host takes nothing more
    # meanwhile, so replays still wait in the broker when it restarts (on a
    # busy machine two hosts could otherwise have taken all four by then).
    assert stack.beat is not None
    os.kill(stack.beat.pid, signal.SIGSTOP)
    try:
        stack.only()
        stack.restart_redis()
        back = time.monotonic()

        def stalled():
            status, health = stack.healthz()
            if "queued rows without messages" in health.get("stalled", []):
                return status, health
            return None

        # The queued replays' messages are gone: /healthz says so.
        status, health = waited("/healthz stalled", stalled, timeout=60)
        assert (status, health["status"]) == (503, "stalled")
        assert health["queued_without_messages"] >= 1
    finally:
        # The beat goes on whatever the steering meets: a beat left stopped
        # would fail every scenario after this one.
        try:
            stack.everyone()
        finally:
            os.kill(stack.beat.pid, signal.SIGCONT)

    took = all_finished(project, 4, since=back)
    print(f"(b) every replay finished {took:.0f} s after the broker came back")
    assert verdicts(project) == expected(PROMPTS), reasons(project)
    nothing_spent_twice(project, 4)
    healthy(stack)


# --- (c) one host's work folder full ---------------------------------------------


def test_c_a_full_work_folder_stops_its_host_and_the_others_finish_the_night(
    stack, tmp_path
):
    sick = stack.hosts["host-c"]
    before = len(sick.logs())
    project = night_project(tmp_path, "disk-full", PROMPTS).project
    stack.only(*(stack.hosts[name] for name in REGULAR), sick)
    try:
        assert "admitted 4, deferred 0" in stack.nightly("disk-full")
        # Not a recovery: the night's own pace on the hosts left.
        all_finished(project, 4, since=time.monotonic(), bound=REPLAY_SECONDS)
        waited(
            "host-c stopped consuming",
            lambda: "Canceling queue replay" in sick.logs()[before:],
            timeout=START_SECONDS,
        )
    finally:
        stack.everyone()
    said = sick.logs()[before:]
    assert "host-c declined replay " in said
    assert "host-c stops claiming replays after 1 host failures in a row" in said
    assert not list(sick.work.glob("replay-*"))
    # Nothing ended for the full host: every run has its verdict from another.
    assert verdicts(project) == expected(PROMPTS), reasons(project)
    nothing_spent_twice(project, 4)
    # The stopped host is named, and alone stalls nothing.
    healthy(stack)
    assert stack.healthz()[1]["stopped_hosts"] == ["host-c"]
    # Its disk seen to, the host's next worker would clear the row.
    Heartbeat.objects.filter(name=stopped_row_name("host-c")).delete()


# --- (d) the remote down as the night opens ---------------------------------------

DOWN_SECONDS = 30


@dataclass
class RemoteDown:
    project: Project
    said: str  # nightly --now's output
    returned: threading.Event
    returned_at: list  # when it returned, once it has


@pytest.fixture(scope="module", autouse=True)
def remote_down(stack, tmp_path_factory):
    """(d)'s night, opened with the module's first test on a remote that is
    down for its first 30 s: the other scenarios, each of its own project,
    run while it waits, and (d) judges it."""
    calc = night_project(tmp_path_factory.mktemp("d"), "remote-down", ["same", "bad"])
    repo = Path(calc.project.repo_path)
    away = repo.with_name("moved-away")
    with GitDaemon(repo.parent) as daemon:
        Project.objects.filter(pk=calc.project.pk).update(
            repo_path=daemon.url(repo.name)
        )
        # The daemon answers, but has no repository to serve until it returns.
        repo.rename(away)
        down = RemoteDown(calc.project, "", threading.Event(), [])

        def come_back() -> None:
            away.rename(repo)
            down.returned_at.append(timezone.now())
            down.returned.set()

        timer = threading.Timer(DOWN_SECONDS, come_back)
        timer.start()
        try:
            down.said = stack.nightly("remote-down")
            yield down
        finally:
            timer.cancel()
            if away.exists():
                away.rename(repo)


def test_d_a_remote_down_for_the_nights_first_30_s_replays_when_it_returns(
    stack, remote_down
):
    project = remote_down.project
    assert "admitted 2, deferred 0" in remote_down.said
    assert remote_down.returned.wait(DOWN_SECONDS + 5)

    took = all_finished(project, 2, since=time.monotonic())
    print(f"(d) the last replay finished {took:.0f} s after (d) was judged")
    assert verdicts(project) == expected(["same", "bad"]), reasons(project)
    # Tried while it was down, replayed once it returned.
    said = "".join(h.logs() for h in stack.hosts.values())
    assert "repo_unreachable after try 1; tried again in 1 s" in said
    (returned_at,) = remote_down.returned_at
    for replay in Replay.objects.filter(project=project):
        assert replay.finished_at > returned_at
        assert replay.finished_at - returned_at < timedelta(seconds=RECOVERY_SECONDS)
    nothing_spent_twice(project, 2)


# --- (e) a worker killed -----------------------------------------------------------


def test_e_a_killed_workers_workspace_is_gone_after_the_next_worker_start(
    stack, tmp_path
):
    # A lease of 3 s, so that the beat takes the replay back within seconds
    # (120 s deployed).
    doomed = stack.host("host-e", REPLAYHUB_LEASE_SECONDS="3")
    stack.start(doomed)
    calc = night_project(tmp_path, "killed", [], max_attempts=1)
    replay = services.replay_create(run=make_run(calc, "sleep"), trigger="command")
    workspace = doomed.work / f"replay-{replay.pk}"
    stack.only(doomed)
    try:
        stack.send(replay)
        waited(
            "host-e running the replay",
            lambda: workspace.exists() and running(calc.project),
            timeout=REPLAY_SECONDS,
        )
        stack.kill(doomed)
    finally:
        stack.everyone()

    lost = Replay.objects.filter(pk=replay.pk, status="finished")
    waited("the lost replay reaped", lost.exists, timeout=START_SECONDS)
    assert (lost.get().verdict, lost.get().reason_code) == (
        "inconclusive",
        "worker_lost",
    )
    # Reaped on another host: what the dead worker left is still on its own.
    assert workspace.exists()

    del doomed.env["REPLAYHUB_LEASE_SECONDS"]  # the next worker's is as deployed
    stack.start(doomed)
    try:
        waited(
            "host-e's workspace removed",
            lambda: not workspace.exists(),
            timeout=START_SECONDS,
        )
    finally:
        stack.stop(doomed)
    assert "removed 1 workspace(s)" in doomed.logs()


# --- (f) an environment built on one host, used on the other ------------------------

SETUP = """#!/bin/sh
set -e
python3 -m venv --without-pip "$REPLAYHUB_ENV_DIR"
"""


def test_f_an_environment_built_on_one_host_is_used_on_the_other_without_a_rebuild(
    stack, tmp_path
):
    calc = night_project(tmp_path, "env-shared", [], setup=SETUP)
    replays = []
    try:
        for host in (stack.hosts["host-a"], stack.hosts["host-b"]):
            replay = services.replay_create(
                run=make_run(calc, "same"), trigger="command"
            )
            stack.only(host)
            stack.send(replay)
            done = Replay.objects.filter(pk=replay.pk, status="finished")
            waited(f"replay on {host.name}", done.exists, timeout=REPLAY_SECONDS)
            replays.append(done.get())
    finally:
        stack.everyone()

    built, fetched = (r.evidence["environment"] for r in replays)
    assert [(r.verdict, r.reason_code) for r in replays] == [VERDICTS["same"]] * 2
    assert built["cached"] is False and "source" not in built
    assert fetched["key"] == built["key"]
    assert (fetched["source"], fetched["cached"]) == ("store", True)
    # One build: host B's environment is host A's, as published.
    assert fetched["setup_seconds"] == built["setup_seconds"]
    store = stack.root / "store"
    assert [p.name for p in store.glob("*.json")] == [f"{built['key']}.json"]


# --- (g) nightly --now twice ---------------------------------------------------------


def test_g_nightly_now_twice_admits_once(stack, tmp_path):
    prompts = ["same", "bad"]
    project = night_project(tmp_path, "twice", prompts).project

    # Two operators at once: one admits, the other finds it done.
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        said = sorted(pool.map(stack.nightly, ["twice", "twice"]))

    assert ["admitted 2, deferred 0" in out for out in said].count(True) == 1, said
    assert ["admitted 0, deferred 0" in out for out in said].count(True) == 1, said
    assert ["already admitted tonight: 2" in out for out in said].count(True) == 1, said
    all_finished(project, 2, since=time.monotonic())
    assert verdicts(project) == expected(prompts), reasons(project)
    nothing_spent_twice(project, 2)
