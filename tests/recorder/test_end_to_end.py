"""From where the agent ran to a verdict, with no glue: a developer's clone of a
repository served over HTTP on 127.0.0.1, an agent on the official OpenAI SDK
run through ``replayhub-record``, and ReplayHub, whose project names that
remote by URL, fetching the pushed run and replaying it in the real sandbox
(the SDK installed there by the setup phase from a local index) to
``identical`` with the model and usage the recorder wrote down."""

from __future__ import annotations

import sys

import pytest

from replayhub import services
from replayhub.demo.model_api import REAL_KEY
from replayhub.ingest.preflight import preflight_runs
from replayhub.ingest.tokens import token_issue
from replayhub.models import ModelCall, Preflight, Project, Provider, Replay, Run
from tests.gitservers import HttpGitServer
from tests.recorder.conftest import World, make_world, sh
from tests.replay.test_real_agent import agent_index  # noqa: F401  (a fixture)

pytestmark = pytest.mark.usefixtures("env_cache", "mirror_dir")

KEY_ENV = "REPLAYHUB_TEST_RECORDED_KEY"
MODEL = "gpt-recorded"
# The same words on the developer's machine and in the sandbox: the Python of
# an environment that has the SDK (the test's own there, the setup's here).
AGENT_COMMAND = ["sh", "-c", '"$REPLAYHUB_ENV_DIR/bin/python" agent.py openai']


@pytest.fixture
def served(tmp_path, fake, live_server, agent_index, monkeypatch, recorder):  # noqa: F811
    """The developer's world with its origin behind git's HTTP backend, and a
    project registered by that URL, its agent committed in the repository."""
    world = make_world(tmp_path, fake, live_server.url, recorder)
    with HttpGitServer(tmp_path) as git_server:
        url = git_server.url(world.origin.name)
        sh(world.checkout, "remote", "set-url", "origin", url)
        # The agent is the repository's own script, as a team keeps it.
        (world.checkout / "agent.py").write_text(world.agent.read_text())
        sh(world.checkout, "add", "agent.py")
        sh(
            world.checkout,
            "-c",
            "user.name=Dev",
            "-c",
            "user.email=dev@example.com",
            "commit",
            "-qm",
            "the team's agent",
        )
        sh(world.checkout, "push", "-q", "origin", "HEAD")
        monkeypatch.setenv(KEY_ENV, REAL_KEY)
        project = Project.objects.create(
            slug="shop",
            name="shop",
            repo_path=url,
            agent_command=AGENT_COMMAND,
            test_command=["python3", "-c", "print('1 passed, 0 failed')"],
            allowed_paths=["app.py"],
            setup_command=[
                "sh",
                "-c",
                'python3 -m venv "$REPLAYHUB_ENV_DIR" && "$REPLAYHUB_ENV_DIR/bin/pip" '
                "install --quiet --disable-pip-version-check "
                f"--index-url {agent_index.url} openai",
            ],
            setup_inputs=[],
            egress_setup=[f"127.0.0.1:{agent_index.port}"],
            setup_time_limit_seconds=300,
            time_limit_seconds=120,
            sandbox_config_sha256="c" * 64,
        )
        project.providers.add(
            Provider.objects.create(
                name="fake-openai",
                kind="openai",
                base_url=fake.base_url + "/v1",
                key_env=KEY_ENV,
                prices={MODEL: {"input": "1", "output": "2"}},
            )
        )
        world.project = project
        world.token = token_issue(project=project)[1]
        yield world


def record(world: World):
    argv = [sys.executable, str(world.recorder), "--server", world.server]
    argv += ["--project", "shop", "--prompt", "Add a note to app.py"]
    argv += ["--model", MODEL, "--openai-upstream", world.fake.base_url + "/v1"]
    argv += ["--", *AGENT_COMMAND]
    # The developer's environment with the SDK: this test's own.
    return world.call(argv, env=world.env(REPLAYHUB_ENV_DIR=sys.prefix))


def test_a_recorded_run_on_a_remote_replays_to_identical_with_its_usage(served):
    before = served.state()

    recorded = record(served)

    assert recorded.returncode == 0, recorded.stderr
    # The developer's clone: the agent's edit, nothing more.
    after = served.state()
    assert (after["head"], after["branch"], after["staged"]) == (
        before["head"],
        before["branch"],
        before["staged"],
    )
    assert after["status"] == "M app.py"
    run = Run.objects.get(external_id=recorded.run_id)
    assert run.model == MODEL
    assert run.base_sha == before["head"]
    assert served.origin_ref(f"refs/replayhub/runs/{recorded.run_id}") == (
        run.original_commit
    )
    assert run.usage["input_tokens"] > 0 and run.usage["output_tokens"] > 0
    # The API left the fetch to a worker; its preflight, run here, fetches
    # the pushed ref into the server's mirror.
    preflight_runs(run_ids=[run.pk])
    run.refresh_from_db()
    assert run.preflight == Preflight.READY, run.preflight_reason
    assert served.project.mirror().missing([run.original_commit]) == []

    created = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=created.pk)
    replay = Replay.objects.get(pk=created.pk)

    assert (replay.verdict, replay.reason_code) == ("identical", "same_tree"), (
        replay.reason
    )
    calls = list(ModelCall.objects.filter(replay=replay).order_by("pk"))
    assert [c.model_requested for c in calls] == [MODEL, MODEL]
    assert sum(c.input_tokens for c in calls) == run.usage["input_tokens"]
    assert sum(c.output_tokens for c in calls) == run.usage["output_tokens"]
