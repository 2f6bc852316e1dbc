"""Real Codex CLI 0.171.0 through the real gateway: a run recorded against a
stand-in Responses model, then another run in another folder and HOME served
from that tape with no call reaching the model, and calc.py written both times.

The CLI comes from the worker's agent cache (``REPLAYHUB_AGENT_CACHE``, the
folder ``codex-0.171.0/npm`` holding npm's cache, as ``./dev test`` fills it),
installed offline into a temporary folder. Without it this module is skipped;
``test_responses_tape`` proves the same on real Codex requests kept as
fixtures.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from replayhub.agents.rules import RULES
from replayhub.gateway import Upstream, tape_rules
from replayhub.gateway.playback import TapePlayer, TapeRecorder
from tests.gateway.client import PLACEHOLDER
from tests.gateway.responses_model import KEY, ResponsesModel
from tests.gateway.test_responses_tape import SCRIPT

VERSION = "0.171.0"
PROMPT = "Create calc.py with a function add(a, b) that returns a + b. Then stop.\n"


def _cache() -> Path | None:
    root = os.environ.get("REPLAYHUB_AGENT_CACHE", "")
    folder = Path(root) / f"codex-{VERSION}" / "npm" if root else None
    return folder if folder is not None and folder.is_dir() else None


pytestmark = pytest.mark.skipif(
    _cache() is None or shutil.which("npm") is None,
    reason=f"no codex-{VERSION} in REPLAYHUB_AGENT_CACHE (./dev test fills it)",
)


@pytest.fixture(scope="module")
def codex(tmp_path_factory) -> Path:
    cache = _cache()
    assert cache is not None
    root = tmp_path_factory.mktemp("codex")
    # npm will not read a cache it cannot write to.
    shutil.copytree(cache, root / "npm-cache", symlinks=True)
    dead = "http://127.0.0.1:9"
    subprocess.run(
        [
            "npm", "install", "--prefix", str(root / "cli"), "--offline",
            "--cache", str(root / "npm-cache"), "--proxy", dead,
            "--https-proxy", dead, "--no-audit", "--no-fund",
            f"@openai/codex@{VERSION}",
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )  # fmt: skip
    return root / "cli" / "node_modules" / ".bin" / "codex"


class Relay:
    """127.0.0.1:<port> piped to the gateway's unix socket, as the sandbox's
    relay does."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.path)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def model() -> Iterator[ResponsesModel]:
    with ResponsesModel(SCRIPT) as fake:
        yield fake


def checkout(where: Path) -> Path:
    where.mkdir(parents=True)
    (where / "README.md").write_text("# calc\nA tiny calculator.\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(where)}
    for argv in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "."],
        ["git", "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "init"],
    ):
        subprocess.run(argv, cwd=where, env=env, check=True, timeout=30)
    return where


def run_codex(
    codex: Path, gateway, work: Path, home: Path, tz: str
) -> subprocess.CompletedProcess:
    """Codex in ``work`` with ``home`` as HOME, in time zone ``tz`` (the two
    runs are a day apart, so their dates always differ)."""
    relay = Relay(gateway.socket_path)
    home.mkdir(parents=True, exist_ok=True)
    base = f"http://127.0.0.1:{relay.port}/gpt/v1"
    try:
        return subprocess.run(
            [
                str(codex), "exec", "--dangerously-bypass-approvals-and-sandbox",
                "--skip-git-repo-check", "--color", "never", "-m", "gpt-5.5",
                "-c", "model_provider=rh", "-c", "model_providers.rh.name=rh",
                "-c", f"model_providers.rh.base_url={base}",
                "-c", "model_providers.rh.env_key=RH_KEY",
                "-c", "model_providers.rh.wire_api=responses",
                "-c", "model_providers.rh.request_max_retries=0",
                "-c", "model_providers.rh.stream_max_retries=0",
                "-c", "analytics.enabled=false", "--disable", "plugins", "-",
            ],
            cwd=work,
            env={
                "PATH": "/usr/bin:/bin", "HOME": str(home), "TZ": tz,
                "LANG": "C.UTF-8", "RH_KEY": PLACEHOLDER,
            },
            input=PROMPT,
            capture_output=True,
            text=True,
            timeout=120,
        )  # fmt: skip
    finally:
        relay.close()


def test_codex_reads_a_served_tape_and_writes_calc_py_with_no_model_call(
    codex, make_gateway, model, tmp_path
):
    upstreams = [Upstream("gpt", "openai", model.base_url + "/v1", KEY, {})]
    recorder = TapeRecorder()
    live = make_gateway(upstreams=upstreams, recorder=recorder)
    first = checkout(tmp_path / "dev" / "shop")
    done = run_codex(codex, live, first, tmp_path / "dev" / "home", "Etc/GMT+12")
    assert done.returncode == 0, done.stderr[-2000:]
    assert (first / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    recorded, _ = recorder.exchanges()
    assert model.calls == 2 and len(recorded) == 2

    seen = {"cwd": str(first), "home": str(tmp_path / "dev" / "home")}
    again = checkout(tmp_path / "replay" / "workspace")
    replay = {"cwd": str(again), "home": str(tmp_path / "replay" / "home")}
    player = TapePlayer(
        recorded, rules=(*tape_rules.path_rules(seen, replay), *RULES["codex"])
    )
    played = make_gateway(upstreams=upstreams, player=player)
    done = run_codex(codex, played, again, tmp_path / "replay" / "home", "Etc/GMT-12")

    assert done.returncode == 0, done.stderr[-2000:]
    assert (again / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert model.calls == 2  # not one more call reached the model
    assert player.finish() is None and player.served == 2
    assert "Codex: <current_date>" in player.applied
