"""Known agent CLIs pointed at the recording endpoint with no glue: Codex
through a custom provider on its command line, Claude Code with its outside
traffic off, as their replays run them; anything else as given."""

from __future__ import annotations

from replayhub.agents import PROFILES
from replayhub.recorder.wiring import wired

ENV = {"OPENAI_BASE_URL": "http://127.0.0.1:5/s/openai/v1", "HOME": "/home/dev"}


def test_codex_gets_the_custom_provider_at_the_endpoint():
    command, env = wired(["/opt/bin/codex", "exec", "fix it"], ENV)
    assert command[0] == "/opt/bin/codex" and command[-2:] == ["exec", "fix it"]
    assert set(command[1:-2:2]) == {"-c"}
    values = command[2:-2:2]
    assert "model_provider=rh" in values
    assert "model_providers.rh.base_url=http://127.0.0.1:5/s/openai/v1" in values
    assert "model_providers.rh.wire_api=responses" in values
    assert env == ENV


def test_codex_flags_are_the_ones_its_replay_uses():
    command, _ = wired(["codex", "exec"], ENV)
    replay = PROFILES["codex"].argv(model="gpt-5.5")
    provider = [w for w in command if w.startswith("model_provider")]
    assert all(word in replay for word in provider if "base_url" not in word)


def test_a_codex_command_naming_its_own_provider_is_left_alone():
    given = ["codex", "-c", "model_provider=mine", "exec", "go"]
    assert wired(given, ENV)[0] == given


def test_claude_code_gets_its_outside_traffic_off_unless_set():
    _, env = wired(["claude", "-p", "go"], ENV)
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert env == {**ENV, **PROFILES["claude-code"].environment()}
    _, kept = wired(["claude"], {**ENV, "DISABLE_AUTOUPDATER": "0"})
    assert kept["DISABLE_AUTOUPDATER"] == "0"


def test_another_command_is_unchanged():
    command = ["python3", "agent.py", "codex"]
    assert wired(command, ENV) == (command, ENV)
