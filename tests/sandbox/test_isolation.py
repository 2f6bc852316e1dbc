"""What a sandboxed command can see and touch: adversarial probes, real bubblewrap."""

from __future__ import annotations

import os
import select
import shutil
import socket
import textwrap
from pathlib import Path

import pytest

from replayhub.sandbox import Bind
from tests.sandbox.conftest import RunInSandbox

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None
    and os.environ.get("REPLAYHUB_REQUIRE_SANDBOX") != "1",
    reason="bubblewrap is not installed (REPLAYHUB_REQUIRE_SANDBOX=1 fails instead)",
)

IS_ROOT = os.geteuid() == 0


def python(source: str) -> tuple[str, ...]:
    return ("python3", "-c", textwrap.dedent(source))


def test_echo_output_comes_back(run_in_sandbox: RunInSandbox) -> None:
    outcome = run_in_sandbox("echo", "hello sandbox")
    assert outcome.exit_code == 0
    assert outcome.output == "hello sandbox\n"
    assert not outcome.output_truncated
    assert not outcome.timed_out
    assert outcome.limit_fired == ""
    assert outcome.duration_s < 10


def test_the_exit_code_of_the_command_propagates(run_in_sandbox: RunInSandbox) -> None:
    assert run_in_sandbox("sh", "-c", "exit 7").exit_code == 7
    assert run_in_sandbox("false").exit_code == 1


def test_stdout_and_stderr_are_interleaved_in_one_output(
    run_in_sandbox: RunInSandbox,
) -> None:
    outcome = run_in_sandbox("sh", "-c", "echo out; echo err >&2; echo out2")
    assert outcome.output == "out\nerr\nout2\n"


def test_argv_is_passed_as_is_and_never_through_a_shell(
    run_in_sandbox: RunInSandbox, workspace: Path
) -> None:
    outcome = run_in_sandbox("echo", "$(touch /workspace/pwned)", ";", "`id`", "*")
    assert outcome.output == "$(touch /workspace/pwned) ; `id` *\n"
    assert not (workspace / "pwned").exists()


def test_the_command_runs_unprivileged_in_the_workspace_without_capabilities(
    run_in_sandbox: RunInSandbox,
) -> None:
    outcome = run_in_sandbox(
        "sh",
        "-c",
        "id -u; id -g; pwd; hostname; grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status",
    )
    lines = outcome.output.split("\n")
    assert lines[:4] == ["1000", "1000", "/workspace", "sandbox"]
    assert "CapPrm:\t0000000000000000" in lines
    assert "CapEff:\t0000000000000000" in lines
    assert "CapBnd:\t0000000000000000" in lines


def test_spec_environment_is_visible_and_the_worker_environment_is_not(
    run_in_sandbox: RunInSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "worker-secret-6f1d2c"
    monkeypatch.setenv("REPLAYHUB_TEST_SECRET", secret)
    monkeypatch.setenv("DATABASE_URL", f"postgres://replayhub:{secret}@db/replayhub")
    outcome = run_in_sandbox(
        *python("""
            import os, pathlib
            print("ENV", sorted(os.environ.items()))
            for proc in pathlib.Path("/proc").iterdir():
                if proc.name.isdigit():
                    for name in ("environ", "cmdline"):
                        try:
                            data = (proc / name).read_bytes()
                        except OSError as error:
                            print(proc.name, name, "unreadable", error)
                        else:
                            print(proc.name, name, data)
        """),
        env={"REPLAYHUB_TASK_ID": "task-42"},
    )
    assert outcome.exit_code == 0, outcome.output
    assert "('REPLAYHUB_TASK_ID', 'task-42')" in outcome.output
    assert "('HOME', '/home/sandbox')" in outcome.output
    # pid 1 is bwrap's monitor: its environment was read, and it holds PATH only.
    assert "1 environ b'PATH=" in outcome.output
    assert secret not in outcome.output
    assert "REPLAYHUB_TEST_SECRET" not in outcome.output
    assert "DATABASE_URL" not in outcome.output


def test_a_connection_to_a_server_on_host_loopback_never_arrives(
    run_in_sandbox: RunInSandbox,
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        outcome = run_in_sandbox(
            *python(f"""
                import socket
                try:
                    socket.create_connection(("127.0.0.1", {port}), timeout=3)
                except OSError as error:
                    print("connect failed:", error)
                    raise SystemExit(1)
                print("connected")
            """)
        )
        pending, _, _ = select.select([server], [], [], 0.5)
    assert pending == []
    assert outcome.exit_code == 1
    assert "connect failed" in outcome.output
    assert "connected" not in outcome.output.replace("connect failed", "")


def test_only_a_loopback_interface_exists_inside(run_in_sandbox: RunInSandbox) -> None:
    outcome = run_in_sandbox("cat", "/proc/net/dev")
    interfaces = [
        line.split(":")[0].strip() for line in outcome.output.splitlines()[2:]
    ]
    assert interfaces == ["lo"]


def test_host_files_outside_the_workspace_cannot_be_read(
    run_in_sandbox: RunInSandbox, shared_dir: Path
) -> None:
    secret = "host-secret-9a8b7c"
    host_file = shared_dir / "secret.txt"
    host_file.write_text(secret)
    host_file.chmod(0o644)
    outcome = run_in_sandbox(
        *python(f"""
            import os
            for path in ({str(host_file)!r}, "/etc/shadow", "/root/.bashrc"):
                try:
                    print(path, "READ", open(path).read())
                except OSError as error:
                    print(path, "refused", type(error).__name__)
            try:
                print("/root", "LISTED", os.listdir("/root"))
            except OSError as error:
                print("/root", "refused", type(error).__name__)
        """)
    )
    assert secret not in outcome.output
    assert "READ" not in outcome.output
    assert "LISTED" not in outcome.output
    assert outcome.output.count("refused") == 4


@pytest.mark.skipif(not IS_ROOT, reason="host-root mapping only matters as root")
def test_a_root_only_file_bound_read_only_stays_unreadable(
    run_in_sandbox: RunInSandbox, shared_dir: Path
) -> None:
    # Were the sandbox mapped to host root, a read-only bind would still let it
    # read this; as the unprivileged uid it cannot.
    secret = "root-only-secret-5e4d3c"
    host_file = shared_dir / "root-only.txt"
    host_file.write_text(secret)
    host_file.chmod(0o600)
    outcome = run_in_sandbox("cat", "/secret", binds=(Bind(host_file, "/secret"),))
    assert outcome.exit_code != 0
    assert "Permission denied" in outcome.output
    assert secret not in outcome.output


def test_writes_outside_the_workspace_fail_and_leave_nothing_on_the_host(
    run_in_sandbox: RunInSandbox, shared_dir: Path, marker: str
) -> None:
    targets = [
        f"/usr/{marker}",
        f"/etc/{marker}",
        f"/{marker}",
        str(shared_dir / marker),
    ]
    outcome = run_in_sandbox(
        *python(f"""
            for path in {targets!r}:
                try:
                    with open(path, "w") as handle:
                        handle.write("x")
                    print(path, "WRITTEN")
                except OSError as error:
                    print(path, "refused", type(error).__name__)
        """)
    )
    assert "WRITTEN" not in outcome.output
    assert outcome.output.count("refused") == len(targets)
    for target in targets:
        assert not Path(target).exists()


def test_read_only_binds_cannot_be_written(
    run_in_sandbox: RunInSandbox, shared_dir: Path
) -> None:
    data = shared_dir / "data"
    data.mkdir()
    (data / "file.txt").write_text("original")
    outcome = run_in_sandbox(
        "sh",
        "-c",
        "cat /data/file.txt; echo changed > /data/file.txt || echo refused",
        binds=(Bind(data, "/data"),),
    )
    assert outcome.output.startswith("original")
    assert "refused" in outcome.output
    assert (data / "file.txt").read_text() == "original"


def test_writes_in_the_workspace_persist_on_the_host(
    run_in_sandbox: RunInSandbox, workspace: Path
) -> None:
    (workspace / "existing.txt").write_text("from the checkout\n")
    outcome = run_in_sandbox(
        "sh", "-c", "cat existing.txt; echo from the agent > /workspace/new.txt"
    )
    assert outcome.output == "from the checkout\n"
    assert (workspace / "new.txt").read_text() == "from the agent\n"
    if IS_ROOT:
        assert (workspace / "new.txt").stat().st_uid == 65534


def test_writable_binds_persist_on_the_host(
    run_in_sandbox: RunInSandbox, shared_dir: Path
) -> None:
    io_dir = shared_dir / "io"
    io_dir.mkdir()
    outcome = run_in_sandbox(
        "sh",
        "-c",
        "echo '{}' > /replayhub-io/usage.json",
        binds=(Bind(io_dir, "/replayhub-io", writable=True),),
    )
    assert outcome.exit_code == 0, outcome.output
    assert (io_dir / "usage.json").read_text() == "{}\n"


def test_home_is_empty_and_private_to_the_run(run_in_sandbox: RunInSandbox) -> None:
    first = run_in_sandbox("sh", "-c", "ls -A $HOME; echo x > $HOME/.note; echo ok")
    second = run_in_sandbox("sh", "-c", "ls -A $HOME")
    assert first.output == "ok\n"
    assert second.output == ""


def test_tmp_is_capped_at_the_tmpfs_size(run_in_sandbox: RunInSandbox) -> None:
    outcome = run_in_sandbox(
        "sh",
        "-c",
        "head -c 3000000 /dev/zero > /tmp/fill; echo status=$?",
        tmpfs_bytes=1024**2,
    )
    assert "No space left on device" in outcome.output
    assert "status=1" in outcome.output


def test_nested_user_namespaces_are_refused(run_in_sandbox: RunInSandbox) -> None:
    outcome = run_in_sandbox("unshare", "--user", "--map-root-user", "id", "-u")
    assert outcome.exit_code != 0
    assert "unshare failed" in outcome.output


def test_host_processes_are_invisible(run_in_sandbox: RunInSandbox) -> None:
    outcome = run_in_sandbox(
        *python("""
            import pathlib
            print(sorted(int(p.name) for p in pathlib.Path("/proc").iterdir()
                         if p.name.isdigit()))
        """)
    )
    # bwrap's monitor (1) and the command (2); nothing from the host.
    assert outcome.output == "[1, 2]\n"


def test_the_seccomp_filter_refuses_risky_system_calls_with_eperm(
    run_in_sandbox: RunInSandbox,
) -> None:
    # Raw syscall numbers (x86_64): io_uring_setup, userfaultfd, bpf,
    # perf_event_open, keyctl, open_by_handle_at, unshare; then getpid, allowed.
    outcome = run_in_sandbox(
        *python(
            """
            import ctypes, os
            libc = ctypes.CDLL(None, use_errno=True)
            calls = {"io_uring_setup": 425, "userfaultfd": 323, "bpf": 321,
                     "perf_event_open": 298, "keyctl": 250,
                     "open_by_handle_at": 304, "unshare": 272}
            for name, number in calls.items():
                ctypes.set_errno(0)
                result = libc.syscall(number, 0, 0, 0, 0, 0)
                print(name, result, os.strerror(ctypes.get_errno()))
            print("getpid", libc.syscall(39) > 0)
            """
        )
    )
    assert outcome.exit_code == 0, outcome.output
    lines = outcome.output.splitlines()
    assert lines[:-1] == [
        f"{name} -1 Operation not permitted"
        for name in (
            "io_uring_setup",
            "userfaultfd",
            "bpf",
            "perf_event_open",
            "keyctl",
            "open_by_handle_at",
            "unshare",
        )
    ]
    assert lines[-1] == "getpid True"
