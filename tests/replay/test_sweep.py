"""What a dead worker left on its host is removed when a worker starts there:
the workspaces of replays no longer running and old environment-build
scratch folders; a running replay's workspace (another worker's on this
host) and anything else stay."""

from __future__ import annotations

import os
import time

import pytest

from replayhub import services
from replayhub.models import Replay
from replayhub.replay import sweep
from tests.conftest import spawn_worker, stop_worker, wait_for
from tests.factories import make_replay


def replays():
    """A finished replay and one marked running (another worker's)."""
    finished = make_replay()
    queued = services.replay_create(run=finished.run, trigger="command")
    assert Replay.objects.claim(queued.pk, owner="another-worker@this-host")
    return finished, Replay.objects.get(pk=queued.pk)


def lay_out(work, finished, running) -> dict[str, object]:
    folders = {
        "finished": work / f"replay-{finished.pk}",
        "running": work / f"replay-{running.pk}",
        "gone": work / "replay-987654321",
        "old build": work / "env-build-0123456789ab",
        "new build": work / "env-build-ba9876543210",
        "other": work / "environments",
    }
    for folder in folders.values():
        (folder / "checkout").mkdir(parents=True)
        (folder / "checkout" / "big.bin").write_bytes(b"x" * 1024)
    hours_ago = time.time() - 7 * 3600
    os.utime(folders["old build"], (hours_ago, hours_ago))
    (work / "replay-5").write_text("a file, not a workspace")
    return folders


@pytest.mark.django_db
def test_the_leftovers_are_the_finished_the_unknown_and_old_builds(tmp_path):
    finished, running = replays()
    folders = lay_out(tmp_path, finished, running)

    assert sweep.leftovers(tmp_path) == sorted(
        [folders["finished"], folders["gone"], folders["old build"]]
    )
    assert sweep.sweep(tmp_path) == 3
    assert {p.name for p in tmp_path.iterdir()} == {
        folders["running"].name,
        folders["new build"].name,
        "environments",
        "replay-5",
    }
    assert sweep.leftovers(tmp_path / "no-such-folder") == []


@pytest.mark.django_db(transaction=True)
def test_a_worker_starting_sweeps_its_hosts_leftovers(tmp_path):
    work = tmp_path / "work"
    finished, running = replays()
    folders = lay_out(work, finished, running)
    log = tmp_path / "worker.log"

    proc = spawn_worker(log, REPLAYHUB_WORK_DIR=str(work))
    try:
        wait_for(lambda: not folders["finished"].exists(), timeout=60)
    finally:
        stop_worker(proc)

    assert not folders["gone"].exists() and not folders["old build"].exists()
    assert folders["running"].exists() and folders["new build"].exists()
    assert "removed 3 workspace(s)" in log.read_text()
