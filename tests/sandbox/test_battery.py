"""The escape battery, against every runner this worker can run.

The same attempts for bubblewrap, Docker (podman's compatible service) and
gVisor: reading host files, seeing host processes, reaching any network,
writing outside the workspace, leaving processes behind, exhausting
processes, memory, /tmp or the disk, planting special files and links, and finding the
worker's secrets. A runner that fails its self-check here is skipped (it
would refuse every replay on this worker), unless REPLAYHUB_REQUIRE_SANDBOX=1
and its tool is installed.

The Docker runner's test image is a static busybox; the host's /usr is
bound read-only into it (as bubblewrap binds it) for python3.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from replayhub.sandbox import Bind, Limits, SandboxOutcome, SandboxSpec
from replayhub.sandbox.base import Runner, SandboxUnavailable
from replayhub.sandbox.bwrap import BwrapRunner
from replayhub.sandbox.docker import DockerRunner
from replayhub.sandbox.gvisor import GvisorRunner
from replayhub.sandbox.network import relay_mount
from tests.sandbox.conftest import REQUIRE_SANDBOX

Run = Callable[..., SandboxOutcome]


@pytest.fixture(scope="module", params=["bwrap", "docker", "gvisor"])
def any_runner(request: pytest.FixtureRequest) -> tuple[Runner, tuple[Bind, ...]]:
    """A runner that passed its self-check, and the binds its image needs."""
    name = request.param
    extra: tuple[Bind, ...] = ()
    runner: Runner
    if name == "docker":
        podman = request.getfixturevalue("podman")
        runner = DockerRunner(podman.image, host=podman.host)
        extra = (Bind(Path("/usr"), "/usr"),)
    elif name == "gvisor":
        runner = GvisorRunner()
    else:
        runner = BwrapRunner()
    try:
        runner.check()
    except SandboxUnavailable as error:
        tool = {"bwrap": "bwrap", "docker": "podman", "gvisor": "runsc"}[name]
        if REQUIRE_SANDBOX and shutil.which(tool):
            raise
        pytest.skip(f"{name} is unavailable on this worker: {error}")
    return runner, extra


@pytest.fixture
def run(any_runner: tuple[Runner, tuple[Bind, ...]], workspace: Path) -> Run:
    runner, extra = any_runner

    def run_it(*argv: str, binds: tuple[Bind, ...] = (), **limits) -> SandboxOutcome:
        limits.setdefault("wall_seconds", 30)
        return runner.run(
            SandboxSpec(
                argv=argv,
                workspace=workspace,
                binds=(*extra, *binds),
                limits=Limits(**limits),
            )
        )

    return run_it


def python(source: str) -> tuple[str, ...]:
    return ("python3", "-c", textwrap.dedent(source))


@pytest.fixture
def host_secret(shared_dir: Path, marker: str) -> Iterator[Path]:
    """A world-readable host file the sandbox is never given."""
    path = shared_dir / "secret.txt"
    path.write_text(marker)
    path.chmod(0o644)
    yield path


def test_host_files_outside_the_binds_cannot_be_read(
    run: Run, host_secret: Path, marker: str
) -> None:
    outcome = run(
        *python(f"""
        for path in ({str(host_secret)!r}, "/etc/shadow", "/root/.bashrc",
                     "/proc/1/root/etc/shadow", "/etc/hostname"):
            try:
                print(path, open(path).read()[:200])
            except OSError as error:
                print(path, "refused", type(error).__name__)
        """)
    )

    assert outcome.exit_code == 0, outcome.output
    assert marker not in outcome.output
    assert "root:" not in outcome.output
    assert f"{host_secret} refused" in outcome.output


def test_host_processes_are_invisible(run: Run, marker: str) -> None:
    host = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", marker]
    )
    try:
        outcome = run(
            *python(f"""
            import os
            # Reversed: the script's own command line must not match.
            target = {marker[::-1]!r}[::-1].encode()
            seen = 0
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    cmdline = open(f"/proc/{{pid}}/cmdline", "rb").read()
                except OSError:
                    continue
                seen += 1
                if target in cmdline:
                    print("host process visible", pid)
            print("processes seen", seen)
            """)
        )
    finally:
        host.kill()
        host.wait()

    assert outcome.exit_code == 0, outcome.output
    assert "host process visible" not in outcome.output
    seen = int(outcome.output.split("processes seen ")[1].split()[0])
    assert seen < 10


def test_no_network_but_loopback(run: Run) -> None:
    host_listener = socket.socket()
    host_listener.bind(("127.0.0.1", 0))
    host_listener.listen()
    port = host_listener.getsockname()[1]
    try:
        outcome = run(
            *python(f"""
            import socket
            print("interfaces", sorted(name for _, name in socket.if_nameindex()))
            for family, address in (
                (socket.AF_INET, ("127.0.0.1", {port})),
                (socket.AF_INET, ("1.1.1.1", 53)),
                (socket.AF_INET, ("10.0.0.1", 80)),
                (socket.AF_INET6, ("2606:4700:4700::1111", 53)),
            ):
                try:
                    s = socket.socket(family, socket.SOCK_STREAM)
                    s.settimeout(3)
                    s.connect(address)
                    print("reached", address)
                except OSError as error:
                    print("refused", address[0], type(error).__name__)
            try:
                print("resolved", socket.getaddrinfo("pypi.org", 443))
            except OSError as error:
                print("dns refused", type(error).__name__)
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                u.sendto(b"x", ("8.8.8.8", 53))
                print("udp sent")
            except OSError as error:
                print("udp refused", type(error).__name__)
            """)
        )
    finally:
        host_listener.close()

    assert outcome.exit_code == 0, outcome.output
    assert "interfaces ['lo']" in outcome.output
    assert "reached" not in outcome.output
    assert "resolved" not in outcome.output and "dns refused" in outcome.output
    assert "udp sent" not in outcome.output


def test_writes_outside_the_workspace_fail_and_leave_nothing_on_the_host(
    run: Run, workspace: Path, marker: str
) -> None:
    targets = ["/usr/" + marker, "/etc/" + marker, "/" + marker, "/bin/" + marker]
    outcome = run(
        *python(f"""
        for path in {targets!r}:
            try:
                open(path, "w").write("x")
                print("wrote", path)
            except OSError as error:
                print("refused", path, type(error).__name__)
        open("/workspace/inside", "w").write("kept")
        """)
    )

    assert outcome.exit_code == 0, outcome.output
    assert "wrote" not in outcome.output
    for path in targets:
        assert not Path(path).exists()
    assert (workspace / "inside").read_text() == "kept"


def test_nothing_survives_the_phase(
    run: Run, marker: str, survivors: Callable[[str], list[int]]
) -> None:
    outcome = run(
        "sh",
        "-c",
        f"setsid python3 -c 'import time; time.sleep(300)' {marker} "
        f"</dev/null >/dev/null 2>&1 & "
        f"nohup sleep 301 >/dev/null 2>&1 & echo started",
    )

    assert "started" in outcome.output
    assert survivors(marker) == []
    assert survivors("sleep 301") == []


def test_a_fork_bomb_ends_within_the_wall_clock_and_leaves_nothing(
    run: Run, survivors: Callable[[str], list[int]], marker: str
) -> None:
    outcome = run(
        *python(f"""
        import os, time
        forked = 0
        try:
            for _ in range(10_000):
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
                forked += 1
        except OSError as error:
            print("refused after", forked, type(error).__name__)
        print({marker!r})
        """),
        max_processes=32,
        wall_seconds=20,
    )

    assert outcome.duration_s < 20
    assert "refused after" in outcome.output, outcome
    forked = int(outcome.output.split("refused after ")[1].split()[0])
    assert forked < 32
    assert survivors(marker) == []


def test_a_memory_hog_is_killed_by_the_memory_cap(run: Run) -> None:
    outcome = run(
        *python("""
        hog = []
        while True:
            hog.append(bytearray(16 * 1024 * 1024))
        """),
        memory_bytes=128 * 1024**2,
    )

    assert outcome.exit_code != 0
    assert outcome.limit_fired == "memory", outcome


def test_tmp_is_capped_at_the_tmpfs_size(run: Run) -> None:
    outcome = run(
        *python("""
        written = 0
        try:
            with open("/tmp/fill", "wb") as f:
                for _ in range(64):
                    f.write(b"x" * 1024 * 1024)
                    f.flush()
                    written += 1
        except OSError as error:
            print("stopped at", written, type(error).__name__)
        """),
        tmpfs_bytes=8 * 1024**2,
        file_size_bytes=None,
    )

    assert "stopped at" in outcome.output, outcome.output
    assert int(outcome.output.split("stopped at ")[1].split()[0]) <= 8


def test_filling_the_workspace_past_the_disk_cap_stops_the_run(
    run: Run, workspace: Path
) -> None:
    outcome = run(
        *python("""
        import os, time
        for n in range(400):
            with open(f"/workspace/fill-{n}", "wb") as f:
                f.write(os.urandom(1024 * 1024))
            time.sleep(0.01)
        print("wrote it all")
        """),
        disk_bytes=32 * 1024**2,
    )

    assert outcome.limit_fired == "disk", outcome
    assert "wrote it all" not in outcome.output
    written = sum(p.stat().st_size for p in workspace.iterdir())
    assert written < 200 * 1024**2


def test_special_files_and_links_reach_nothing_of_the_host(
    run: Run, workspace: Path, host_secret: Path, marker: str
) -> None:
    outcome = run(
        *python(f"""
        import os, stat
        try:
            os.mknod("/workspace/disk", stat.S_IFBLK | 0o666, os.makedev(8, 0))
            print("made a device")
        except OSError as error:
            print("mknod refused", type(error).__name__)
        os.symlink({str(host_secret)!r}, "/workspace/link")
        try:
            print("through the link", open("/workspace/link").read())
        except OSError as error:
            print("link dangles", type(error).__name__)
        try:
            os.link("/etc/passwd", "/workspace/hard")
            print("hard-linked")
        except OSError as error:
            print("hard link refused", type(error).__name__)
        """)
    )

    assert outcome.exit_code == 0, outcome.output
    assert "made a device" not in outcome.output
    assert marker not in outcome.output and "link dangles" in outcome.output
    assert "hard-linked" not in outcome.output
    assert not (workspace / "disk").exists()
    # The link the sandbox left is only a name: reading the workspace later
    # happens as the sandbox uid, which cannot use it to reach more than it
    # could before.
    assert os.readlink(workspace / "link") == str(host_secret)


def test_the_workers_secrets_are_never_inside(
    run: Run, marker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPLAYHUB_BATTERY_KEY", marker)
    outcome = run(
        *python(f"""
        import os
        # Reversed: the script's own command line must not match.
        target = {marker[::-1]!r}[::-1]
        found = [k for k, v in os.environ.items() if target in v]
        for pid in filter(str.isdigit, os.listdir("/proc")):
            for name in ("environ", "cmdline"):
                try:
                    if target.encode() in open(
                        f"/proc/{{pid}}/{{name}}", "rb"
                    ).read():
                        found.append(f"{{pid}}/{{name}}")
                except OSError:
                    pass
        print("found", found)
        """)
    )

    assert outcome.exit_code == 0, outcome.output
    assert "found []" in outcome.output


def test_the_only_way_out_is_the_relayed_unix_socket(
    run: Run, workspace: Path, survivors: Callable[[str], list[int]]
) -> None:
    net = Path(f"{workspace}-net")
    net.mkdir(mode=0o755)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(net / "gateway.sock"))
    (net / "gateway.sock").chmod(0o666)
    server.listen()

    def answer() -> None:
        client, _ = server.accept()
        with client:
            request = client.recv(1000)
            client.sendall(b"relayed " + request[:4])

    threading.Thread(target=answer, daemon=True).start()
    mount = relay_mount(net, {8790: "gateway.sock"})
    try:
        outcome = run(
            *mount.wrap(
                python("""
                import socket
                s = socket.create_connection(("127.0.0.1", 8790), timeout=10)
                s.sendall(b"PING")
                print(s.recv(100).decode())
                try:
                    socket.create_connection(("127.0.0.1", 8791), timeout=3)
                    print("another port answered")
                except OSError:
                    print("nothing else")
                """)
            ),
            binds=(mount.bind,),
        )
    finally:
        server.close()
        shutil.rmtree(net, ignore_errors=True)

    assert outcome.exit_code == 0, outcome.output
    assert outcome.output.splitlines() == ["relayed PING", "nothing else"]
    assert survivors(f"{net}/gateway.sock") == []
