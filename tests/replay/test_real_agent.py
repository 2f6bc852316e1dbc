"""A real agent CLI from PyPI (Simon Willison's ``llm``), installed by the
project's setup phase from a local index, replayed in the real sandbox
against the stand-in provider through the gateway.

``./dev test`` fetches its wheels once into ``var/wheelhouse``
(``REPLAYHUB_AGENT_WHEELS``); the test itself reaches no registry.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from replayhub import services
from replayhub.demo.model_api import StandInProvider
from replayhub.demo.pkgindex import PackageIndex, write_index
from replayhub.models import ModelCall, Provider, Replay
from tests.conftest import REQUIRE_SERVICES
from tests.factories import make_calc_project, make_calc_run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("env_cache")]

KEY_ENV = "REPLAYHUB_TEST_LLM_KEY"
PROMPT = "Say hello to the calculator."
# The agent: the CLI asked the prompt, its answer written to a file.
AGENT = [
    "sh",
    "-c",
    'LLM_USER_PATH="$PWD/.llm" llm -m gpt-4o-mini "$(cat "$REPLAYHUB_PROMPT_FILE")"'
    " > answer.txt; status=$?; rm -rf .llm; exit $status",
]


@pytest.fixture(scope="module")
def agent_index(tmp_path_factory):
    wheels = Path(os.environ.get("REPLAYHUB_AGENT_WHEELS", "var/wheelhouse"))
    found = {p.name: p.read_bytes() for p in wheels.glob("*.whl")}
    if not any(name.startswith("llm-") for name in found):
        message = f"no llm wheels in {wheels} (./dev test fetches them)"
        if REQUIRE_SERVICES:
            pytest.fail(message)
        pytest.skip(message)
    root = tmp_path_factory.mktemp("agent-index")
    write_index(root, found)
    with PackageIndex(root) as served:
        yield served


@pytest.fixture
def provider(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-llm-test-key")
    with StandInProvider(key="sk-llm-test-key") as fake:
        yield fake


@pytest.fixture
def project(calc_repo, agent_index, provider):
    project = make_calc_project(
        calc_repo,
        agent_command=AGENT,
        allowed_paths=["answer.txt", "calc.py"],
        setup_command=[
            "sh",
            "-c",
            'python3 -m venv "$REPLAYHUB_ENV_DIR" && "$REPLAYHUB_ENV_DIR/bin/pip" '
            f"install --quiet --disable-pip-version-check --index-url {agent_index.url}"
            " llm",
        ],
        setup_inputs=[],
        egress_setup=[f"127.0.0.1:{agent_index.port}"],
        setup_time_limit_seconds=300,
        time_limit_seconds=120,
        test_command=["python3", "-c", "print('1 passed, 0 failed')"],
    )
    project.providers.add(
        Provider.objects.create(
            name="stand-in",
            kind="openai",
            base_url=provider.base_url + "/v1",
            key_env=KEY_ENV,
            prices={"gpt-4o-mini": {"input": "0.15", "output": "0.6"}},
        )
    )
    return project


def replay(run) -> Replay:
    created = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=created.pk)
    return Replay.objects.get(pk=created.pk)


def test_a_real_agent_cli_replays_identically_then_meets_a_failing_provider(
    project, calc_repo, provider
):
    base = calc_repo.rev("main")
    # The stand-in echoes the prompt a word a delta (each with its space): the
    # original run's answer, as the CLI printed it.
    original = calc_repo.commit(
        {"answer.txt": PROMPT + " \n"}, "agent answer", branch="agent/llm"
    )
    calc_repo.checkout("main")
    run = make_calc_run(
        project, prompt=PROMPT, original=original, base=base, model="gpt-4o-mini"
    )

    first = replay(run)

    assert (first.verdict, first.reason_code) == ("identical", "same_tree"), (
        first.reason
    )
    calls = ModelCall.objects.filter(replay=first)
    assert [c.status for c in calls] == ["200"]
    assert calls[0].model_requested == "gpt-4o-mini" and calls[0].output_tokens > 0

    # Every call now fails upstream; the CLI retries, gives up, changes nothing.
    provider.failures = [500] * 10
    second = replay(run)

    assert (second.verdict, second.reason_code) == ("inconclusive", "provider_error")
    assert "HTTP 500" in second.reason
    assert ModelCall.objects.filter(replay=second).count() >= 1
    assert second.evidence["environment"]["cached"]
