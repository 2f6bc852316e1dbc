"""What a hostile agent tries beyond the basics: deep trees, other socket families,
control of other processes, and learning where the sandbox lives on the host."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from replayhub import services
from replayhub.demo.calculator import GOOD
from replayhub.git.scratch import Scratch, git, remove_tree
from replayhub.models import Replay
from replayhub.sandbox import Limits, SandboxSpec
from replayhub.sandbox.bwrap import LAUNCH_PATH, BwrapRunner
from tests.conftest import processes_mentioning
from tests.factories import make_calc_project, make_calc_run
from tests.gitrepos import Repo, make_repo
from tests.sandbox.conftest import RunInSandbox
from tests.scripted import make_project_repo, original_commit

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
    # What a failed test left is as deep as what it wrote: rmtree would give up.
    remove_tree(path)


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
    project = make_calc_project(
        repo, agent_command=["python3", "-c", textwrap.dedent(WRITE_DEEP_TREE)]
    )
    base = repo.rev("main")
    good = original_commit(repo, GOOD, branch="agent/good")
    run = make_calc_run(project, prompt="deep", original=good, base=base)
    replay = services.replay_create(run=run, trigger="command")
    work = Path(settings.REPLAYHUB_WORK_DIR)
    before = set(work.iterdir()) if work.exists() else set()

    services.replay_execute(replay_id=replay.pk)

    replay = Replay.objects.get(pk=replay.pk)
    assert f"wrote {DEPTH} levels" in replay.agent_output
    assert replay.verdict
    # Past PATH_MAX and outside the allowed paths: the agent's doing.
    assert replay.reason_code == "disallowed_paths"
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


# --- host paths ----------------------------------------------------------------


def test_no_process_of_the_launch_chain_carries_the_worker_environment(
    runner: BwrapRunner, workspace: Path
) -> None:
    marker = f"replayhub-chain-{uuid.uuid4().hex}"
    spec = SandboxSpec(
        argv=("python3", "-c", f"import time; time.sleep(3)  # {marker}"),
        workspace=workspace,
        limits=Limits(wall_seconds=30),
    )
    thread = threading.Thread(target=runner.run, args=(spec,))
    thread.start()
    try:
        deadline = time.monotonic() + 10
        seen: dict[int, tuple[bytes, bytes]] = {}
        while time.monotonic() < deadline:
            for pid in processes_mentioning(marker):
                try:
                    comm = Path(f"/proc/{pid}/comm").read_bytes().strip()
                    environ = Path(f"/proc/{pid}/environ").read_bytes()
                except OSError:
                    continue
                seen[pid] = (comm, environ)
            if {b"python3", b"bwrap"} <= {comm for comm, _ in seen.values()}:
                break
            time.sleep(0.05)
    finally:
        thread.join()

    launcher = {pid: env for pid, (comm, env) in seen.items() if comm != b"python3"}
    inside = [env for comm, env in seen.values() if comm == b"python3"]
    assert launcher, seen
    assert set(launcher.values()) == {f"PATH={LAUNCH_PATH}\0".encode()}
    assert len(inside) == 1
    assert b"PWD=/workspace\0" in inside[0]
    assert os.getcwd().encode() not in inside[0]


# Runs as the agent. The host paths to look for arrive hex-encoded in argv, so
# its own command line does not contain them. Prints one line per place a host
# path was found: where, and for a mountinfo line its mount point and root.
FIND_HOST_PATHS = r"""
import os, sys

needles = [bytes.fromhex(arg) for arg in sys.argv[1:]]
found = set()


def check(where, data):
    for needle in needles:
        if needle in data:
            found.add(where)


def read(path, limit=16 * 1024 * 1024):
    try:
        with open(path, "rb") as file:
            return file.read(limit)
    except OSError:
        return b""


for top in ("/etc", "/tmp", "/home", "/dev/shm", "/workspace", "/replayhub", "/"):
    for root, dirs, files in os.walk(top):
        if root == "/":
            dirs[:] = []
        for name in dirs + files:
            path = os.path.join(root, name)
            if os.path.islink(path):
                check(path, os.readlink(path).encode())
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                check(path, read(path))

PER_PROCESS = ("environ", "cmdline", "mounts", "mountstats", "maps", "status",
               "cgroup", "stat", "comm", "sched", "limits", "io", "wchan")
for pid in [p for p in os.listdir("/proc") if p.isdigit()] + ["self"]:
    base = f"/proc/{pid}"
    for name in PER_PROCESS:
        check(f"/proc/<pid>/{name}", read(f"{base}/{name}"))
    for name in ("cwd", "root", "exe"):
        try:
            check(f"/proc/<pid>/{name}", os.readlink(f"{base}/{name}").encode())
        except OSError:
            pass
    for fd in os.listdir(f"{base}/fd") if os.access(f"{base}/fd", os.R_OK) else []:
        try:
            check("/proc/<pid>/fd", os.readlink(f"{base}/fd/{fd}").encode())
        except OSError:
            pass
    for line in read(f"{base}/mountinfo").splitlines():
        fields = line.split()
        for needle in needles:
            if needle in line:
                found.add(("mountinfo", fields[4].decode(), fields[3].decode()))
for name in os.listdir("/proc"):
    if not name.isdigit() and name not in ("self", "thread-self", "kcore", "kmsg"):
        if os.path.isfile(f"/proc/{name}"):
            check(f"/proc/{name}", read(f"/proc/{name}", 1024 * 1024))

for item in sorted(found, key=str):
    print("FOUND", item)
print("searched", len(needles), "paths")
"""


@pytest.mark.django_db
def test_an_agent_finds_no_host_path_but_the_sources_of_its_binds(
    tmp_path: Path,
) -> None:
    repo = make_project_repo(tmp_path)
    work = Path(settings.REPLAYHUB_WORK_DIR)
    host_paths = [work, Path(settings.VAR_DIR), Path.cwd(), repo.path]
    project = make_calc_project(
        repo,
        agent_command=[
            "python3",
            "-c",
            FIND_HOST_PATHS,
            *(os.fsencode(path).hex() for path in host_paths),
        ],
    )
    base = repo.rev("main")
    good = original_commit(repo, GOOD, branch="agent/good")
    run = make_calc_run(project, prompt="find", original=good, base=base)
    replay = services.replay_create(run=run, trigger="command")

    services.replay_execute(replay_id=replay.pk)

    output = Replay.objects.get(pk=replay.pk).agent_output
    assert output.endswith(f"searched {len(host_paths)} paths\n"), output
    scratch = work / f"replay-{replay.pk}"
    # What unprivileged bubblewrap cannot hide: a bind mount's root in
    # mountinfo is the bound directory's path inside its filesystem.
    assert output.splitlines()[:-1] == [
        f"FOUND ('mountinfo', '/replayhub', '{scratch / 'io'}')",
        f"FOUND ('mountinfo', '/workspace', '{scratch / 'workspace'}')",
    ]


def test_the_workspace_git_has_no_reflog_naming_where_it_was_cloned_from(
    project_repo: Repo, work_dir: Path
) -> None:
    scratch = Scratch(work_dir / "replay-1", project_repo.path)
    workspace = scratch.provision(project_repo.head())

    git_dir = workspace / ".git"
    assert not (git_dir / "logs").exists()
    for path in git_dir.rglob("*"):
        if path.is_file():
            assert os.fsencode(work_dir) not in path.read_bytes(), path
    # The agent's own ref updates are logged as in any clone.
    logged = git("config", "core.logAllRefUpdates", git_dir=git_dir)
    assert logged.stdout == b"true\n"
