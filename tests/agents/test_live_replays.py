"""The real agent CLIs, registered with ``--agent NAME`` and no command,
replayed live by a real Celery worker in the real sandbox against a scripted
fake model speaking each one's wire, on a real pytest project.

For Claude Code, Codex, Aider and mini-swe-agent at their pinned versions: the
original's change replays ``identical``, another correct change
``equivalent`` and a wrong one ``divergent``. Gemini CLI and OpenCode replay
once each, to a verdict.

Each agent's three replays share one project, so its environment (the CLI
installed from ``var/agents``, which ``./dev test`` fills, and pytest from a
package index on the worker's loopback) is built once and reused. The
project names an environment share group of its own; a passed test leaves
its repository and group to the recorded test of the same agent
(``calc_projects``), whose replays then find that environment built.
Measured
on two shared cores: about 7 minutes for the module, of which the two PyPI
agents' installs are about 50 s each.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from replayhub import agents
from replayhub.demo.pkgindex import PackageIndex
from replayhub.models import ModelCall, Project, Replay, Run
from tests.agents import fakemodels
from tests.agents.groups import by_agent
from tests.conftest import wait_for
from tests.gitrepos import Repo, make_repo
from tests.hostclis import cache_root

KEY_ENV = "REPLAYHUB_TEST_AGENTS_KEY"
# Set before any worker starts (collection comes first), as a deployment
# sets them on its workers.
os.environ.setdefault(KEY_ENV, "sk-fake-agents-key")
AGENT_CACHE = os.environ.setdefault("REPLAYHUB_AGENT_CACHE", str(cache_root()))
REQUIRED = os.environ.get("REPLAYHUB_REQUIRE_SANDBOX") == "1"

PROMPT = "Create calc.py with a function add(a, b) that returns a + b. Then stop."
TESTS = """from calc import add


def test_add():
    assert add(2, 3) == 5


def test_add_negative():
    assert add(-2, -3) == -5
"""
SETUP = """#!/bin/sh
set -e
python3 -m venv "$REPLAYHUB_ENV_DIR"
"$REPLAYHUB_ENV_DIR/bin/pip" install --quiet --no-cache-dir \\
  --disable-pip-version-check -r requirements-dev.txt
"""
GOOD = "def add(a, b):\n    return a + b\n"
OTHER = "def add(a, b):\n    return b + a\n"
WRONG = "def add(a, b):\n    return a - b\n"
THREE = [
    (GOOD, ("identical", "same_tree")),
    (OTHER, ("equivalent", "tests_agree")),
    (WRONG, ("divergent", "replay_fails_tests")),
]
# name: (wire, model, answers writing calc.py, fake-model options)
AGENTS = {
    "claude-code": (fakemodels.ANTHROPIC, "claude-sonnet-4-5", "claude_code", {}),
    # A model Codex knows, so it offers its apply_patch tool.
    "codex": (fakemodels.RESPONSES, "gpt-5.5", "codex", {}),
    "aider": (
        fakemodels.CHAT,
        "fake-model",
        "aider",
        {"task_marker": "Create calc.py", "tools_mark_main": False},
    ),
    "mini-swe-agent": (fakemodels.CHAT, "fake-model", "mini_swe_agent", {}),
    "opencode": (fakemodels.CHAT, "fake-model", "opencode", {}),
    "gemini-cli": (fakemodels.GEMINI, "gemini-2.5-pro", "gemini_cli", {}),
}
KINDS = {
    fakemodels.ANTHROPIC: "anthropic",
    fakemodels.RESPONSES: "openai",
    fakemodels.CHAT: "openai",
    fakemodels.GEMINI: "gemini",
}


def need_cli(name: str) -> None:
    """The profile's pinned release in the agent cache, or a skip (a failure
    where the sandbox is required: CI)."""
    profile = agents.PROFILES[name]
    folder = Path(AGENT_CACHE) / f"{name}-{profile.version}"
    message = f"{profile.spec()} is not in {AGENT_CACHE} (./dev test fetches it)"
    if (folder / ".fetched").exists():
        if name != "gemini-cli" or node_major() >= 20:
            return
        message = f"{profile.spec()} needs Node 20 or newer in /usr/bin/node"
    if REQUIRED:
        pytest.fail(message)
    pytest.skip(message)


def node_major() -> int:
    """The sandbox's Node major version (0 when there is none)."""
    try:
        found = subprocess.run(
            ["/usr/bin/node", "--version"], capture_output=True, text=True, timeout=30
        ).stdout
    except OSError:
        return 0
    return int(found.lstrip("v").split(".")[0] or 0)


def calc_repo(tmp_path: Path, index: PackageIndex) -> tuple[Repo, str, str]:
    """The pytest project: its tests and no calc.py at the base; the
    original run's commit adds the right one."""
    repo = make_repo(
        tmp_path,
        {
            "test_calc.py": TESTS,
            "setup.sh": SETUP,
            "requirements-dev.txt": f"--index-url {index.url}\npytest\n",
        },
    )
    base = repo.rev("main")
    original = repo.commit({"calc.py": GOOD}, "agent: add", branch="agent/add")
    repo.checkout("main")
    return repo, base, original


def share_group(name: str) -> str:
    """An environment share group no other project of any run names yet."""
    return f"calc-{name}-{uuid.uuid4().hex[:12]}"


def register(
    name: str, repo: Repo, fake: fakemodels.FakeModel, index, group: str = ""
) -> Project:
    """The project as an admin registers it: ``--agent NAME``, no command,
    its environment shared within ``group`` (none: its own)."""
    kind = KINDS[fake.wire]
    out = StringIO()
    call_command(
        "provider_add",
        f"fake-{fake.wire}",
        "--kind",
        kind,
        "--base-url",
        fake.base_url,
        "--key-env",
        KEY_ENV,
        stdout=out,
    )
    call_command(
        "project_add",
        "calc",
        "--repo",
        str(repo.path),
        "--agent",
        name,
        "--providers",
        f"fake-{fake.wire}",
        "--test-command",
        "python3 -m pytest -q -p no:cacheprovider",
        "--setup-command",
        "sh setup.sh",
        "--egress-setup",
        f"127.0.0.1:{index.port}",
        "--time-limit",
        "240",
        # An agent that retries a call its tape refuses is ended this soon
        # after (the default, 10 s, is for a model that may come back).
        "--cap-grace",
        "3",
        stdout=out,
    )
    project = Project.objects.get(slug="calc")
    assert project.agent_command == []
    if group:
        # As the project's settings page sets it (no command-line option).
        project.env_share_group = group
        project.save(update_fields=["env_share_group"])
    return project


def replayed(project: Project, *, original: str, base: str, model: str, n: int):
    run = Run.objects.create(
        project=project,
        external_id=f"run-{n}",
        title=f"run {n}",
        prompt=PROMPT,
        original_commit=original,
        base_sha=base,
        model=model,
        provider=project.providers.get().name,
    )
    call_command("reproduce", str(run.pk), stdout=StringIO())
    return wait_for(
        lambda: Replay.objects.filter(run=run, status="finished").first(),
        timeout=600,
        interval=0.25,
    )


def answers(name: str, content: str) -> list[dict]:
    _, model, builder, _ = AGENTS[name]
    return getattr(fakemodels, f"{builder}_writes")("calc.py", content, model)


def explain(replay: Replay) -> str:
    """What a failing assertion shows: the verdict's reason and the agent's
    own last words."""
    return f"{replay.reason}\n--- agent output:\n{replay.agent_output[-3000:]}"


def live_project(name, tmp_path_factory, fakes, index):
    """A fresh calc project for ``name`` (its environment not built yet), in
    a folder that outlives the test, for the recorded test after it."""
    need_cli(name)
    fake = fakes[AGENTS[name][0]]
    repo, base, original = calc_repo(tmp_path_factory.mktemp(f"calc-{name}"), index)
    group = share_group(name)
    project = register(name, repo, fake, index, group)
    return project, fake, (repo, group), base, original


def three_replays(name, tmp_path_factory, fakes, index, calc_projects):
    _, model, _, options = AGENTS[name]
    project, fake, shared, base, original = live_project(
        name, tmp_path_factory, fakes, index
    )
    done = []
    for n, (content, expected) in enumerate(THREE):
        fake.script(answers(name, content), **options)
        replay = replayed(project, original=original, base=base, model=model, n=n)
        assert (replay.verdict, replay.reason_code) == expected, explain(replay)
        assert fake.requests, "the agent never called the model"
        calls = ModelCall.objects.filter(replay=replay)
        assert calls and all(c.status == "200" for c in calls), list(calls)
        done.append(replay)
    environment = [r.evidence["environment"] for r in done]
    assert environment[0]["agent"] == f"{name}@{agents.PROFILES[name].version}"
    # One build for the three: the CLI is installed once.
    assert [e["cached"] for e in environment] == [False, True, True]
    calc_projects[name] = shared
    return done


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "name", by_agent("claude-code", "codex", "aider", "mini-swe-agent")
)
def test_a_real_agent_replays_identical_equivalent_and_divergent(
    name, celery_worker, tmp_path_factory, fakes, index, calc_projects
):
    done = three_replays(name, tmp_path_factory, fakes, index, calc_projects)
    # The CLI's outside traffic is off: the agent reached nothing but the
    # gateway.
    for replay in done:
        tried = replay.egress_attempts.filter(phase="agent")
        assert list(tried.values_list("host", flat=True)) == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", by_agent("gemini-cli", "opencode"))
def test_gemini_cli_and_opencode_replay_live_to_a_verdict(
    name, celery_worker, tmp_path_factory, fakes, index, calc_projects
):
    _, model, _, options = AGENTS[name]
    project, fake, shared, base, original = live_project(
        name, tmp_path_factory, fakes, index
    )
    fake.script(answers(name, GOOD), **options)

    replay = replayed(project, original=original, base=base, model=model, n=0)

    assert (replay.verdict, replay.reason_code) == ("identical", "same_tree"), explain(
        replay
    )
    # Its settings under HOME reached it: it asked for the record's model
    # (OpenCode in the body, Gemini CLI in the path).
    first = fake.requests[0]
    in_path = first["path"].rpartition("/")[2].partition(":")[0]
    assert model in (first["body"].get("model"), in_path)
    # Nothing reached outside. OpenCode still tries to install its plugin
    # package from npm in the background (no switch turns that off): refused,
    # and the run is not the worse for it.
    tried = replay.egress_attempts.filter(phase="agent")
    assert not tried.filter(allowed=True).exists()
    expected = {"registry.npmjs.org"} if name == "opencode" else set()
    assert set(tried.values_list("host", flat=True)) <= expected
    calc_projects[name] = shared


def test_the_git_status_of_a_fresh_checkout_has_no_calc(tmp_path, index):
    """The project's base has no calc.py: whatever the replay's tree holds of
    it, the agent wrote."""
    repo, _, _ = calc_repo(tmp_path, index)
    listed = subprocess.run(
        ["git", "ls-files"], cwd=repo.path, capture_output=True, text=True, check=True
    ).stdout.split()
    assert "calc.py" not in listed
