"""A new host has no work folder until its first replay: that is no reason to
decline one (``./dev run`` on a fresh clone)."""

from __future__ import annotations

import pytest

from replayhub.replay.services import THIS_PROCESS, host_declines


@pytest.mark.django_db
def test_a_host_without_its_work_folder_yet_makes_it_and_takes_the_replay(
    settings, tmp_path
):
    settings.REPLAYHUB_WORK_DIR = tmp_path / "var" / "replays"
    settings.REPLAYHUB_MIN_FREE_DISK_MB = 1
    THIS_PROCESS.in_a_row = 0

    assert host_declines(replay_id=1) == ""
    assert settings.REPLAYHUB_WORK_DIR.is_dir()
    assert THIS_PROCESS.in_a_row == 0
