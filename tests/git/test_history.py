"""Read-only history queries on a project repository, through GitPython."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from replayhub.git.history import History
from replayhub.git.scratch import GitError, git
from tests.gitrepos import Repo, make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return make_repo(tmp_path, {"app.py": "v = 0\n"})


def git_wrapper(tmp_path: Path, monkeypatch, *, hang: str = "") -> Path:
    """Put a ``git`` first on PATH that logs each call's pid and arguments.

    With ``hang``, a call of that git command sleeps instead of answering.
    Returns the log file.
    """
    real = shutil.which("git")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "git-calls.log"
    wrapper = bin_dir / "git"
    wrapper.write_text(
        f'#!/bin/sh\necho "$$ $*" >> {shlex.quote(str(log))}\n'
        + (f'case " $* " in *" {hang} "*) exec sleep 60;; esac\n' if hang else "")
        + f'exec {shlex.quote(real)} "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


@pytest.fixture
def git_calls(repo, tmp_path, monkeypatch):
    """From here on, every git process started by name logs its pid and arguments."""
    log = git_wrapper(tmp_path, monkeypatch)
    return lambda: log.read_text().splitlines() if log.exists() else []


def feature_branch(repo: Repo) -> tuple[str, str, str]:
    """main: base -- later; agent: base -- one -- two. Returns (base, two, later)."""
    base = repo.head()
    repo.commit({"app.py": "v = 1\n"}, "one", branch="agent")
    two = repo.commit({"app.py": "v = 2\n"}, "two")
    repo.checkout("main")
    later = repo.commit({"main.txt": "later\n"}, "later")
    return base, two, later


# --- what it answers ---------------------------------------------------------------


def test_history_answers_the_questions_provenance_asks(repo):
    base, two, later = feature_branch(repo)
    one = repo.rev("agent^")

    with History(repo.path) as history:
        assert history.head_branch() == "main"
        assert history.branch_tip("main") == later
        assert history.branch_tip("agent") == two
        assert history.commit(two[:10]) == two
        assert history.commit(f"{two}^1") == one
        assert history.commit(f"{base}^1") is None
        assert history.merge_base(later, two) == base
        assert history.is_ancestor(base, two)
        assert history.is_ancestor(two, two)
        assert not history.is_ancestor(later, two)
        assert history.ancestry_path(base, two) == {two: [one], one: [base]}


def test_unrelated_histories_have_no_merge_base(repo):
    main = repo.head()
    repo.git("checkout", "--quiet", "--orphan", "elsewhere")
    other = repo.commit({"other.txt": "x\n"}, "unrelated root")

    with History(repo.path) as history:
        assert history.merge_base(main, other) is None
        assert not history.is_ancestor(main, other)


def test_a_detached_head_is_on_no_branch(repo):
    repo.git("checkout", "--quiet", "--detach", "main")

    with History(repo.path) as history:
        assert history.head_branch() is None


def test_a_bare_repository_and_its_work_tree_path_both_open(repo, tmp_path):
    bare = tmp_path / "bare.git"
    git("clone", "--quiet", "--bare", str(repo.path), str(bare))

    with History(bare) as history, History(repo.path) as work_tree:
        assert history.head_branch() == work_tree.head_branch() == "main"
        assert history.branch_tip("main") == work_tree.branch_tip("main")


@pytest.mark.parametrize("where", ["missing", "plain"])
def test_a_path_that_is_not_a_repository_is_a_git_error(tmp_path, where):
    path = tmp_path / where
    if where == "plain":
        path.mkdir()

    with pytest.raises(GitError, match="is not a git repository"):
        History(path)


# --- security rules ----------------------------------------------------------------


@pytest.mark.parametrize(
    "rev",
    ["--output={target}", "-", "-n1", "main\nrefs/heads/main", "main\0", "main HEAD"],
)
def test_a_rev_starting_with_a_dash_or_holding_whitespace_starts_no_git(
    repo, git_calls, tmp_path, rev
):
    target = tmp_path / "written-by-git"
    rev = rev.format(target=target)

    with History(repo.path) as history:
        assert history.resolve(rev) is None
        assert history.commit(rev) is None

    assert git_calls() == []
    assert not target.exists()


@pytest.mark.parametrize("value", ["--output={target}", "main", "HEAD", "abc1234"])
def test_only_full_shas_reach_a_git_command_line(repo, git_calls, tmp_path, value):
    target = tmp_path / "written-by-git"
    value = value.format(target=target)
    head = repo.head()
    earlier = len(git_calls())

    with History(repo.path) as history:
        for query in (history.merge_base, history.is_ancestor, history.ancestry_path):
            with pytest.raises(ValueError, match="not a full hex commit sha"):
                query(value, head)
            with pytest.raises(ValueError, match="not a full hex commit sha"):
                query(head, value)

    assert git_calls()[earlier:] == []
    assert not target.exists()


def test_a_branch_named_like_a_short_sha_does_not_stand_in_for_the_commit(repo):
    base = repo.head()
    original = repo.commit({"app.py": "v = 1\n"}, "one", branch="agent")
    repo.checkout("main")
    # git looks a short hex name up as a ref before as an object.
    repo.git("branch", original[:7], base)
    repo.git("branch", "abcdef1", base)

    with History(repo.path) as history:
        assert history.resolve(original[:7]) == base
        assert history.commit(original[:7]) is None
        assert history.commit(original[:12]) == original
        assert history.commit("abcdef1") is None


def test_git_configuration_from_the_workers_environment_is_never_read(
    repo, tmp_path, monkeypatch
):
    base, two, later = feature_branch(repo)
    marker = tmp_path / "host-marker"
    script = tmp_path / "evil.sh"
    script.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\n')
    script.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    evil_config = home / ".gitconfig"
    # Planted commands, then a line git refuses: reading this file at all is fatal.
    evil_config.write_text(
        f"[core]\n\tfsmonitor = {script}\n\thooksPath = {tmp_path}\n"
        f"[alias]\n\tlg = !{script}\n[core\n"
    )
    elsewhere = make_repo(tmp_path, name="elsewhere")
    hostile_env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home),
        "GIT_CONFIG_GLOBAL": str(evil_config),
        "GIT_CONFIG_SYSTEM": str(evil_config),
        "GIT_CONFIG_COUNT": "2",
        "GIT_CONFIG_KEY_0": "core.fsmonitor",
        "GIT_CONFIG_VALUE_0": str(script),
        "GIT_CONFIG_PARAMETERS": "not a parameter list",
        "GIT_DIR": str(elsewhere.git_dir),
        "GIT_OBJECT_DIRECTORY": str(elsewhere.git_dir / "objects"),
    }
    for key, value in hostile_env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("GIT_CONFIG_NOSYSTEM", raising=False)

    with History(repo.path) as history:
        assert history.head_branch() == "main"
        assert history.branch_tip("main") == later
        assert history.commit(two[:10]) == two
        assert history.merge_base(later, two) == base
        assert history.is_ancestor(base, later)
        assert history.ancestry_path(base, later) == {later: [base]}

    assert not marker.exists()
    plain = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo.path, capture_output=True, check=False
    )
    assert plain.returncode != 0


# --- the processes -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "query"),
    [
        ("cat-file", lambda history, head: history.resolve("main")),
        ("merge-base", lambda history, head: history.merge_base(head, head)),
    ],
)
def test_git_that_does_not_answer_in_time_is_stopped_with_a_git_error(
    repo, tmp_path, monkeypatch, command, query
):
    head = repo.head()
    git_wrapper(tmp_path, monkeypatch, hang=command)
    started = time.monotonic()

    with (
        History(repo.path, timeout=0.5) as history,
        pytest.raises(GitError, match=f"git {command} timed out"),
    ):
        query(history, head)

    assert time.monotonic() - started < 30


def test_closing_a_history_stops_its_git_processes(repo, git_calls):
    base, two, later = feature_branch(repo)
    earlier = len(git_calls())

    history = History(repo.path)
    assert history.commit(two) == two
    assert history.merge_base(later, two) == base
    history.close()
    history.close()

    calls = git_calls()[earlier:]
    assert any("cat-file --batch-check" in call for call in calls)
    for pid in (int(call.split()[0]) for call in calls):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_thousands_of_lookups_that_make_git_complain_never_block(repo):
    # Each lookup of a broken ref makes cat-file warn on its stderr, a pipe
    # GitPython never reads; unread, it fills and cat-file stops answering.
    (repo.git_dir / "refs/heads/broken").write_text("not a sha\n")
    answers: list[str | None] = []

    def lookups() -> None:
        with History(repo.path) as history:
            answers.extend(history.resolve("broken") for _ in range(3000))
            answers.append(history.resolve("main"))

    worker = threading.Thread(target=lookups, daemon=True)
    worker.start()
    worker.join(timeout=60)

    assert not worker.is_alive()
    assert answers == [None] * 3000 + [repo.head()]
