"""A remote that is down when the night opens: its night's replays wait for it
with back-off and replay to their real verdicts once it returns; a remote
still down when the window closes is ruled ``repo_unreachable``, saying how
often and over how long it was tried."""

from __future__ import annotations

import re
import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from replayhub import services
from replayhub.demo.calculator import GOOD
from replayhub.models import Replay
from replayhub.replay.services import TRIES
from tests.conftest import spawn_worker, stop_worker, wait_for
from tests.factories import (
    make_budget,
    make_calc_project,
    make_calc_run,
    make_night,
    share_of,
)
from tests.gitservers import GitDaemon
from tests.scripted import make_project_repo, original_commit

pytestmark = pytest.mark.django_db(transaction=True)

DOWN_SECONDS = 4


def test_a_nights_replays_wait_for_a_remote_that_was_down_and_replay_to_verdicts(
    tmp_path,
):
    repo = make_project_repo(tmp_path)
    base = repo.rev("main")
    good = original_commit(repo, GOOD, branch="agent/good")
    away = repo.path.with_name("moved-away")
    with GitDaemon(repo.path.parent) as daemon:
        project = make_calc_project(
            repo, repo_path=daemon.url(repo.path.name), agentic_enabled=True
        )
        for prompt in ("same", "bad"):
            make_calc_run(
                project, prompt=prompt, original=good, base=base, preflight="ready"
            )
        make_budget(
            project,
            window_start_hour=0,
            window_end_hour=0,  # a whole day: now is inside
            timezone="UTC",
            shares={"agentic": {"max_replays": 5}},
        )
        # The remote is down as the night opens: the daemon answers, but has
        # no repository to serve until it comes back.
        repo.path.rename(away)
        back = threading.Timer(DOWN_SECONDS, away.rename, args=(repo.path,))
        log = tmp_path / "worker.log"
        # Tried again after 1 s, then 2 s apart: the remote's return is seen
        # within seconds of it, however slow the machine.
        worker = spawn_worker(
            log, REPLAYHUB_RETRY_FIRST_SECONDS="1", REPLAYHUB_RETRY_MAX_SECONDS="2"
        )
        try:
            now = timezone.now()
            report = services.night_run(project=project, now=now)
            back.start()
            assert len(report.admitted) == 2
            finished = Replay.objects.filter(pk__in=report.admitted, status="finished")
            # Two replays, each 3-5 s alone; several times that on a busy
            # machine.
            wait_for(lambda: finished.count() == 2, timeout=180)
        finally:
            back.cancel()
            stop_worker(worker)
            if away.exists():
                away.rename(repo.path)

    verdicts = {r.run.prompt: (r.verdict, r.reason_code) for r in finished}
    assert verdicts == {
        "same": ("identical", "same_tree"),
        "bad": ("divergent", "replay_fails_tests"),
    }
    # Tried again, as the same replays: nothing ended repo_unreachable.
    assert "repo_unreachable after try 1; tried again in 1 s" in log.read_text()
    assert Replay.objects.filter(project=project).count() == 2
    share = share_of(report.night)
    assert share.used_replays == 2
    assert (share.reserved_replays, share.reserved_sandbox_seconds) == (0, 0)


def test_a_remote_still_down_when_the_window_closes_is_ruled_with_its_tries(
    tmp_path, mirror_dir
):
    repo = make_project_repo(tmp_path)
    base = repo.rev("main")
    good = original_commit(repo, GOOD, branch="agent/good")
    with GitDaemon(repo.path.parent) as daemon:
        url = daemon.url(repo.path.name)
    project = make_calc_project(repo, repo_path=url, agentic_enabled=True)
    run = make_calc_run(project, prompt="same", original=good, base=base)
    now = timezone.now()
    # The window closes in 10 s: the next try (15 s on) would fall after it.
    night = make_night(project, start=now - timedelta(hours=8), hours=8 + 10 / 3600)
    replay = services.replay_create(
        run=run,
        trigger="scheduler",
        night=night,
        enqueued_at=now,
        evidence={
            TRIES: {
                "count": 5,
                "since": (now - timedelta(minutes=4)).isoformat(),
                "last": "refused",
            }
        },
    )

    services.replay_execute(replay_id=replay.pk)

    replay.refresh_from_db()
    assert (replay.status, replay.verdict, replay.reason_code) == (
        "finished",
        "inconclusive",
        "repo_unreachable",
    )
    assert "errno=Connection refused" in replay.reason
    assert re.search(
        r"\(tried 6 times over 4 min 0\d s; the night's window closes before "
        r"another try\)\.$",
        replay.reason,
    )
    assert TRIES not in replay.evidence


def test_a_replay_no_night_admitted_is_ruled_at_once(tmp_path, mirror_dir):
    repo = make_project_repo(tmp_path)
    with GitDaemon(repo.path.parent) as daemon:
        url = daemon.url(repo.path.name)
    project = make_calc_project(repo, repo_path=url)
    run = make_calc_run(project, prompt="same", original=repo.rev("main"))
    replay = services.replay_create(run=run, trigger="command")

    services.replay_execute(replay_id=replay.pk)

    replay.refresh_from_db()
    assert (replay.status, replay.reason_code) == ("finished", "repo_unreachable")
    assert "tried" not in replay.reason
