"""Real agent CLIs recorded where they ran and replayed from their own tapes.

For Claude Code, Codex, Aider, mini-swe-agent and Gemini CLI at their pinned
versions: the CLI, installed on the host from the agent cache, runs under
``replayhub-record`` in a developer's clone (another path, HOME, branch and
clock than the sandbox's) against a scripted fake model speaking its wire;
the recorder pushes the run to ReplayHub. A tape replay of that run in the
real sandbox ends ``identical`` with no call reaching the model. The same tape
played on a base that gained a test ends ``tape_diverged``, naming the call
and showing the difference: the file the agent read, or (Claude Code) the
commit it lists.

Where the live test of the same agent passed earlier in the session, the
project is registered on its repository and environment share group
(``calc_projects``): the tape replays copy no install and run no setup.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from replayhub import agents, services
from replayhub.agents.profile import HOME_FILES
from replayhub.ingest.tokens import token_issue
from replayhub.models import ModelCall, Replay, Run
from tests.agents import fakemodels
from tests.agents.groups import by_agent
from tests.agents.test_live_replays import (
    AGENTS,
    PROMPT,
    TESTS,
    calc_repo,
    explain,
    need_cli,
    register,
    share_group,
)
from tests.hostclis import host_cli

GOOD = "def add(a, b):\n    return a + b\n"
ADDED = "\n\ndef test_add_zero():\n    assert add(0, 0) == 0\n"
REAL_KEY = "sk-the-developers-own-key"
RECORD_SECONDS = int(os.environ.get("RECORD_SECONDS", "300"))
# Every wire the recorder forwards, by the fake model serving it.
UPSTREAM_FLAGS = {
    fakemodels.ANTHROPIC: "--anthropic-upstream",
    fakemodels.RESPONSES: "--openai-upstream",
    fakemodels.CHAT: "--openai-upstream",
    fakemodels.GEMINI: "--gemini-upstream",
}


def typed_command(name: str, cli: Path, model: str, home: Path) -> list[str]:
    """What a developer types after ``--``: the CLI by its name, headless,
    the prompt on its command line, its files in their HOME."""
    profile = agents.PROFILES[name]
    flags = [
        word.replace(HOME_FILES, str(home))
        for word in profile.flags(profile.version, model, {})
    ]
    if name == "codex":
        # The provider flags are the recorder's to add.
        cut = flags.index("-c")
        return [str(cli), *flags[:cut], "-c", "analytics.enabled=false", PROMPT]
    if name == "claude-code":
        return [str(cli), "-p", PROMPT, *flags[1:]]
    if name == "aider":
        return [str(cli), *flags, "--message", PROMPT]
    if name == "gemini-cli":
        return [str(cli), *flags, f"--prompt={PROMPT}"]
    return [str(cli), *flags, f"--task={PROMPT}"]


def developer_env(home: Path, token: str, name: str) -> dict[str, str]:
    # Not the test process's TZ (Django sets it): a developer's shell seldom
    # has one, and Codex reads the zone from /etc/localtime regardless.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_", "GIT_"))
        and not k.startswith("REPLAYHUB_")
        and k != "TZ"
    }
    env.update(
        HOME=str(home),
        PATH="/usr/local/bin:/usr/bin:/bin",
        GIT_CONFIG_NOSYSTEM="1",
        ANTHROPIC_API_KEY=REAL_KEY,
        OPENAI_API_KEY=REAL_KEY,
        GEMINI_API_KEY=REAL_KEY,
        REPLAYHUB_TOKEN=token,
        # Claude Code refuses to skip its permission prompts as root elsewhere.
        IS_SANDBOX="1",
    )
    env.update(agents.PROFILES[name].environment())
    return env


def record(
    name: str, tmp_path: Path, repo, recorder: Path, server: str, project, fake
) -> Run:
    profile = agents.PROFILES[name]
    _, model, _, _ = AGENTS[name]
    cli = host_cli(name)
    home = tmp_path / "home"
    home.mkdir()
    for relative, text in profile.home_files(model).items():
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(text)
    checkout = tmp_path / "work" / "calc"
    subprocess.run(["git", "clone", "-q", str(repo.path), str(checkout)], check=True)
    token = token_issue(project=project)[1]
    argv = [sys.executable, str(recorder), "--server", server, "--project", "calc"]
    argv += ["--prompt", PROMPT, "--model", model]
    argv += [UPSTREAM_FLAGS[fake.wire], fake.base_url, "--"]
    try:
        done = subprocess.run(
            argv + typed_command(name, cli, model, home),
            cwd=checkout,
            env=developer_env(home, token, name),
            capture_output=True,
            text=True,
            timeout=RECORD_SECONDS,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as late:
        heard = [
            (len(r["body"].get("tools") or []), fake.turn(r["body"]))
            for r in fake.requests
        ][:40]
        raise AssertionError(
            f"the recording took over {RECORD_SECONDS} s; "
            f"the model heard (tools, turn): {heard}\n"
            f"{(late.stderr or b'')[-3000:]!r}\n{(late.stdout or b'')[-3000:]!r}"
        ) from None
    assert done.returncode == 0, done.stderr[-3000:]
    assert fake.requests, done.stderr[-3000:]
    return Run.objects.filter(project=project).latest("pk")


def divergence(replay: Replay) -> str:
    """The tape's difference for a failing assertion: each changed line
    around where it first differs from the one it replaced."""
    found = (replay.evidence.get("tape") or {}).get("divergence") or {}
    lines = str(found.get("diff", "")).splitlines()
    removed = [x for x in lines if x.startswith("-") and not x.startswith("---")]
    added = [x for x in lines if x.startswith("+") and not x.startswith("+++")]
    shown = []
    for old, new in zip(removed, added, strict=False):
        old, new = old[1:], new[1:]
        at = next(
            (i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b),
            min(len(old), len(new)),
        )
        start = max(0, at - 120)
        shown += [f"-…{old[start : at + 200]}", f"+…{new[start : at + 200]}"]
    return f"\n--- tape divergence at call {found.get('call')}:\n" + "\n".join(shown)


def tape_replay(run: Run) -> Replay:
    created = services.replay_create(run=run, trigger="command", tier="tape")
    services.replay_execute(replay_id=created.pk)
    return Replay.objects.get(pk=created.pk)


def drifted(run: Run, repo) -> Run:
    """The same record on a base whose test file has since gained a test:
    what the agent reads of it is not what its tape heard."""
    repo.checkout("main")
    base = repo.commit({"test_calc.py": TESTS + ADDED}, "tests: add test_add_zero")
    return Run.objects.create(
        project=run.project,
        external_id=f"{run.external_id}-drifted",
        prompt=run.prompt,
        model=run.model,
        provider=run.provider,
        base_sha=base,
        original_commit=run.original_commit,
        raw=run.raw,
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "name", by_agent("claude-code", "codex", "aider", "mini-swe-agent", "gemini-cli")
)
def test_a_recorded_real_agent_replays_from_its_own_tape_until_its_base_changes(
    name, tmp_path, fakes, index, live_server, recorder, calc_projects
):
    need_cli(name)
    wire, model, builder, options = AGENTS[name]
    fake = fakes[wire]
    if name in calc_projects:
        repo, group = calc_projects[name]
        base = repo.rev("main")
    else:
        repo, base, _ = calc_repo(tmp_path, index)
        group = share_group(name)
    project = register(name, repo, fake, index, group)
    read = "test_calc.py"
    reads = getattr(fakemodels, f"{builder}_reads")(read, model)
    writes = getattr(fakemodels, f"{builder}_writes")("calc.py", GOOD, model)
    fake.script(reads + writes, **options)
    run = record(name, tmp_path, repo, recorder, live_server.url, project, fake)
    assert run.base_sha == base and run.original_commit
    assert run.raw["surroundings"]["cwd"] == str(tmp_path / "work" / "calc")
    heard = len(fake.requests)

    played = tape_replay(run)

    assert (played.verdict, played.reason_code) == ("identical", "same_tree"), explain(
        played
    ) + divergence(played)
    assert len(fake.requests) == heard, "a tape replay reached the model"
    assert played.evidence["tape"]["source"] == "the run's record"
    calls = ModelCall.objects.filter(replay=played)
    assert calls and all(c.status == "200" for c in calls)

    again = tape_replay(drifted(run, repo))

    assert (again.verdict, again.reason_code) == ("inconclusive", "tape_diverged"), (
        explain(again)
    )
    found = again.evidence["tape"]["divergence"]
    assert f"call {found['call']}'s request differs" in again.reason
    assert "test_add_zero" in found["diff"], found["diff"][-3000:]
    # An agent that retries the refused call (mini-swe-agent's litellm does,
    # for minutes) is ended after the project's grace, not at its time limit.
    assert again.sandbox_seconds < project.time_limit_seconds / 2, again.reason
    assert len(fake.requests) == heard, "a tape replay reached the model"
