"""What a hostile agent tries beyond the basics: directory trees too deep to walk."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from replayhub import services
from replayhub.demo import GOOD
from replayhub.gitops import Scratch, remove_tree
from replayhub.models import Replay
from replayhub.sandbox import Limits, SandboxSpec
from replayhub.sandbox.bwrap import BwrapRunner
from tests.engine.gitrepos import Repo, make_repo
from tests.engine.scripted import (
    make_project,
    make_project_repo,
    make_run,
    original_commit,
)

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None
    and os.environ.get("REPLAYHUB_REQUIRE_SANDBOX") != "1",
    reason="bubblewrap is not installed (REPLAYHUB_REQUIRE_SANDBOX=1 fails instead)",
)

IS_ROOT = os.geteuid() == 0
NOBODY = 65534


def python(source: str) -> tuple[str, ...]:
    return ("python3", "-c", textwrap.dedent(source))


def reachable_dir(prefix: str) -> Path:
    # As root the sandbox runs as nobody, who must reach the paths bwrap binds.
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)
    return path


# --- deep trees --------------------------------------------------------------

DEPTH = 2000
# 2,000 levels of this name make a path about ten times PATH_MAX: nothing can
# reach the bottom by path, only one directory at a time.
LEVEL = "nested-directory"

WRITE_DEEP_TREE = f"""
    import os
    os.mkdir("deep")
    os.chdir("deep")
    for level in range({DEPTH}):
        if level % 500 == 0:
            os.symlink("/etc", "link-out")
            open("file.txt", "w").close()
        os.mkdir("{LEVEL}")
        os.chdir("{LEVEL}")
    open("bottom.txt", "w").close()
    os.mkdir("locked")
    os.mkdir("read-only")
    open("read-only/kept.txt", "w").close()
    os.chmod("read-only/kept.txt", 0o400)
    os.chmod("read-only", 0o500)
    os.chmod("locked", 0)
    print("wrote", {DEPTH}, "levels")
"""

WRITE_AT_THE_BOTTOM = f"""
    import os
    os.chdir("deep")
    for _ in range({DEPTH}):
        os.chdir("{LEVEL}")
    with open("again.txt", "w") as file:
        file.write("again")
    print("wrote at the bottom")
"""


def open_bottom(top: Path) -> int:
    """A descriptor of the deepest directory, reached one level at a time."""
    fd = os.open(top / "deep", os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(DEPTH):
        child = os.open(LEVEL, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    return fd


@pytest.fixture
def project_repo(tmp_path: Path) -> Repo:
    return make_repo(tmp_path, {"README.md": "hello\n"})


@pytest.fixture
def work_dir() -> Iterator[Path]:
    path = reachable_dir("replayhub-hardening-work-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_tree_two_thousand_levels_deep_is_handed_over_again_and_removed(
    runner: BwrapRunner, project_repo: Repo, work_dir: Path
) -> None:
    scratch = Scratch(work_dir / "replay-1", project_repo.path)
    workspace = scratch.provision(project_repo.head())
    limits = Limits(wall_seconds=60)

    wrote = runner.run(
        SandboxSpec(argv=python(WRITE_DEEP_TREE), workspace=workspace, limits=limits)
    )
    assert wrote.exit_code == 0, wrote.output
    if IS_ROOT:
        # Hand the bottom back to root: only a chown walk that reaches it makes
        # it writable for the sandbox's next run.
        bottom = open_bottom(workspace)
        try:
            os.fchown(bottom, 0, 0)
            os.fchmod(bottom, 0o755)
        finally:
            os.close(bottom)

    again = runner.run(
        SandboxSpec(
            argv=python(WRITE_AT_THE_BOTTOM), workspace=workspace, limits=limits
        )
    )
    assert again.exit_code == 0, again.output
    assert again.output == "wrote at the bottom\n"

    scratch.remove()

    assert list(work_dir.iterdir()) == []
    assert Path("/etc/hostname").exists()


def make_deep_locked_tree(top: Path, outside: Path) -> None:
    """A deep tree with links out of it and directories their owner locked."""
    top.mkdir()
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(DEPTH):
            if level % 500 == 0:
                os.symlink(outside, "link-out", dir_fd=fd)
            os.mkdir(LEVEL, dir_fd=fd)
            child = os.open(LEVEL, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            if level % 700 == 0:
                os.fchmod(fd, 0o500)
            os.close(fd)
            fd = child
        os.mkdir("locked", dir_fd=fd)
        os.chmod("locked", 0, dir_fd=fd)
    finally:
        os.close(fd)


def chown_deep_tree(top: Path, uid: int) -> None:
    """lchown everything below ``top``, one directory at a time."""
    pending = [os.open(top, os.O_RDONLY | os.O_DIRECTORY)]
    while pending:
        fd = pending.pop()
        os.fchown(fd, uid, uid)
        for entry in os.scandir(fd):
            os.chown(entry.name, uid, uid, dir_fd=fd, follow_symlinks=False)
            if entry.is_dir(follow_symlinks=False) and entry.name == LEVEL:
                # Held open one level at a time: the walk is a single chain.
                pending.append(os.open(LEVEL, os.O_RDONLY, dir_fd=fd))
        os.close(fd)


def test_removing_a_deep_tree_never_follows_its_links_out(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep\n")
    top = tmp_path / "deep"
    make_deep_locked_tree(top, outside)

    remove_tree(top)

    assert not top.exists()
    assert (outside / "keep.txt").read_text() == "keep\n"
    assert stat.S_IMODE(outside.stat().st_mode) == 0o755


@pytest.mark.skipif(not IS_ROOT, reason="drops root to test what root ignores")
def test_an_unprivileged_owner_removes_a_deep_tree_it_locked() -> None:
    parent = Path(tempfile.mkdtemp(prefix="replayhub-remove-deep-"))
    try:
        os.chown(parent, NOBODY, NOBODY)
        top = parent / "deep"
        make_deep_locked_tree(top, Path("/etc"))
        chown_deep_tree(top, NOBODY)

        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through its exit code
            try:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                remove_tree(top)
            except BaseException:
                os._exit(1)
            os._exit(0)
        _, status = os.waitpid(pid, 0)

        assert os.waitstatus_to_exitcode(status) == 0
        assert not top.exists()
    finally:
        remove_tree(parent)


@pytest.mark.django_db
def test_a_replay_whose_agent_writes_a_deep_tree_leaves_nothing_behind(
    tmp_path: Path,
) -> None:
    repo = make_project_repo(tmp_path)
    project = make_project(
        repo, agent_command=["python3", "-c", textwrap.dedent(WRITE_DEEP_TREE)]
    )
    base = repo.rev("main")
    good = original_commit(repo, GOOD, branch="agent/good")
    run = make_run(project, prompt="deep", original=good, base=base)
    replay = services.replay_create(run=run, trigger="command")
    work = Path(settings.REPLAYHUB_WORK_DIR)
    before = set(work.iterdir()) if work.exists() else set()

    services.replay_execute(replay_id=replay.pk)

    replay = Replay.objects.get(pk=replay.pk)
    assert f"wrote {DEPTH} levels" in replay.agent_output
    assert replay.verdict
    assert not (work / f"replay-{replay.pk}").exists()
    assert set(work.iterdir()) <= before
