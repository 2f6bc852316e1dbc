"""An agent filling the disk, or memory past rlimits, is stopped by its caps.

The disk cap is measured on the host while the agent runs: what the replay's
directory takes on the host's disk never grows far past the cap, and the
replay ends ``inconclusive / cap_fired`` naming it.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from django.conf import settings

from replayhub import services
from replayhub.git.scratch import Scratch
from replayhub.models import Replay
from replayhub.replay import leftovers
from replayhub.sandbox.watchdog import disk_usage
from tests.factories import make_calc_project, make_calc_run
from tests.gitrepos import make_repo

pytestmark = pytest.mark.django_db

MiB = 1024**2
WRITE_GOOD = "printf 'def add(a, b):\\n    return a + b\\n' > calc.py\n"


class HostDisk:
    """The largest size the work dir reached on the host's disk, sampled."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, disk_usage([self.path])[0])


def hostile_replay(repo, base, original, script: str, **fields) -> Replay:
    project = make_calc_project(repo, agent_command=["sh", "-c", script], **fields)
    run = make_calc_run(project, prompt="hostile", original=original, base=base)
    replay = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=replay.pk)
    return Replay.objects.get(pk=replay.pk)


def test_an_agent_filling_the_disk_is_stopped_near_the_cap(
    calc_repo, calc_base, calc_good
):
    # 4 GiB if nothing stopped it.
    script = (
        "i=0; while [ $i -lt 256 ]; do "
        "head -c 16777216 /dev/zero > fill-$i || exit 1; i=$((i+1)); done"
    )
    work_dir = Path(settings.REPLAYHUB_WORK_DIR)
    project = make_calc_project(
        calc_repo, agent_command=["sh", "-c", script], max_disk_mb=64
    )
    run = make_calc_run(project, prompt="hostile", original=calc_good, base=calc_base)
    replay = services.replay_create(run=run, trigger="command")
    # The replay's own directory: the test worker's Celery worker may be
    # finishing another test's replay in the same work dir meanwhile.
    with HostDisk(work_dir / f"replay-{replay.pk}") as host:
        services.replay_execute(replay_id=replay.pk)
    result = Replay.objects.get(pk=replay.pk)

    assert (result.verdict, result.reason_code) == ("inconclusive", "cap_fired")
    assert "(disk)" in result.reason and "64 MiB" in result.reason
    # The cap, plus what a fast disk takes in between two measurements.
    assert 64 * MiB < host.peak < 448 * MiB
    assert not (work_dir / f"replay-{result.pk}").exists()
    assert result.evidence["agent"]["limit_fired"] == "disk"


def test_sparse_files_count_at_the_size_a_copy_would_write(
    calc_repo, calc_base, calc_good
):
    script = WRITE_GOOD + "for i in 1 2 3 4 5 6; do truncate -s 60M sparse-$i; done"
    result = hostile_replay(calc_repo, calc_base, calc_good, script, max_disk_mb=64)

    assert (result.verdict, result.reason_code) == ("inconclusive", "cap_fired")
    assert "(disk)" in result.reason


def test_a_tree_over_the_disk_cap_is_not_checked_out(tmp_path, calc_repo):
    repo = make_repo(tmp_path / "big", {"blob.bin": b"\0" * (3 * MiB)})
    scratch = Scratch(tmp_path / "scratch", repo.path)
    tree = scratch.resolve_tree(repo.head())
    project = make_calc_project(calc_repo, max_disk_mb=2)

    decision = leftovers.too_large_to_check_out(
        scratch, {"original": tree, "replay": tree}, project, {}
    )

    assert decision is not None and decision.reason_code == "cap_fired"
    assert "replay tree" in decision.reason and "3 MiB" in decision.reason
    project.max_disk_mb = 4
    assert (
        leftovers.too_large_to_check_out(scratch, {"replay": tree}, project, {}) is None
    )
