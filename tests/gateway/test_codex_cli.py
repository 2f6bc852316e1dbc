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

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from replayhub import agents
from replayhub.agents.rules import RULES
from replayhub.gateway import Upstream, tape_rules
from replayhub.gateway.playback import TapePlayer, TapeRecorder
from tests.gateway.client import PLACEHOLDER
from tests.gateway.clis import Relay, checkout, needs_cli
from tests.gateway.responses_model import KEY, ResponsesModel
from tests.gateway.test_responses_tape import SCRIPT
from tests.hostclis import host_cli

VERSION = agents.PROFILES["codex"].version
PROMPT = "Create calc.py with a function add(a, b) that returns a + b. Then stop.\n"


pytestmark = needs_cli("codex", VERSION)


@pytest.fixture(scope="module")
def codex() -> Path:
    return host_cli("codex")


@pytest.fixture
def model() -> Iterator[ResponsesModel]:
    with ResponsesModel(SCRIPT) as fake:
        yield fake


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
    live.close()  # a streamed call is recorded once its stream is through
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
