"""What a hostile agent tries beyond the basics: deep trees, other socket families,
control of other processes."""

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

from .conftest import RunInSandbox

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


# --- socket families, other processes, the execution domain -----------------


def test_socket_families_a_build_does_not_need_are_refused(
    run_in_sandbox: RunInSandbox,
) -> None:
    outcome = run_in_sandbox(
        *python("""
            import ctypes, errno, socket
            libc = ctypes.CDLL(None, use_errno=True)

            def attempt(family, kind, protocol=0):
                try:
                    socket.socket(family, kind, protocol).close()
                except OSError as error:
                    return errno.errorcode[error.errno]
                return "created"

            def pair(family):
                try:
                    for end in socket.socketpair(family, socket.SOCK_STREAM):
                        end.close()
                except OSError as error:
                    return errno.errorcode[error.errno]
                return "created"

            print("vsock", attempt(40, socket.SOCK_STREAM))
            print("packet", attempt(17, socket.SOCK_RAW, 0x0300))
            print("bluetooth", attempt(31, socket.SOCK_STREAM, 3))
            print("alg", attempt(38, socket.SOCK_SEQPACKET))
            print("key", attempt(15, socket.SOCK_RAW, 2))
            print("xdp", attempt(44, socket.SOCK_RAW))
            print("unspec", attempt(0, socket.SOCK_STREAM))
            print("netlink uevent", attempt(16, socket.SOCK_RAW, 15))
            print("netlink audit", attempt(16, socket.SOCK_RAW, 9))
            print("netlink sock_diag", attempt(16, socket.SOCK_RAW, 4))
            print("vsock pair", pair(40))
            # The kernel reads the family as a 32-bit int: bits above it must not
            # smuggle AF_VSOCK past a check on the whole register.
            ctypes.set_errno(0)
            fd = libc.syscall(41, ctypes.c_uint64((1 << 32) | 40), 1, 0)
            print("vsock high bits", errno.errorcode.get(ctypes.get_errno(), fd))
        """)
    )
    assert outcome.exit_code == 0, outcome.output
    refused = "EAFNOSUPPORT"
    assert outcome.output.splitlines() == [
        f"vsock {refused}",
        f"packet {refused}",
        f"bluetooth {refused}",
        f"alg {refused}",
        f"key {refused}",
        f"xdp {refused}",
        f"unspec {refused}",
        f"netlink uevent {refused}",
        f"netlink audit {refused}",
        f"netlink sock_diag {refused}",
        f"vsock pair {refused}",
        f"vsock high bits {refused}",
    ]


def test_the_socket_families_a_build_needs_still_work(
    run_in_sandbox: RunInSandbox,
) -> None:
    outcome = run_in_sandbox(
        *python("""
            import socket
            with socket.create_server(("127.0.0.1", 0)) as server:
                with socket.create_connection(server.getsockname()) as client:
                    peer, _ = server.accept()
                    client.sendall(b"over inet")
                    print(peer.recv(64).decode())
                    peer.close()
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()
            socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close()
            print("inet6 created")
            left, right = socket.socketpair()
            left.sendall(b"over a unix pair")
            print(right.recv(64).decode())
            socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).close()
            # NETLINK_ROUTE: how programs list interfaces (getifaddrs).
            socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()
            print([name for _, name in socket.if_nameindex()])
        """)
    )
    assert outcome.exit_code == 0, outcome.output
    assert outcome.output.splitlines() == [
        "over inet",
        "inet6 created",
        "over a unix pair",
        "['lo']",
    ]


def test_no_process_can_be_traced_or_have_its_memory_read(
    run_in_sandbox: RunInSandbox,
) -> None:
    outcome = run_in_sandbox(
        *python("""
            import ctypes, errno, os, signal, time
            libc = ctypes.CDLL(None, use_errno=True)
            libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long,
                                    ctypes.c_void_p, ctypes.c_void_p]

            class Iovec(ctypes.Structure):
                _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

            def result(value):
                if value != -1:
                    return "allowed"
                return errno.errorcode[ctypes.get_errno()]

            def ptrace(request, pid):
                ctypes.set_errno(0)
                return result(libc.ptrace(request, pid, None, None))

            secret = ctypes.create_string_buffer(b"the child's memory")
            child = os.fork()
            if child == 0:
                time.sleep(30)
                os._exit(0)
            print("attach child", ptrace(16, child))
            print("seize child", ptrace(0x4206, child))
            print("attach init", ptrace(16, 1))
            into = ctypes.create_string_buffer(32)
            local = Iovec(ctypes.cast(into, ctypes.c_void_p), 18)
            remote = Iovec(ctypes.cast(secret, ctypes.c_void_p), 18)
            ctypes.set_errno(0)
            read = libc.process_vm_readv(child, ctypes.byref(local), 1,
                                         ctypes.byref(remote), 1, 0)
            print("process_vm_readv", result(read))
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            # Last: once traced, any signal would stop this process for good.
            print("traceme", ptrace(0, 0), flush=True)
            os._exit(0)
        """)
    )
    assert outcome.exit_code == 0, outcome.output
    assert outcome.output.splitlines() == [
        "attach child EPERM",
        "seize child EPERM",
        "attach init EPERM",
        "process_vm_readv EPERM",
        "traceme EPERM",
    ]


def test_the_execution_domain_and_the_ldt_cannot_be_changed(
    run_in_sandbox: RunInSandbox,
) -> None:
    outcome = run_in_sandbox(
        *python("""
            import ctypes, errno
            libc = ctypes.CDLL(None, use_errno=True)

            def call(*args):
                ctypes.set_errno(0)
                value = libc.syscall(*args)
                return value if value != -1 else errno.errorcode[ctypes.get_errno()]

            QUERY = ctypes.c_ulong(0xFFFFFFFF)
            print("query", call(135, QUERY))
            print("no randomisation", call(135, ctypes.c_ulong(0x0040000)))
            print("linux32", call(135, ctypes.c_ulong(0x0008)))
            print("query again", call(135, QUERY))
            table = ctypes.create_string_buffer(16)
            print("modify_ldt read", call(154, 0, table, 16))
            print("modify_ldt write", call(154, 1, table, 16))
        """)
    )
    assert outcome.exit_code == 0, outcome.output
    assert outcome.output.splitlines() == [
        "query 0",
        "no randomisation EPERM",
        "linux32 EPERM",
        "query again 0",
        "modify_ldt read EPERM",
        "modify_ldt write EPERM",
    ]


def test_shells_git_and_test_runners_still_work_under_the_filter(
    run_in_sandbox: RunInSandbox, workspace: Path
) -> None:
    (workspace / "test_sample.py").write_text(
        textwrap.dedent("""
            import multiprocessing
            import subprocess
            import unittest


            def square(n):
                return n * n


            class SampleTests(unittest.TestCase):
                def test_a_subprocess_runs(self):
                    out = subprocess.run(["sh", "-c", "echo $((6 * 7))"],
                                         capture_output=True, text=True)
                    self.assertEqual(out.stdout, "42\\n")

                def test_a_process_pool_runs(self):
                    with multiprocessing.Pool(2) as pool:
                        self.assertEqual(pool.map(square, [1, 2, 3]), [1, 4, 9])
        """)
    )
    outcome = run_in_sandbox(
        "sh",
        "-c",
        "set -e\n"
        "git init --quiet repo && cd repo\n"
        "echo hello > hello.txt && git add hello.txt\n"
        "git -c user.name=a -c user.email=a@b commit --quiet -m first\n"
        "git log --format=%s\n"
        "cd .. && python3 -m unittest --quiet test_sample 2>&1 | tail -n 1\n",
    )
    assert outcome.exit_code == 0, outcome.output
    assert outcome.output.splitlines() == ["first", "OK"]
