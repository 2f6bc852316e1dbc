"""The recorder writes down what the agent can see of where it runs: the
checkout's path, HOME, the branch (null when detached), the time zone and
language, a known agent CLI and its version, and the model and beta flags of
its first Anthropic call."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

from replayhub import services
from replayhub.ingest.tokens import token_issue
from replayhub.models import Replay
from replayhub.recorder import surroundings
from tests.factories import make_git_project
from tests.gitrepos import Repo
from tests.recorder.conftest import World, make_world, sh

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
    recorded = record(
        world, [str(cli)], TZ="Europe/Paris", LANG="fr_FR.UTF-8", SHELL="/bin/zsh"
    )
    assert recorded.returncode == 0, recorded.stderr

    found = world.stored(recorded.run_id).record["surroundings"]
    assert found == {
        "shell": "/bin/zsh",
        "cwd": str(world.checkout.resolve()),
        "home": str(world.home),
        "branch": "main",
        "tz": "Europe/Paris",
        # The machine's own zone, which Codex reads rather than $TZ.
        **({"localtime": zone} if (zone := surroundings.system_zone()) else {}),
        "lang": "fr_FR.UTF-8",
        # The password database's, which Codex reads rather than $SHELL.
        **({"login_shell": shell} if (shell := surroundings.login_shell()) else {}),
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


# What the replayed agent sees of where it runs, one line each.
PROBE = (
    'pwd; echo "$HOME"; git symbolic-ref -q --short HEAD || echo detached; '
    'echo "$TZ"; echo "$LANG"'
)


@pytest.mark.services
def test_a_recorded_run_replays_where_it_was_recorded(fake, live_server, recorder):
    # Outside /tmp, which is the sandbox's own: the place can be reproduced.
    place = Path(tempfile.mkdtemp(prefix="rh-surroundings-", dir="/var/tmp"))
    try:
        world = make_world(place, fake, live_server.url, recorder)
        world.project = make_git_project(
            Repo(world.origin), agent_command=["sh", "-c", PROBE]
        )
        world.token = token_issue(project=world.project)[1]
        sh(world.checkout, "checkout", "--quiet", "-b", "feature/notes")
        recorded = record(
            world,
            [sys.executable, str(world.agent), "edit"],
            TZ="America/Sao_Paulo",
            LANG="pt_BR.UTF-8",
        )
        assert recorded.returncode == 0, recorded.stderr

        run = world.stored(recorded.run_id)
        replay = services.replay_create(run=run, trigger="command")
        services.replay_execute(replay_id=replay.pk)
        replay = Replay.objects.get(pk=replay.pk)

        assert replay.agent_output.splitlines()[:5] == [
            str(world.checkout.resolve()),
            str(world.home),
            "feature/notes",
            "America/Sao_Paulo",
            "pt_BR.UTF-8",
        ]
        assert replay.evidence["surroundings"]["differences"] == []
    finally:
        shutil.rmtree(place, ignore_errors=True)
