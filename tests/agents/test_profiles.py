"""Each agent profile as plain data, without a database: the argv it runs for
a version, the environment it points at the gateway for its wire, the files
it lays out under $HOME, its state paths, and how the setup phase installs it.

The launchers are run for real by ``sh`` with a stand-in CLI that writes down
what it was given, so a test sees the argv, the environment and the prompt
exactly as the agent would."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from replayhub import agents
from replayhub.agents import install
from replayhub.agents.profile import (
    HOME_FILES,
    INSTALL_DIR,
    Profile,
    version_key,
    version_problem,
)
from replayhub.environments.build import ENV_PATH
from replayhub.models import Project
from replayhub.replay.workspace import IO_DIR

PINNED = {
    "claude-code": ("npm", "@anthropic-ai/claude-code", "2.1.197", "anthropic"),
    "codex": ("npm", "@openai/codex", "0.171.0", "openai"),
    "aider": ("pypi", "aider-chat", "0.86.2", "openai"),
    "mini-swe-agent": ("pypi", "mini-swe-agent", "2.4.6", "openai"),
    "gemini-cli": ("npm", "@google/gemini-cli", "0.61.0", "gemini"),
    "opencode": ("npm", "opencode-ai", "1.18.33", "openai"),
}
# What reaches the stand-in CLI: its arguments, one a line, then its
# environment and its standard input.
RECORDER = """#!/bin/sh
for arg in "$@"; do printf 'ARG %s\\n' "$arg"; done
env | sort | sed 's/^/ENV /'
printf 'STDIN '; cat
"""


def test_a_profile_is_found_by_name_from_the_package_or_its_module():
    from replayhub.agents import profile

    assert profile.get("codex") is agents.PROFILES["codex"]
    assert profile.get("custom") is None
    with pytest.raises(KeyError):
        profile.get("cursor")


def test_every_profile_the_issue_names_is_pinned_to_its_release():
    assert ("custom", *PINNED) == agents.NAMES
    for name, (registry, package, version, kind) in PINNED.items():
        profile = agents.get(name)
        assert profile is not None
        assert (profile.registry, profile.package, profile.version) == (
            registry,
            package,
            version,
        )
        assert profile.provider_kind == kind
    assert agents.get("custom") is None


def test_the_cli_lives_in_the_environment_and_home_files_in_the_io_folder():
    assert INSTALL_DIR.startswith(ENV_PATH + "/")
    assert HOME_FILES.startswith(IO_DIR + "/")
    for profile in agents.PROFILES.values():
        assert profile.cli.startswith(INSTALL_DIR + "/")
        # Never the environment's bin/, which comes first on the tests' PATH.
        assert not profile.cli.startswith(f"{ENV_PATH}/bin/")
        # HOME is where the replay places it, never the profile's choice.
        assert "HOME" not in profile.environment()
        assert profile.launcher.startswith('mkdir -p "$HOME" && ')
        assert f'cp -R {HOME_FILES}/. "$HOME"/' in profile.launcher


@pytest.mark.parametrize(
    "version", ["2.1.197", "0.171.0", "1.0.0-beta.1", "2.4.6.post1", "1.18.33"]
)
def test_an_exact_version_is_taken(version):
    assert version_problem(version) == ""


@pytest.mark.parametrize(
    "version", ["latest", "^2.1.0", ">=1", "1.x", "", "1.0 ; rm -rf /", "1" * 65]
)
def test_a_range_a_tag_or_anything_else_is_refused(version):
    assert "is not an exact version" in version_problem(version)


def test_versions_compare_by_their_numbers():
    assert version_key("0.171.0") > version_key("0.99.9")
    assert version_key("2.1.197") == (2, 1, 197)


@pytest.mark.parametrize("name", list(PINNED))
def test_the_package_spec_and_label_follow_the_version_asked_for(name):
    profile = agents.PROFILES[name]
    pinned = profile.version
    sep = "@" if profile.registry == "npm" else "=="
    assert profile.spec() == f"{profile.package}{sep}{pinned}"
    assert profile.spec("9.9.9") == f"{profile.package}{sep}9.9.9"
    assert profile.label() == f"{name}@{pinned}"
    assert profile.label("9.9.9") == f"{name}@9.9.9"


def run_launcher(tmp_path: Path, profile: Profile, model: str, env: dict) -> dict:
    """The profile's argv run by sh, its CLI replaced by the recorder; what
    the recorder saw."""
    cli = tmp_path / "cli"
    cli.write_text(RECORDER)
    cli.chmod(0o755)
    prompt = tmp_path / "prompt.txt"
    prompt.write_text('Fix `add`; don\'t $(touch pwned) "quote".\n')
    argv = list(profile.argv(model=model))
    assert argv[:2] == ["sh", "-c"] and argv[3] == profile.cli
    argv[3] = str(cli)
    home = tmp_path / "home"
    done = subprocess.run(
        argv,
        env={
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            **profile.environment(),
            "REPLAYHUB_PROMPT_FILE": str(prompt),
            **env,
        },
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    lines = done.stdout.split("\n")
    seen = {
        "args": [line[4:] for line in lines if line.startswith("ARG ")],
        "env": dict(
            line[4:].split("=", 1) for line in lines if line.startswith("ENV ")
        ),
        "stdin": done.stdout.partition("STDIN ")[2],
    }
    assert home.is_dir()  # made before the agent starts
    assert not (tmp_path / "pwned").exists()
    return seen


GATEWAY = {
    "ANTHROPIC_BASE_URL": "http://127.0.0.1:8790/claude",
    "ANTHROPIC_API_KEY": "rh-placeholder",
    "OPENAI_BASE_URL": "http://127.0.0.1:8790/gpt/v1",
    "OPENAI_API_KEY": "rh-placeholder",
    "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:8790/gem",
    "GEMINI_API_KEY": "rh-placeholder",
}
# A hostile model name from a record: one argument, never a flag or a script.
MODEL = "m --bogus $(touch pwned) 'q'"


def test_claude_code_reads_the_prompt_on_stdin_with_non_essential_traffic_off(
    tmp_path,
):
    seen = run_launcher(tmp_path, agents.PROFILES["claude-code"], MODEL, GATEWAY)
    assert seen["args"] == [
        "-p",
        f"--model={MODEL}",
        "--dangerously-skip-permissions",
        "--output-format",
        "json",
    ]
    assert seen["stdin"].startswith("Fix `add`; don't $(touch pwned)")
    env = seen["env"]
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert env["ANTHROPIC_BASE_URL"] == GATEWAY["ANTHROPIC_BASE_URL"]
    # The test runs as root here, or not: IS_SANDBOX follows the uid.
    assert ("IS_SANDBOX" in env) == (os.geteuid() == 0)


def test_claude_code_without_a_recorded_model_asks_for_none():
    argv = agents.PROFILES["claude-code"].argv(model="")
    assert not any(arg.startswith("--model") for arg in argv)


@pytest.mark.parametrize(
    ("turns", "flag"), [(40, ["--max-turns=40"]), (None, []), (0, []), (True, [])]
)
def test_claude_code_is_told_the_projects_turn_cap(turns, flag):
    argv = agents.PROFILES["claude-code"].argv(model="m", caps={"max_turns": turns})
    assert [arg for arg in argv if arg.startswith("--max-turns")] == flag


def test_codex_gets_the_gateway_as_a_custom_responses_provider(tmp_path):
    seen = run_launcher(tmp_path, agents.PROFILES["codex"], "gpt-5.5", GATEWAY)
    args = seen["args"]
    assert args[:5] == [
        "exec",
        "--dangerously-bypass-approvals-and-sandbox",
        "--skip-git-repo-check",
        "--color",
        "never",
    ]
    assert "--full-auto" not in args
    settings = [args[i + 1] for i, arg in enumerate(args) if arg == "-c"]
    assert settings == [
        "model_provider=rh",
        "model_providers.rh.name=rh",
        "model_providers.rh.env_key=OPENAI_API_KEY",
        "model_providers.rh.wire_api=responses",
        "analytics.enabled=false",
        # Known only in the sandbox: the gateway's per-replay URL.
        "model_providers.rh.base_url=http://127.0.0.1:8790/gpt/v1",
    ]
    assert args[args.index("--disable") + 1] == "plugins"
    assert "--model=gpt-5.5" in args
    assert args[-1] == "-"  # the prompt on stdin
    assert seen["stdin"].startswith("Fix `add`")


def test_aider_reads_the_prompt_file_and_the_gateway_as_its_api_base(tmp_path):
    seen = run_launcher(tmp_path, agents.PROFILES["aider"], "coder", GATEWAY)
    args = seen["args"]
    for flag in ("--yes-always", "--no-auto-commits", "--no-gitignore"):
        assert flag in args
    assert "--model=openai/coder" in args
    assert args[args.index("--message-file") + 1] == str(tmp_path / "prompt.txt")
    assert seen["env"]["OPENAI_API_BASE"] == GATEWAY["OPENAI_BASE_URL"]
    # litellm's price-list fetch from GitHub is off.
    assert seen["env"]["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert seen["stdin"] == ""
    metadata_file = args[args.index("--model-metadata-file") + 1]
    assert metadata_file == f"{HOME_FILES}/.aider/model-metadata.json"


def test_aiders_model_metadata_under_home_names_the_model():
    files = agents.PROFILES["aider"].home_files("coder")
    metadata = json.loads(files[".aider/model-metadata.json"])
    assert metadata["openai/coder"]["max_input_tokens"] == 128000
    assert agents.PROFILES["aider"].home_files("") == {}


def test_mini_swe_agent_gets_the_prompt_as_its_task_and_no_wizard(tmp_path):
    seen = run_launcher(tmp_path, agents.PROFILES["mini-swe-agent"], "m", GATEWAY)
    args = seen["args"]
    assert args[:3] == ["-y", "--exit-immediately", "--model=openai/m"]
    assert args[3] == '--task=Fix `add`; don\'t $(touch pwned) "quote".'
    env = seen["env"]
    assert env["MSWEA_CONFIGURED"] == "true"
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert env["OPENAI_BASE_URL"] == GATEWAY["OPENAI_BASE_URL"]


def test_gemini_cli_takes_the_gateways_gemini_route_and_api_key_auth(tmp_path):
    seen = run_launcher(tmp_path, agents.PROFILES["gemini-cli"], "g-pro", GATEWAY)
    assert seen["args"][:4] == ["--model=g-pro", "--yolo", "--skip-trust", "-o"]
    assert seen["args"][-1].startswith("--prompt=Fix `add`")
    assert seen["stdin"] == ""
    env = seen["env"]
    assert env["GOOGLE_GEMINI_BASE_URL"] == GATEWAY["GOOGLE_GEMINI_BASE_URL"]
    assert env["GEMINI_API_KEY"] == "rh-placeholder"
    files = agents.PROFILES["gemini-cli"].home_files("g-pro")
    settings = json.loads(files[".gemini/settings.json"])
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["privacy"]["usageStatisticsEnabled"] is False


def test_opencode_reads_its_provider_from_a_config_under_home(tmp_path):
    seen = run_launcher(tmp_path, agents.PROFILES["opencode"], "m1", GATEWAY)
    assert seen["args"] == ["run", "--model=rh/m1", "--format=json", "--title=replay"]
    assert seen["stdin"].startswith("Fix `add`")
    assert seen["env"]["OPENCODE_DISABLE_MODELS_FETCH"] == "1"
    files = agents.PROFILES["opencode"].home_files('m1"}')
    config = json.loads(files[".config/opencode/opencode.json"])
    provider = config["provider"]["rh"]
    assert provider["options"] == {
        "baseURL": "{env:OPENAI_BASE_URL}",
        "apiKey": "{env:OPENAI_API_KEY}",
    }
    # A model name from a record is JSON data, whatever it holds.
    assert list(provider["models"]) == ['m1"}']
    assert config["model"] == 'rh/m1"}'


def test_a_profiles_state_paths_are_left_out_even_when_the_project_ignores_none():
    project = Project(agent="aider", ignored_paths=[])
    assert project.ignored_in_force == [".aider*", ".aider*/**"]
    project = Project(agent="codex", ignored_paths=[".codex/**", "notes/**"])
    assert project.ignored_in_force == [".codex/**", "notes/**"]
    assert Project(agent="custom", ignored_paths=["x/**"]).ignored_in_force == ["x/**"]


def test_a_project_names_a_profile_or_a_command_never_both():
    assert Project(agent="codex").agent_problems() == {}
    both = Project(agent="codex", agent_command=["sh", "agent.sh"])
    assert "give no agent command" in both.agent_problems()["agent_command"]
    custom = Project(agent="custom", agent_version="1.0.0")
    assert custom.agent_problems() == {
        "agent_version": "Only an agent profile has a version."
    }
    ranged = Project(agent="codex", agent_version="^0.171")
    assert "not an exact version" in ranged.agent_problems()["agent_version"]
    assert "Choose one of" in Project(agent="cursor").agent_problems()["agent"]


def test_the_install_comes_from_the_agent_cache_when_it_holds_the_release(tmp_path):
    codex = agents.PROFILES["codex"]
    (tmp_path / "codex-0.171.0" / "npm").mkdir(parents=True)
    cached = install.plan(codex, "", tmp_path)
    assert cached.cache == tmp_path / "codex-0.171.0"
    assert cached.egress == ()
    assert cached.argv[-2:] == ("@openai/codex@0.171.0", "node_modules/.bin/codex")
    # Another release is not in the cache: the registry, its hosts allowed.
    other = install.plan(codex, "0.170.0", tmp_path)
    assert (other.cache, other.egress) == (None, ("registry.npmjs.org:443",))
    assert other.argv[-2] == "@openai/codex@0.170.0"


def test_a_pypi_agent_installs_from_its_wheels_or_from_pypi(tmp_path):
    mini = agents.PROFILES["mini-swe-agent"]
    assert install.plan(mini, "", None).egress == (
        "pypi.org:443",
        "files.pythonhosted.org:443",
    )
    (tmp_path / "mini-swe-agent-2.4.6" / "wheels").mkdir(parents=True)
    plan = install.plan(mini, "", tmp_path)
    assert plan.cache is not None and plan.egress == ()
    assert plan.argv[-2:] == ("mini-swe-agent==2.4.6", "bin/mini")
    # The scripts are fixed: the package comes in as an argument.
    assert "mini-swe-agent" not in plan.argv[2]
