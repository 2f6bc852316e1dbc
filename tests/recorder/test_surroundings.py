"""The recorder writes down what the agent can see of where it runs: the
checkout's path, HOME, the branch (null when detached), the time zone and
language, a known agent CLI and its version, and the model and beta flags of
its first Anthropic call."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from replayhub.recorder import surroundings
from tests.recorder.conftest import World, sh

# An agent CLI named ``claude``: it answers --version as Claude Code does,
# and otherwise makes one Anthropic call with a model variant and betas.
CLAUDE = """#!{python}
import json, os, sys, urllib.request

if sys.argv[1:] == ["--version"]:
    print("2.1.197 (Claude Code)")
    sys.exit(0)
body = json.dumps({{"model": "claude-test[1m]", "max_tokens": 8,
    "messages": [{{"role": "user", "content": "hello there"}}]}}).encode()
request = urllib.request.Request(
    os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", body, {{
        "content-type": "application/json",
        "x-api-key": os.environ["ANTHROPIC_API_KEY"],
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "context-1m-2025-08-07, interleaved-thinking-2025-05-14",
    }})
urllib.request.urlopen(request).read()
open("app.py", "a").write("# hello\\n")
"""


def claude_cli(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    cli = bin_dir / "claude"
    cli.write_text(CLAUDE.format(python=sys.executable))
    cli.chmod(0o755)
    return cli


def record(world: World, command: list[str], **env: str):
    argv = [sys.executable, str(world.recorder), "--server", world.server]
    argv += ["--project", "shop", "--prompt", "Say hello"]
    argv += ["--anthropic-upstream", world.fake.base_url, "--", *command]
    return world.call(argv, env=world.env(**env))


@pytest.mark.services
def test_the_record_holds_the_runs_surroundings(world: World, tmp_path: Path):
    cli = claude_cli(tmp_path)
    recorded = record(world, [str(cli)], TZ="Europe/Paris", LANG="fr_FR.UTF-8")
    assert recorded.returncode == 0, recorded.stderr

    found = world.stored(recorded.run_id).record["surroundings"]
    assert found == {
        "cwd": str(world.checkout.resolve()),
        "home": str(world.home),
        "branch": "main",
        "tz": "Europe/Paris",
        "lang": "fr_FR.UTF-8",
        "agent": {"name": "claude", "version": "2.1.197"},
        "anthropic": {
            "model": "claude-test[1m]",
            "beta": ["context-1m-2025-08-07", "interleaved-thinking-2025-05-14"],
        },
    }


@pytest.mark.services
def test_a_detached_head_and_an_unknown_command_are_written_as_such(world: World):
    sh(world.checkout, "checkout", "--quiet", "--detach")
    recorded = record(
        world,
        [sys.executable, str(world.agent), "edit"],
        LC_ALL="C.UTF-8",
        LANG="de_DE.UTF-8",
    )
    assert recorded.returncode == 0, recorded.stderr

    found = world.stored(recorded.run_id).record["surroundings"]
    assert found["branch"] is None
    assert found["lang"] == "C.UTF-8"  # LC_ALL outranks LANG
    assert "agent" not in found and "anthropic" not in found


def test_the_time_zone_comes_from_tz_then_etc_timezone_then_the_localtime_link(
    tmp_path: Path,
):
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "localtime").symlink_to("/usr/share/zoneinfo/America/New_York")
    assert surroundings.time_zone({}, etc) == "America/New_York"
    (etc / "timezone").write_text("Asia/Tokyo\n")
    assert surroundings.time_zone({}, etc) == "Asia/Tokyo"
    assert surroundings.time_zone({"TZ": "UTC"}, etc) == "UTC"
    assert surroundings.time_zone({}, tmp_path / "none") is None


def test_a_version_that_never_comes_is_left_out_in_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # A launcher whose child keeps the pipe open after it is killed.
    cli = tmp_path / "codex"
    cli.write_text("#!/bin/sh\nsleep 60 &\nsleep 60\n")
    cli.chmod(0o755)
    monkeypatch.setattr(surroundings, "VERSION_TIMEOUT", 0.5)
    started = time.monotonic()
    found = surroundings.agent_cli([str(cli), "exec"], dict(os.environ))
    assert found == {"name": "codex"}
    assert time.monotonic() - started < 5


def test_output_that_is_no_version_is_no_version(tmp_path: Path):
    cli = tmp_path / "aider"
    cli.write_text("#!/bin/sh\necho 'usage: aider [options]'\n")
    cli.chmod(0o755)
    assert surroundings.agent_cli([str(cli)], dict(os.environ)) == {"name": "aider"}
