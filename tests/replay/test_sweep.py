"""What a dead worker left on its host is removed when a worker starts there,
and again every few minutes while it runs: the workspaces of finished replays
and of replays that no longer exist, and old environment-build scratch
folders; a running replay's workspace (another worker's on this host), a
queued one's (sent back to wait, it may be claimed here again at any moment)
and anything else stay."""

from __future__ import annotations

import os
import time

import pytest
from django.utils import timezone

from replayhub import services
from replayhub.models import Replay
from replayhub.replay import sweep
from tests.conftest import spawn_worker, stop_worker, wait_for
from tests.factories import make_replay


def replays():
    """A finished replay, one marked running (another worker's) and one queued."""
    finished = make_replay()
    claimed = services.replay_create(run=finished.run, trigger="command")
    assert Replay.objects.claim(claimed.pk, owner="another-worker@this-host")
    queued = services.replay_create(run=finished.run, trigger="command")
    return finished, Replay.objects.get(pk=claimed.pk), queued


def lay_out(work, finished, running, queued) -> dict[str, object]:
    folders = {
        "finished": work / f"replay-{finished.pk}",
        "running": work / f"replay-{running.pk}",
        "queued": work / f"replay-{queued.pk}",
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
    (work / "replay-987654320").write_text("a file, not a workspace")
    return folders


@pytest.mark.django_db
def test_the_leftovers_are_the_finished_the_unknown_and_old_builds(tmp_path):
    folders = lay_out(tmp_path, *replays())

    assert sweep.leftovers(tmp_path) == sorted(
        [folders["finished"], folders["gone"], folders["old build"]]
    )
    assert sweep.sweep(tmp_path) == 3
    assert {p.name for p in tmp_path.iterdir()} == {
        folders["running"].name,
        folders["queued"].name,
        folders["new build"].name,
        "environments",
        "replay-987654320",
    }
    assert sweep.leftovers(tmp_path / "no-such-folder") == []


@pytest.mark.django_db(transaction=True)
def test_a_worker_sweeps_its_hosts_leftovers_at_start_and_while_it_runs(tmp_path):
    work = tmp_path / "work"
    finished, running, queued = replays()
    folders = lay_out(work, finished, running, queued)
    log = tmp_path / "worker.log"

    proc = spawn_worker(log, REPLAYHUB_WORK_DIR=str(work), REPLAYHUB_SWEEP_SECONDS="1")
    try:
        wait_for(lambda: not folders["finished"].exists(), timeout=60)
        assert "removed 3 workspace(s)" in log.read_text()
        # A replay finishing while the worker runs (its worker died on this
        # host, and another host reaped it): swept within a turn or two.
        Replay.objects.filter(pk=running.pk).update(
            status="finished",
            verdict="inconclusive",
            reason_code="worker_lost",
            reason="its worker was lost",
            finished_at=timezone.now(),
        )
        wait_for(lambda: not folders["running"].exists(), timeout=30)
    finally:
        stop_worker(proc)

    assert not folders["gone"].exists() and not folders["old build"].exists()
    assert folders["queued"].exists() and folders["new build"].exists()
    assert "removed 1 workspace(s)" in log.read_text()
