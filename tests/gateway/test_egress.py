"""The egress proxy: allowlist patterns, then the proxy itself, then from a sandbox."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from replayhub.gateway.allow import (
    first_match,
    parse_allow_entry,
    parse_allowlist,
    parse_host,
    split_authority,
)
from replayhub.gateway.egress import ConnectAttempt, EgressProxy
from replayhub.sandbox import Limits, SandboxSpec
from replayhub.sandbox.bwrap import BwrapRunner
from replayhub.sandbox.network import relay_mount

# -- patterns -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "host", "port", "allowed"),
    [
        ("pypi.org:443", "pypi.org", 443, True),
        ("pypi.org:443", "PyPI.Org", 443, True),
        ("pypi.org:443", "pypi.org.", 443, True),
        ("PYPI.ORG:443", "pypi.org", 443, True),
        ("pypi.org:443", "pypi.org", 80, False),
        ("pypi.org:443", "files.pypi.org", 443, False),
        ("pypi.org:443", "pypi.org.evil.test", 443, False),
        ("pypi.org:443", "evilpypi.org", 443, False),
        ("pypi.org:443", "pypi-org", 443, False),
        ("*.pythonhosted.org:443", "files.pythonhosted.org", 443, True),
        ("*.pythonhosted.org:443", "a.b.pythonhosted.org", 443, True),
        ("*.pythonhosted.org:443", "pythonhosted.org", 443, False),
        ("*.pythonhosted.org:443", "filespythonhosted.org", 443, False),
        ("*.pythonhosted.org:443", "files.pythonhosted.org.evil.test", 443, False),
        ("*.pythonhosted.org:443", "files.pythonhosted.org", 80, False),
        ("mirror.*.example.com:80", "mirror.eu.example.com", 80, True),
        ("mirror.*.example.com:80", "mirror.a.b.example.com", 80, True),
        ("mirror.*.example.com:80", "mirror.example.com", 80, False),
        ("registry.npmjs.org:*", "registry.npmjs.org", 1, True),
        ("registry.npmjs.org:*", "registry.npmjs.org", 65535, True),
        ("*:*", "anything.example", 8443, True),
        ("*:*", "10.0.0.1", 80, False),
        ("*.0.0.1:80", "127.0.0.1", 80, False),
        ("127.0.0.1:8000", "127.0.0.1", 8000, True),
        ("127.0.0.1:8000", "127.0.0.1", 8001, False),
        ("127.0.0.1:8000", "localhost", 8000, False),
        ("localhost:8000", "127.0.0.1", 8000, False),
        ("127.0.0.1:8000", "[::ffff:127.0.0.1]", 8000, False),
        ("[::1]:8000", "[::1]", 8000, True),
        ("[::1]:8000", "[0:0::1]", 8000, True),
        ("[::1]:8000", "127.0.0.1", 8000, False),
        ("db.internal:5432", "db.internal", 5432, True),
    ],
)
def test_a_pattern_matches_the_name_the_client_asked_for(
    entry: str, host: str, port: int, allowed: bool
) -> None:
    assert parse_allow_entry(entry).matches(parse_host(host), port) is allowed


@pytest.mark.parametrize(
    "entry",
    [
        "",
        "pypi.org",
        "pypi.org:",
        ":443",
        "pypi.org:0",
        "pypi.org:65536",
        "pypi.org:https",
        "pypi.org:+443",
        " pypi.org:443",
        "pypi.org:443 ",
        "py*.org:443",
        "*pypi.org:443",
        "**.org:443",
        "*..org:443",
        "a..b:443",
        "-bad.example:443",
        "bad-.example:443",
        "under score.example:443",
        "user@pypi.org:443",
        "::1:8000",
        "[::1:8000",
        "[not-v6]:80",
        "127.1:80",
        "0x7f.0.0.1:80",
        "2130706433:80",
        "017700000001:80",
        "0x7f000001:80",
        "1.2.3.04:80",
        "a." * 130 + "org:443",
    ],
)
def test_a_bad_entry_is_refused_with_a_one_line_reason(entry: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_allow_entry(entry)
    reason = str(refused.value)
    assert reason and "\n" not in reason
    assert len(reason) < 500


@pytest.mark.parametrize(
    "host",
    ["127.1", "0x7f.0.0.1", "2130706433", "0177.0.0.1", "0x7f000001", "1.2.3.04"],
)
def test_an_address_in_disguise_is_no_host(host: str) -> None:
    with pytest.raises(ValueError, match=r"disguise|not a host"):
        parse_host(host)


def test_hosts_are_lowercased_and_addresses_read_strictly() -> None:
    assert parse_host("Files.PythonHosted.org.").name == "files.pythonhosted.org"
    assert str(parse_host("127.0.0.1").address) == "127.0.0.1"
    assert str(parse_host("[::1]").address) == "::1"
    assert parse_host("_service.example.com").address is None


@pytest.mark.parametrize(
    ("authority", "expected"),
    [
        ("pypi.org:443", ("pypi.org", "443")),
        ("pypi.org", ("pypi.org", "80")),
        ("[::1]:8000", ("[::1]", "8000")),
        ("[::1]", ("[::1]", "80")),
    ],
)
def test_an_authority_splits_into_host_and_port(authority, expected) -> None:
    assert split_authority(authority, 80) == expected


@pytest.mark.parametrize("authority", ["u@h:80", "a:b:c", "[::1]x", ":80"])
def test_a_strange_authority_is_refused(authority: str) -> None:
    with pytest.raises(ValueError):
        split_authority(authority, 80)


def test_the_first_matching_rule_allows() -> None:
    rules = parse_allowlist(["pypi.org:443", "*.pythonhosted.org:*"])
    assert first_match(rules, parse_host("pypi.org"), 443) is rules[0]
    assert first_match(rules, parse_host("files.pythonhosted.org"), 80) is rules[1]
    assert first_match(rules, parse_host("pypi.org"), 80) is None
    assert first_match((), parse_host("pypi.org"), 443) is None


# -- the proxy, spoken to directly ----------------------------------------------------


class Upstream(http.server.BaseHTTPRequestHandler):
    """Answers with what it received: method, path, headers and body, as JSON."""

    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.dumps(
            {
                "method": self.command,
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": self.rfile.read(length).decode(),
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def net_dir() -> Iterator[Path]:
    # Under the work dir, which the sandbox uid can traverse.
    root = Path(settings.REPLAYHUB_WORK_DIR)
    root.mkdir(parents=True, exist_ok=True)
    base = root / f"egress-{uuid.uuid4().hex[:8]}"
    base.mkdir(mode=0o755)
    (base / "net").mkdir(mode=0o755)
    yield base / "net"
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port nothing listens on, held for the test.

    Held bound (not listening), connecting to it is refused; merely found free,
    it could become the ephemeral port of the connection to it, which then
    connects to itself and echoes what it sends.
    """
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def ask(proxy: EgressProxy, request: bytes, *, hang_up: bool = True) -> bytes:
    """Send raw bytes to the proxy's socket; everything it answers."""
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(10)
        client.connect(str(proxy.socket_path))
        client.sendall(request)
        if hang_up:
            client.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
    return answer


def settled(proxy: EgressProxy, count: int) -> list[ConnectAttempt]:
    """The attempts, once `count` of them are recorded (recording ends a thread)."""
    deadline = time.monotonic() + 5
    while len(proxy.attempts) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return proxy.attempts


def test_plain_http_goes_where_the_url_says_without_the_proxy_headers(
    net_dir: Path, upstream: int
) -> None:
    seen: list[ConnectAttempt] = []
    with EgressProxy(
        net_dir / "egress.sock", [f"127.0.0.1:{upstream}"], "agent", seen.append
    ) as proxy:
        answer = ask(
            proxy,
            f"POST http://127.0.0.1:{upstream}/simple/?q=1 HTTP/1.1\r\n"
            "Host: fronted.example\r\nProxy-Authorization: Basic c2VjcmV0\r\n"
            "Proxy-Connection: keep-alive\r\nConnection: keep-alive, X-Hop\r\n"
            "X-Hop: 1\r\nContent-Length: 5\r\n\r\nhello".encode(),
            hang_up=False,
        )
        attempts = settled(proxy, 1)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    received = json.loads(body)
    assert (received["method"], received["path"]) == ("POST", "/simple/?q=1")
    assert received["body"] == "hello"
    assert received["headers"]["connection"] == "close"
    assert received["headers"]["host"] == f"127.0.0.1:{upstream}"
    assert not {"proxy-authorization", "proxy-connection", "x-hop"} & set(
        received["headers"]
    )
    [attempt] = attempts
    assert seen == attempts
    assert (attempt.host, attempt.port, attempt.phase) == (
        "127.0.0.1",
        upstream,
        "agent",
    )
    assert (attempt.allowed, attempt.outcome, attempt.method) == (True, "ok", "POST")
    assert attempt.bytes_down == len(answer)
    assert attempt.bytes_up > len("hello")
    assert attempt.started_at.tzinfo is not None and attempt.duration_ms > 0


def test_a_denied_host_gets_403_with_a_one_line_reason(net_dir: Path) -> None:
    with EgressProxy(net_dir / "egress.sock", ["pypi.org:443"], "tests") as proxy:
        answer = ask(proxy, b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n")
        [attempt] = settled(proxy, 1)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 403 ")
    assert body == b"egress to evil.example:443 is not allowed in the tests phase\n"
    assert (attempt.host, attempt.port, attempt.allowed) == ("evil.example", 443, False)
    assert (attempt.outcome, attempt.bytes_up, attempt.bytes_down) == ("denied", 0, 0)


@pytest.mark.parametrize(
    ("request_line", "host"),
    [
        (b"GET http://2130706433:{port}/ HTTP/1.1", "2130706433"),
        (b"GET http://127.1:{port}/ HTTP/1.1", "127.1"),
        (b"CONNECT [::ffff:127.0.0.1]:{port} HTTP/1.1", "[::ffff:127.0.0.1]"),
        (b"GET http://localhost@127.0.0.1:{port}/ HTTP/1.1", "localhost@127.0.0.1"),
        (b"CONNECT localhost HTTP/1.1", "localhost"),
    ],
)
def test_address_tricks_are_denied(
    net_dir: Path, upstream: int, request_line: bytes, host: str
) -> None:
    allow = [f"127.0.0.1:{upstream}", "localhost:*"]
    with EgressProxy(net_dir / "egress.sock", allow, "agent") as proxy:
        line = request_line.replace(b"{port}", str(upstream).encode())
        answer = ask(proxy, line + b"\r\n\r\n")
        [attempt] = settled(proxy, 1)
    assert answer.startswith(b"HTTP/1.1 403 ")
    assert answer.count(b"\n", answer.index(b"\r\n\r\n") + 4) == 1
    assert (attempt.host, attempt.allowed, attempt.outcome) == (host, False, "denied")


def test_an_allowed_host_that_does_not_answer_is_unreachable(
    net_dir: Path, closed_port: int
) -> None:
    port = closed_port
    with EgressProxy(net_dir / "egress.sock", [f"127.0.0.1:{port}"], "agent") as proxy:
        answer = ask(proxy, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
        [attempt] = settled(proxy, 1)
    assert answer.startswith(b"HTTP/1.1 502 ")
    assert (attempt.allowed, attempt.outcome) == (True, "unreachable")
    assert "refused" in attempt.detail.lower()


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GET /local HTTP/1.1\r\nHost: x\r\n\r\n", b"400"),
        (b"GET https://pypi.org/ HTTP/1.1\r\n\r\n", b"400"),
        (b"NONSENSE\r\n\r\n", b"400"),
        (b"GET http://pypi.org/ HTTP/1.1\r\nX-Big: " + b"a" * 20000, b"431"),
        (b"GET http://pypi.org/ HTTP/1.1\r\nHost: x", b"400"),
    ],
)
def test_a_malformed_request_is_refused_and_recorded(
    net_dir: Path, raw: bytes, status: bytes
) -> None:
    with EgressProxy(net_dir / "egress.sock", ["pypi.org:*"], "agent") as proxy:
        answer = ask(proxy, raw)
        [attempt] = settled(proxy, 1)
    assert answer.split(b" ")[1] == status
    assert (attempt.allowed, attempt.outcome) == (False, "error")
    assert attempt.detail


def test_a_client_that_hangs_up_at_once_attempted_nothing(net_dir: Path) -> None:
    with EgressProxy(net_dir / "egress.sock", [], "agent") as proxy:
        assert ask(proxy, b"") == b""
        time.sleep(0.1)
        assert proxy.attempts == []


def test_a_slow_header_times_out(net_dir: Path) -> None:
    with EgressProxy(net_dir / "egress.sock", [], "agent", header_timeout=0.3) as proxy:
        answer = ask(proxy, b"CONNECT pypi.org:443 HTTP/1.1\r\n", hang_up=False)
        [attempt] = settled(proxy, 1)
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert attempt.outcome == "error"


def test_tunnels_are_bounded_and_an_idle_one_is_closed(
    net_dir: Path, upstream: int
) -> None:
    with EgressProxy(
        net_dir / "egress.sock",
        [f"127.0.0.1:{upstream}"],
        "agent",
        max_tunnels=1,
        idle_timeout=0.5,
    ) as proxy:
        first = socket.socket(socket.AF_UNIX)
        first.connect(str(proxy.socket_path))
        first.sendall(f"CONNECT 127.0.0.1:{upstream} HTTP/1.1\r\n\r\n".encode())
        assert first.recv(100).startswith(b"HTTP/1.1 200 ")
        refused = ask(proxy, f"CONNECT 127.0.0.1:{upstream} HTTP/1.1\r\n\r\n".encode())
        first.settimeout(5)
        started = time.monotonic()
        assert first.recv(100) == b""  # the idle tunnel is closed by the proxy
        idle_for = time.monotonic() - started
        first.close()
        attempts = settled(proxy, 2)
    assert refused.startswith(b"HTTP/1.1 503 ")
    assert idle_for < 3
    assert sorted(a.outcome for a in attempts) == ["error", "ok"]


def test_the_socket_is_open_to_the_sandbox_uid_and_removed_on_close(
    net_dir: Path,
) -> None:
    path = net_dir / "egress.sock"
    with EgressProxy(path, [], "agent"):
        assert path.stat().st_mode & 0o777 == 0o666
    assert not path.exists()


def test_a_bad_allowlist_is_refused_before_anything_listens(net_dir: Path) -> None:
    with pytest.raises(ValueError, match=r"pypi\.org"):
        EgressProxy(net_dir / "egress.sock", ["pypi.org"], "agent")
    with pytest.raises(TypeError):
        EgressProxy(net_dir / "egress.sock", "pypi.org:443", "agent")
    assert not (net_dir / "egress.sock").exists()


def test_a_callback_that_fails_does_not_break_the_proxy(net_dir: Path) -> None:
    def explode(attempt: ConnectAttempt) -> None:
        raise RuntimeError("boom")

    with EgressProxy(net_dir / "egress.sock", [], "agent", explode) as proxy:
        for _ in range(2):
            assert ask(proxy, b"CONNECT a.test:1 HTTP/1.1\r\n\r\n").startswith(
                b"HTTP/1.1 403 "
            )
        assert len(settled(proxy, 2)) == 2


# -- from the sandbox, through the relay ---------------------------------------------

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None
    and os.environ.get("REPLAYHUB_REQUIRE_SANDBOX") != "1",
    reason="bubblewrap is not installed (REPLAYHUB_REQUIRE_SANDBOX=1 fails instead)",
)
PROXY_PORT = 3128

CLIENT = """
import http.client, os, urllib.error, urllib.parse, urllib.request

def plain(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode().strip()

def tunnel(host, port, path):
    proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
    conn = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=10)
    conn.set_tunnel(host, port)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read().decode()
    except OSError as error:
        return "refused", str(error)
    finally:
        conn.close()
"""


def sandboxed(net_dir: Path, source: str) -> tuple[int | None, str]:
    """Run a Python client in the sandbox with the proxy relayed on PROXY_PORT."""
    workspace = net_dir.parent / "workspace"
    workspace.mkdir(exist_ok=True)
    mount = relay_mount(net_dir, {PROXY_PORT: "egress.sock"})
    url = mount.url(PROXY_PORT)
    code = CLIENT + textwrap.dedent(source)
    outcome = BwrapRunner().run(
        SandboxSpec(
            argv=mount.wrap(["python3", "-c", code]),
            workspace=workspace,
            env={"HTTP_PROXY": url, "HTTPS_PROXY": url},
            binds=(mount.bind,),
            limits=Limits(wall_seconds=60),
        )
    )
    return outcome.exit_code, outcome.output


@needs_bwrap
def test_a_sandboxed_client_goes_through_the_proxy_where_allowed(
    net_dir: Path, upstream: int, closed_port: int
) -> None:
    down = closed_port
    allow = [f"127.0.0.1:{upstream}", f"localhost:{upstream}", f"127.0.0.1:{down}"]
    seen: list[ConnectAttempt] = []
    with EgressProxy(net_dir / "egress.sock", allow, "agent", seen.append) as proxy:
        code, output = sandboxed(
            net_dir,
            f"""
            import json
            status, body = plain("http://127.0.0.1:{upstream}/simple/")
            print("plain", status, json.loads(body)["path"])
            status, body = tunnel("localhost", {upstream}, "/through-tunnel")
            print("tunnel", status, json.loads(body)["path"])
            print("denied", *plain("http://pypi.org/simple/"))
            print("denied tunnel", *tunnel("pypi.org", 443, "/"))
            print("down", *plain("http://127.0.0.1:{down}/"))
            """,
        )
        proxy.phase = "tests"
        later, again = sandboxed(
            net_dir, f'print(*plain("http://127.0.0.1:{upstream}/again"))'
        )
        attempts = settled(proxy, 6)

    assert code == 0, output
    lines = output.splitlines()
    assert lines[:2] == ["plain 200 /simple/", "tunnel 200 /through-tunnel"]
    assert lines[2] == (
        "denied 403 egress to pypi.org:80 is not allowed in the agent phase"
    )
    assert lines[3].startswith("denied tunnel refused ") and "403" in lines[3]
    assert lines[4].startswith("down 502 could not connect to 127.0.0.1:")
    assert later == 0 and again.startswith("200 ")

    assert seen == attempts
    # Recorded as each attempt ends; listed here in the order they started.
    attempts.sort(key=lambda attempt: attempt.started_at)
    summary = [
        (a.phase, a.method, a.host, a.port, a.allowed, a.outcome) for a in attempts
    ]
    assert summary == [
        ("agent", "GET", "127.0.0.1", upstream, True, "ok"),
        ("agent", "CONNECT", "localhost", upstream, True, "ok"),
        ("agent", "GET", "pypi.org", 80, False, "denied"),
        ("agent", "CONNECT", "pypi.org", 443, False, "denied"),
        ("agent", "GET", "127.0.0.1", down, True, "unreachable"),
        ("tests", "GET", "127.0.0.1", upstream, True, "ok"),
    ]
    for attempt in attempts:
        moved = attempt.outcome == "ok"
        assert (attempt.bytes_up > 0) is moved and (attempt.bytes_down > 0) is moved
        assert attempt.duration_ms >= 0


def test_concurrent_attempts_are_each_recorded_once(
    net_dir: Path, upstream: int
) -> None:
    allow = [f"127.0.0.1:{upstream}"]
    with EgressProxy(net_dir / "egress.sock", allow, "agent") as proxy:
        requests = [
            f"GET http://127.0.0.1:{upstream}/{n} HTTP/1.1\r\n\r\n".encode()
            for n in range(20)
        ] + [b"CONNECT denied.test:443 HTTP/1.1\r\n\r\n"] * 10
        threads = [threading.Thread(target=ask, args=(proxy, raw)) for raw in requests]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        attempts = settled(proxy, 30)
    assert len(attempts) == 30
    assert sorted(a.outcome for a in attempts) == ["denied"] * 10 + ["ok"] * 20


def test_closing_the_proxy_cuts_open_tunnels(net_dir: Path, upstream: int) -> None:
    proxy = EgressProxy(net_dir / "egress.sock", [f"127.0.0.1:{upstream}"], "agent")
    with proxy, socket.socket(socket.AF_UNIX) as client:
        client.connect(str(proxy.socket_path))
        client.sendall(f"CONNECT 127.0.0.1:{upstream} HTTP/1.1\r\n\r\n".encode())
        assert client.recv(100).startswith(b"HTTP/1.1 200 ")
        client.settimeout(5)
        proxy.close()
        assert client.recv(100) == b""
    [attempt] = proxy.attempts
    assert attempt.outcome == "ok"
