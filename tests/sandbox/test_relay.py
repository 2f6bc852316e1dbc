"""The relay: loopback ports inside the sandbox reaching host unix sockets."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from django.conf import settings

from replayhub.sandbox import Bind
from replayhub.sandbox.network import (
    RELAY_DIR,
    proxy_env,
    relay_mount,
)
from replayhub.sandbox.relay import EXIT_RELAY, UsageError, parse_args
from replayhub.sandbox.relaybin import static_relay, static_relay_or_none
from tests.conftest import processes_mentioning
from tests.sandbox.conftest import RunInSandbox

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None
    and os.environ.get("REPLAYHUB_REQUIRE_SANDBOX") != "1",
    reason="bubblewrap is not installed (REPLAYHUB_REQUIRE_SANDBOX=1 fails instead)",
)

RELAY = Path(__file__).resolve().parents[2] / "replayhub" / "sandbox" / "relay.py"
PORT = 8080


def python(source: str) -> tuple[str, ...]:
    return ("python3", "-c", textwrap.dedent(source))


class UnixEcho:
    """A unix-socket server echoing each connection until the client half-closes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        path.chmod(0o666)  # the sandbox connects as another uid
        self.server.listen()
        self.server.settimeout(0.05)
        self.connections = 0
        self._stop = threading.Event()
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            conn.settimeout(None)
            self.connections += 1
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)
            conn.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        # The acceptor must be gone before the socket is closed: a thread
        # still waiting in accept() on a closed descriptor may be restarted
        # on whatever socket reuses that number, and take its connections.
        self._stop.set()
        self._acceptor.join()
        self.server.close()


@pytest.fixture
def net_dir() -> Iterator[Path]:
    # Under the work dir the runner requires to be traversable by the sandbox
    # uid, as a replay's relay directory is.
    root = Path(settings.REPLAYHUB_WORK_DIR)
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"relay-{uuid.uuid4().hex[:8]}"
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def echo(net_dir: Path) -> Iterator[UnixEcho]:
    net_dir.mkdir(mode=0o755)
    server = UnixEcho(net_dir / "echo.sock")
    yield server
    server.close()


@pytest.fixture
def run_relayed(
    run_in_sandbox: RunInSandbox, net_dir: Path
) -> Callable[..., tuple[int | None, str]]:
    def run(
        *argv: str, sockets: dict[int, str] | None = None
    ) -> tuple[int | None, str]:
        mount = relay_mount(net_dir, sockets or {PORT: "echo.sock"})
        outcome = run_in_sandbox(*mount.wrap(argv), binds=(mount.bind,))
        return outcome.exit_code, outcome.output

    return run


def on_host(listen: str, *command: str) -> list[str]:
    """The relay run directly on the host (no sandbox), by this Python."""
    return [sys.executable, str(RELAY), "--listen", listen, "--", *command]


def listening(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.connect(("127.0.0.1", port))
        except ConnectionRefusedError:
            return False
        # With nothing listening, the probe may have been given `port` as its
        # own source port and be connected to itself.
        return probe.getsockname() != probe.getpeername()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# -- the command line ------------------------------------------------------------


def test_listeners_and_argv_are_read_from_the_command_line() -> None:
    listeners, argv = parse_args(
        ["--listen", "8080=/n/gw.sock", "--listen=3128=/n/a=b.sock", "--", "ls", "--"]
    )
    assert listeners == [(8080, "/n/gw.sock"), (3128, "/n/a=b.sock")]
    assert argv == ["ls", "--"]


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--", "true"],
        ["--listen", "8080=/s"],
        ["--listen", "8080=/s", "--"],
        ["--listen", "8080", "--", "true"],
        ["--listen", "http=/s", "--", "true"],
        ["--listen", "0=/s", "--", "true"],
        ["--listen", "65536=/s", "--", "true"],
        ["--listen", "8080=", "--", "true"],
        ["--listen", "8080=/a", "--listen", "8080=/b", "--", "true"],
        ["--port", "8080=/s", "--", "true"],
        ["--listen"],
    ],
)
def test_a_bad_command_line_is_a_usage_error(args: list[str]) -> None:
    with pytest.raises(UsageError):
        parse_args(args)


def test_a_bad_command_line_exits_125_without_running_the_command() -> None:
    done = subprocess.run(
        [sys.executable, str(RELAY), "--listen", "8080", "--", "echo", "ran"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert done.returncode == EXIT_RELAY
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("relay: ")


# -- on the host: the lifecycle without a pid namespace to clean up ----------------


# Without pidfds the relay polls whether the command's process still lives.
WITHOUT_PIDFD = (
    "import os, runpy, sys; del os.pidfd_open; sys.argv = sys.argv[1:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


@pytest.mark.parametrize("watch", ["pidfd", "polling"])
def test_the_relay_exits_with_the_command_it_runs(echo: UnixEcho, watch: str) -> None:
    marker = f"relay-lifecycle-{uuid.uuid4().hex}"
    port = free_port()
    client = textwrap.dedent(
        f"""
        import socket, sys
        s = socket.create_connection(("127.0.0.1", {port}))
        s.sendall(b"ping"); s.shutdown(socket.SHUT_WR)
        print(s.recv(100).decode()); sys.exit(3)
        """
    )
    argv = on_host(f"{port}={echo.path}", sys.executable, "-c", client, marker)
    if watch == "polling":
        argv[1:1] = ["-c", WITHOUT_PIDFD]
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert (done.returncode, done.stdout, done.stderr) == (3, "ping\n", "")
    # A process's command line reads empty as soon as its main thread has
    # exited, while its other threads (and its sockets) may take a moment more.
    deadline = time.monotonic() + 2
    while (processes_mentioning(marker) or listening(port)) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.02)
    assert processes_mentioning(marker) == []
    assert not listening(port)


def test_the_command_is_exec_d_in_place_keeping_its_pid() -> None:
    process = subprocess.Popen(
        on_host(
            f"{free_port()}=/nowhere",
            sys.executable,
            "-c",
            "import os; print(os.getpid())",
        ),
        stdout=subprocess.PIPE,
        text=True,
    )
    output, _ = process.communicate(timeout=20)
    assert int(output) == process.pid


def test_a_command_that_does_not_exist_exits_127() -> None:
    done = subprocess.run(
        on_host(f"{free_port()}=/nowhere", "replayhub-no-such-command"),
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert done.returncode == 127
    assert "replayhub-no-such-command: command not found" in done.stderr


# -- in the sandbox -----------------------------------------------------------------


@needs_bwrap
def test_a_sandboxed_client_reaches_the_host_socket_through_the_relay(
    echo: UnixEcho, run_relayed
) -> None:
    code, output = run_relayed(
        *python(
            f"""
            import hashlib, os, socket
            payload = os.urandom(3 * 1024 * 1024)
            s = socket.create_connection(("127.0.0.1", {PORT}))
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)  # the half-close reaches the server
            back = b""
            while chunk := s.recv(65536):
                back += chunk
            print(len(back), back == payload)
            """
        )
    )
    assert (code, output) == (0, f"{3 * 1024 * 1024} True\n")
    assert echo.connections == 1


@needs_bwrap
def test_the_relay_adds_no_noticeable_latency(echo: UnixEcho, run_relayed) -> None:
    # 500 small round trips: a relay delaying small writes (Nagle against
    # delayed acknowledgements) would take 40 ms for each.
    code, output = run_relayed(
        *python(
            f"""
            import socket, time
            s = socket.create_connection(("127.0.0.1", {PORT}))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            started = time.perf_counter()
            for _ in range(500):
                s.sendall(b"x" * 100)
                got = 0
                while got < 100:
                    got += len(s.recv(100 - got))
            print(f"{{(time.perf_counter() - started) / 500 * 1000:.3f}}")
            """
        )
    )
    assert code == 0, output
    assert float(output) < 5.0  # milliseconds per round trip; about 0.1 here


@needs_bwrap
def test_the_command_keeps_its_own_output_exit_status_and_signals(
    echo: UnixEcho, run_relayed
) -> None:
    assert run_relayed(*python("print('mine'); raise SystemExit(7)")) == (7, "mine\n")
    assert run_relayed(
        *python("import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    ) == (128 + 15, "")


@needs_bwrap
def test_several_sockets_each_get_their_port(net_dir: Path, run_relayed) -> None:
    net_dir.mkdir(mode=0o755)
    servers = [UnixEcho(net_dir / "a.sock"), UnixEcho(net_dir / "b.sock")]
    try:
        code, output = run_relayed(
            *python(
                """
                import socket
                for port in (7001, 7002):
                    s = socket.create_connection(("127.0.0.1", port))
                    s.sendall(b"%d" % port); s.shutdown(socket.SHUT_WR)
                    print(s.recv(10).decode())
                """
            ),
            sockets={7001: "a.sock", 7002: "b.sock"},
        )
    finally:
        for server in servers:
            server.close()
    assert (code, output) == (0, "7001\n7002\n")
    assert [server.connections for server in servers] == [1, 1]


@needs_bwrap
def test_a_port_that_cannot_be_bound_exits_125_before_the_command_runs(
    echo: UnixEcho, run_relayed
) -> None:
    # The outer relay holds the port, so the inner one cannot bind it.
    inner = f"{RELAY_DIR}/relay.py"
    code, output = run_relayed(
        "python3", inner, "--listen", f"{PORT}=/x", "--", "echo", "command ran"
    )
    assert code == EXIT_RELAY
    assert output == (
        f"relay: cannot listen on 127.0.0.1:{PORT}: Address already in use\n"
    )


@needs_bwrap
def test_a_missing_socket_resets_the_client_at_once(net_dir: Path, run_relayed) -> None:
    code, output = run_relayed(
        *python(
            f"""
            import socket
            s = socket.create_connection(("127.0.0.1", {PORT}))
            try:
                print(repr(s.recv(10)))
            except ConnectionResetError:
                print("reset")
            """
        ),
        sockets={PORT: "nobody-listens.sock"},
    )
    assert (code, output) == (0, "reset\n")


@needs_bwrap
def test_no_relay_process_outlives_the_sandboxed_command(
    echo: UnixEcho, run_relayed, marker: str, survivors
) -> None:
    code, _ = run_relayed("sh", "-c", f"true {marker}")
    assert code == 0
    assert survivors(marker) == []


@needs_bwrap
def test_the_relay_directory_is_read_only_inside(echo: UnixEcho, run_relayed) -> None:
    code, output = run_relayed(
        *python(
            f"""
            import os
            for attempt in (
                lambda: os.unlink("{RELAY_DIR}/echo.sock"),
                lambda: open("{RELAY_DIR}/planted.sock", "w"),
                lambda: open("{RELAY_DIR}/relay.py", "a"),
            ):
                try:
                    attempt()
                    print("wrote")
                except OSError as error:
                    print(error.errno == 30 or error.errno == 13)
            """
        )
    )
    assert (code, output) == (0, "True\nTrue\nTrue\n")
    assert echo.path.exists()


@needs_bwrap
def test_the_sandbox_still_has_no_other_network(echo: UnixEcho, run_relayed) -> None:
    with socket.socket() as host_listener:
        host_listener.bind(("127.0.0.1", 0))
        host_listener.listen()
        host_port = host_listener.getsockname()[1]
        code, output = run_relayed(
            *python(
                f"""
                import socket
                try:
                    socket.create_connection(("127.0.0.1", {host_port}), timeout=3)
                    print("connected")
                except OSError as error:
                    print(type(error).__name__)
                """
            )
        )
    assert (code, output) == (0, "ConnectionRefusedError\n")


# -- the wiring ---------------------------------------------------------------------


def test_the_mount_is_a_read_only_bind_with_the_relay_copied_in(net_dir: Path) -> None:
    mount = relay_mount(net_dir, {8080: "gateway.sock", 3128: net_dir / "egress.sock"})

    assert mount.bind == Bind(net_dir, RELAY_DIR, writable=False)
    assert (net_dir / "relay.py").read_bytes() == RELAY.read_bytes()
    assert (net_dir / "relay.py").stat().st_mode & 0o777 == 0o644
    assert net_dir.stat().st_mode & 0o777 == 0o755
    # The static relay runs in any root, python3 or not.
    assert mount.static and (net_dir / "relay").stat().st_mode & 0o777 == 0o755
    assert mount.wrap(["agent", "--flag"]) == (
        f"{RELAY_DIR}/relay",
        "--listen",
        f"3128={RELAY_DIR}/egress.sock",
        "--listen",
        f"8080={RELAY_DIR}/gateway.sock",
        "--",
        "agent",
        "--flag",
    )
    assert mount.url(8080) == "http://127.0.0.1:8080"


def test_without_the_static_relay_the_wrap_runs_relay_py_with_python3(
    net_dir: Path,
) -> None:
    mount = replace(relay_mount(net_dir, {8080: "gateway.sock"}), static=False)

    assert mount.wrap(["agent"]) == (
        "python3",
        f"{RELAY_DIR}/relay.py",
        "--listen",
        f"8080={RELAY_DIR}/gateway.sock",
        "--",
        "agent",
    )


@pytest.mark.parametrize(
    "sockets",
    [
        {},
        {0: "a.sock"},
        {65536: "a.sock"},
        {8080: "sub/a.sock"},
        {8080: ".."},
        {8080: "relay.py"},
        {8080: Path("/elsewhere/a.sock")},
        {8080: "x" * 200},
    ],
)
def test_sockets_must_be_named_in_the_directory(net_dir: Path, sockets) -> None:
    with pytest.raises(ValueError):
        relay_mount(net_dir, sockets)


def test_the_proxy_environment_leaves_loopback_direct() -> None:
    env = proxy_env(3128)
    assert env["HTTPS_PROXY"] == env["http_proxy"] == "http://127.0.0.1:3128"
    assert "127.0.0.1" in env["NO_PROXY"].split(",")


def test_a_relay_built_ahead_is_the_one_mounted(
    net_dir: Path, tmp_path: Path, settings
) -> None:
    ahead = tmp_path / "relay-built-ahead"
    shutil.copyfile(static_relay(), ahead)
    ahead.write_bytes(ahead.read_bytes() + b"\0built-ahead")
    settings.REPLAYHUB_STATIC_RELAY = str(ahead)
    _forget_relay()
    try:
        mount = relay_mount(net_dir, {8080: "gateway.sock"})
    finally:
        _forget_relay()

    assert mount.static
    assert (net_dir / "relay").read_bytes() == ahead.read_bytes()


def test_a_relay_named_but_missing_falls_back_to_relay_py(
    net_dir: Path, settings
) -> None:
    settings.REPLAYHUB_STATIC_RELAY = "/nonexistent/relay"
    _forget_relay()
    try:
        mount = relay_mount(net_dir, {8080: "gateway.sock"})
    finally:
        _forget_relay()

    assert not mount.static and mount.wrap(["x"])[0] == "python3"


def _forget_relay() -> None:
    static_relay.cache_clear()
    static_relay_or_none.cache_clear()
