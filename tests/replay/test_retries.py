"""When a replay goes back to the queue instead of being ruled: the rules
alone, without a database."""

from __future__ import annotations

import errno
from datetime import UTC, datetime, timedelta

import pytest

from replayhub.git.mirrors import RepoUnreachable
from replayhub.git.scratch import GitError
from replayhub.replay.retries import (
    backoff,
    duration,
    host_fault,
    next_try,
    tried_reason,
)
from replayhub.verdicts import Reason

NOW = datetime(2026, 6, 1, 23, 0, tzinfo=UTC)
OPEN = NOW + timedelta(hours=6)


def delay(reason=Reason.REPO_UNREACHABLE, *, tries=1, window_end=OPEN, host_tries=3):
    return next_try(
        reason=reason,
        tries=tries,
        now=NOW,
        window_end=window_end,
        first=15,
        cap=300,
        host_tries=host_tries,
    )


def test_the_back_off_doubles_from_the_first_delay_up_to_its_cap():
    assert [backoff(n, first=15, cap=300) for n in range(1, 8)] == [
        15,
        30,
        60,
        120,
        240,
        300,
        300,
    ]


def test_a_remote_out_of_reach_is_tried_again_while_the_window_is_open():
    assert delay(tries=1) == 15
    assert delay(tries=3) == 60
    # No count bounds it: only the window does.
    assert delay(tries=40) == 300


def test_a_remote_out_of_reach_is_final_when_the_next_try_falls_after_the_window():
    assert delay(tries=1, window_end=NOW + timedelta(seconds=15)) is None
    assert delay(tries=1, window_end=NOW + timedelta(seconds=16)) == 15
    assert delay(tries=5, window_end=NOW + timedelta(minutes=3)) is None
    assert delay(tries=1, window_end=NOW - timedelta(seconds=1)) is None


def test_a_replay_no_night_admitted_is_ruled_at_once():
    assert delay(window_end=None) is None
    assert delay(Reason.HOST_FAILED, window_end=None) is None


@pytest.mark.parametrize("reason", [Reason.HOST_FAILED, Reason.SANDBOX_UNAVAILABLE])
def test_a_host_failure_is_tried_on_a_few_hosts_then_stands(reason):
    assert delay(reason, tries=1) == 15
    assert delay(reason, tries=2) == 30
    assert delay(reason, tries=3) is None
    assert delay(reason, tries=1, host_tries=1) is None
    assert delay(reason, tries=1, window_end=NOW + timedelta(seconds=10)) is None


@pytest.mark.parametrize(
    "reason",
    [
        Reason.FIXTURE_FAILED,
        Reason.SETUP_FAILED,
        Reason.WORKER_LOST,
        Reason.TIMEOUT,
        Reason.SAME_TREE,
    ],
)
def test_every_other_ruling_stands_at_once(reason):
    assert delay(reason) is None


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        OSError(errno.EDQUOT, "Disk quota exceeded"),
        OSError(errno.EROFS, "Read-only file system"),
        PermissionError(errno.EACCES, "Permission denied", "/var/mirrors/7.git"),
        GitError(
            "git checkout failed with exit code 128: error: unable to write "
            "file calc.py: No space left on device"
        ),
        GitError(
            "git clone failed with exit code 128",
            returncode=128,
            stderr="fatal: write error: No space left on device\n",
        ),
        GitError("cannot start git: [Errno 12] Cannot allocate memory"),
        # What git says when a full disk stops it writing a lock file.
        GitError(
            "git update-ref failed with exit code 128: fatal: update_ref failed "
            "for ref 'refs/heads/replay-base': cannot update ref "
            "'refs/heads/replay-base': couldn't write '/w/replay-1/scratch.git/"
            "refs/heads/replay-base.lock'"
        ),
        # A fetch into this host's mirror that failed for its disk: the
        # remote answered.
        RepoUnreachable("fatal: write error: No space left on device", url="git://h/p"),
    ],
)
def test_a_host_that_cannot_write_or_read_its_own_folders_is_the_hosts_fault(error):
    assert host_fault(error)


@pytest.mark.parametrize(
    "error",
    [
        GitError(
            "git rev-parse failed with exit code 128: fatal: ambiguous argument "
            "'0badc0de': unknown revision or path not in the working tree."
        ),
        GitError(
            "git checkout failed with exit code 128: error: invalid path 'con/aux.py'"
        ),
        GitError("git clone timed out after 120s"),
        FileNotFoundError(errno.ENOENT, "No such file or directory"),
        RepoUnreachable("fatal: Could not read from remote repository."),
        RepoUnreachable("git@forge: Permission denied (publickey)."),
        RepoUnreachable(
            "fatal: unable to connect to 127.0.0.1:\n127.0.0.1[0: 127.0.0.1]: "
            "errno=Connection refused"
        ),
    ],
)
def test_a_bad_commit_or_a_remote_that_refuses_is_not_the_hosts_fault(error):
    assert not host_fault(error)
    assert not host_fault(error, free_bytes=600, minimum_bytes=512)


def test_any_failure_on_a_work_folder_short_of_space_is_the_hosts_fault():
    error = GitError("git checkout failed with exit code 128")

    assert host_fault(error, free_bytes=100, minimum_bytes=512)
    assert not host_fault(error, free_bytes=512, minimum_bytes=512)
    assert not host_fault(error, free_bytes=None, minimum_bytes=512)


def test_a_final_ruling_says_how_often_and_over_how_long_it_was_tried():
    reason = "The project's repository could not be fetched: refused."

    assert tried_reason(reason, tries=1, seconds=0, window_closed=True) == reason
    assert tried_reason(reason, tries=6, seconds=252, window_closed=True) == (
        "The project's repository could not be fetched: refused (tried 6 times "
        "over 4 min 12 s; the night's window closes before another try)."
    )
    assert tried_reason(reason, tries=3, seconds=47, window_closed=False).endswith(
        "(tried 3 times over 47 s; no other host is left to try)."
    )


def test_durations_read_as_a_person_would_say_them():
    assert [duration(s) for s in (0, 59.6, 61, 3599, 7500)] == [
        "0 s",
        "1 min 00 s",
        "1 min 01 s",
        "59 min 59 s",
        "2 h 05 min",
    ]
