"""The setup phase installs a project's agent profile into its environment:
the key names the profile and its version, the install comes from the
worker's agent cache in the real sandbox, and a failed install ends the
environment with a reason that says what failed."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from replayhub import agents
from replayhub.environments import build
from replayhub.gateway import access
from replayhub.git.scratch import Scratch
from replayhub.lib.fstree import remove_tree
from replayhub.models import Project
from replayhub.sandbox import get_runner
from tests.agents.test_live_replays import AGENT_CACHE, need_cli
from tests.factories import make_calc_project
from tests.scripted import make_project_repo

pytestmark = pytest.mark.django_db


def test_the_key_names_the_profile_and_version_and_custom_keys_are_unchanged():
    codex = build.setup_settings(Project(agent="codex"))
    assert codex["agent"] == "codex@0.171.0"
    older = build.setup_settings(Project(agent="codex", agent_version="0.170.0"))
    assert older["agent"] == "codex@0.170.0"
    # A project with no profile keys its environment as before.
    assert "agent" not in build.setup_settings(Project(agent="custom"))
    keys = {
        build.environment_key(
            setup_command=[], inputs={}, root="host", setup_settings=s
        )
        for s in (codex, older, build.setup_settings(Project()))
    }
    assert len(keys) == 3


@pytest.fixture
def work(settings):
    root = Path(settings.REPLAYHUB_WORK_DIR) / f"install-{uuid.uuid4().hex[:8]}"
    settings.REPLAYHUB_ENV_CACHE_DIR = root / "envs"
    settings.REPLAYHUB_AGENT_INSTALLS_DIR = ""
    yield root
    remove_tree(root)


def prepare(project: Project, repo, work: Path) -> build.Environment | None:
    scratch = Scratch(work / "scratch", repo.path)
    try:
        return build.prepare(
            project, scratch=scratch, base=repo.rev("main"), runner=get_runner()
        )
    finally:
        scratch.remove()


def test_a_profile_alone_gets_an_environment_and_a_failed_install_says_why(
    tmp_path, work, settings
):
    # An agent cache whose npm folder holds nothing: the offline install
    # finds no package, and nothing is fetched from anywhere.
    cache = work / "agents"
    (cache / "claude-code-2.1.197" / "npm").mkdir(parents=True)
    settings.REPLAYHUB_AGENT_CACHE = str(cache)
    repo = make_project_repo(tmp_path)
    project = make_calc_project(
        repo, agent="claude-code", agent_command=[], setup_command=[]
    )

    with pytest.raises(build.SetupFailed) as failed:
        prepare(project, repo, work)

    detail = failed.value.detail
    assert detail.startswith("the setup command exited with status 1")
    assert (
        "its last line: installing @anthropic-ai/claude-code@2.1.197 failed: "
        "npm error code ENOTCACHED"
    ) in detail
    assert failed.value.summary["agent"] == "claude-code@2.1.197"
    assert failed.value.attempts == []  # no registry was tried


def test_without_a_profile_or_a_setup_command_there_is_no_environment(tmp_path, work):
    repo = make_project_repo(tmp_path)
    assert prepare(make_calc_project(repo), repo, work) is None


def test_a_second_project_with_the_same_agent_gets_a_copy_of_the_install(
    tmp_path, work, settings, monkeypatch
):
    need_cli("claude-code")
    settings.REPLAYHUB_AGENT_CACHE = AGENT_CACHE
    phases = []
    run_phase = access.run_phase
    monkeypatch.setattr(
        access, "run_phase", lambda *a, **k: phases.append(1) or run_phase(*a, **k)
    )
    repo = make_project_repo(tmp_path)
    first = make_calc_project(
        repo, slug="one", agent="claude-code", agent_command=[], setup_command=[]
    )
    second = make_calc_project(
        repo, slug="two", agent="claude-code", agent_command=[], setup_command=[]
    )

    made = prepare(first, repo, work)
    assert made is not None and phases == [1]
    copied = prepare(second, repo, work)

    # No second install ran: the first one's tree was copied, and the CLI is
    # there, in an environment of its own.
    assert copied is not None and phases == [1]
    assert copied.path != made.path
    cli = copied.path / "agent" / agents.PROFILES["claude-code"].executable
    assert cli.exists()
    kept = (work / "envs" / "agent-installs").iterdir()
    assert len([p for p in kept if not p.name.startswith(".")]) == 1  # no lock
