"""Real Claude Code 2.1.197 through the real gateway: a run recorded in one
folder, HOME and commit, then another run in another folder, HOME and commit
served from that tape with no call reaching the model. What differs between
the two (the working directory, the memory folder under HOME in its dashed
form, the commit hashes of gitStatus) is set aside by declared rules only,
and named.

The CLI comes from the worker's agent cache (``REPLAYHUB_AGENT_CACHE``,
``claude-code-2.1.197/npm``, as ``./dev test`` fills it), installed offline;
without it this module is skipped (``test_declared_rules`` proves the same on
real Claude Code requests kept as fixtures).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from replayhub import agents
from replayhub.agents.rules import RULES
from replayhub.demo.model_api import REAL_KEY
from replayhub.gateway import Upstream, tape_rules
from replayhub.gateway.playback import TapePlayer, TapeRecorder
from tests.gateway.client import PLACEHOLDER
from tests.gateway.clis import Relay, checkout, needs_cli
from tests.hostclis import host_cli

VERSION = agents.PROFILES["claude-code"].version
PROMPT = "Say hello. Then stop.\n"


pytestmark = needs_cli("claude-code", VERSION)


@pytest.fixture(scope="module")
def claude() -> Path:
    return host_cli("claude-code")


def run_claude(claude: Path, gateway, work: Path, home: Path, tz: str):
    relay = Relay(gateway.socket_path)
    home.mkdir(parents=True, exist_ok=True)
    try:
        return subprocess.run(
            [
                str(claude), "-p", "--model", "claude-sonnet-4-5",
                "--dangerously-skip-permissions", "--output-format", "json",
            ],
            cwd=work,
            env={
                "PATH": "/usr/bin:/bin", "HOME": str(home), "TZ": tz,
                "LANG": "C.UTF-8", "IS_SANDBOX": "1",
                "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{relay.port}/claude",
                "ANTHROPIC_API_KEY": PLACEHOLDER,
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            },
            input=PROMPT,
            capture_output=True,
            text=True,
            timeout=120,
        )  # fmt: skip
    finally:
        relay.close()


def test_claude_code_replays_another_runs_tape_with_no_model_call(
    claude, make_gateway, upstream, tmp_path
):
    upstreams = [Upstream("claude", "anthropic", upstream.base_url, REAL_KEY, {})]
    recorder = TapeRecorder()
    live = make_gateway(upstreams=upstreams, recorder=recorder)
    first = checkout(tmp_path / "dev" / "shop")
    done = run_claude(claude, live, first, tmp_path / "dev" / "home", "Etc/GMT+12")
    assert done.returncode == 0, done.stderr[-2000:]
    live.close()  # a streamed call is recorded once its stream is through
    recorded, _ = recorder.exchanges()
    calls = upstream.calls
    assert calls >= 1 and len(recorded) == calls

    seen = {"cwd": str(first), "home": str(tmp_path / "dev" / "home")}
    again = checkout(tmp_path / "replay" / "workspace")
    replay = {"cwd": str(again), "home": str(tmp_path / "replay" / "home")}
    player = TapePlayer(
        recorded, rules=(*tape_rules.path_rules(seen, replay), *RULES["claude-code"])
    )
    played = make_gateway(upstreams=upstreams, player=player)
    done = run_claude(claude, played, again, tmp_path / "replay" / "home", "Etc/GMT-12")

    assert done.returncode == 0, done.stderr[-2000:]
    assert player.finish() is None, player.divergence and player.divergence.diff
    assert upstream.calls == calls  # not one more call reached the model
    assert player.served == calls
    assert any(
        name.startswith("path: the working directory") for name in player.applied
    )
    assert "Claude Code: gitStatus's commit hashes (Recent commits:)" in player.applied
    assert "Claude Code: the date line (Today's date is YYYY-MM-DD.)" in player.applied
