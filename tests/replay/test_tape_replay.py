"""Tape replays end to end: the real sandbox, the real gateway, an agent on the
official ``openai`` SDK installed by the setup phase from a local index (and
one on the standard library speaking the Anthropic wire), the fake provider
counting its calls.

The agent asks the model the prompt, then shows it the first line of
``test_calc.py`` (its "tool output") and writes the second answer to
``answer.txt``: a base whose test file changed makes a different second
request.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from replayhub import services
from replayhub.gateway import tape
from replayhub.git.scratch import git
from replayhub.lib.fstree import remove_tree
from replayhub.models import Provider, Replay, Tape
from tests.factories import make_calc_project, make_calc_run
from tests.gitrepos import Repo
from tests.replay.test_real_agent import agent_index  # noqa: F401 -- a fixture
from tests.scripted import make_project_repo

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.usefixtures("env_cache"),
    # On one test worker, so that the module's environment is built once.
    pytest.mark.xdist_group("tape-replay"),
]

KEY_ENV = "REPLAYHUB_TEST_TAPE_KEY"
AGENT_SCRIPT = r"""
import json, os, sys, urllib.request

kind, stream = sys.argv[1], sys.argv[2] == "stream"
prompt = open(os.environ["REPLAYHUB_PROMPT_FILE"]).read()
tool = open("test_calc.py").read().splitlines()[0]


def ask_openai(messages):
    import openai

    client = openai.OpenAI(max_retries=0)
    if not stream:
        reply = client.chat.completions.create(model="gpt-test", messages=messages)
        return reply.choices[0].message.content
    chunks = client.chat.completions.create(
        model="gpt-test", messages=messages, stream=True
    )
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def ask_anthropic(messages):
    body = {"model": "claude-test", "max_tokens": 64, "messages": messages}
    if stream:
        body["stream"] = True
    request = urllib.request.Request(
        os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
        json.dumps(body).encode(),
        {
            "x-api-key": os.environ["ANTHROPIC_API_KEY"],
            "anthropic-version": "2023-06-01",
            "content-type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        data = answer.read().decode()
    if not stream:
        return json.loads(data)["content"][0]["text"]
    text = ""
    for line in data.splitlines():
        if line.startswith("data: "):
            event = json.loads(line[6:])
            if event.get("type") == "content_block_delta":
                text += event["delta"].get("text", "")
    return text


ask = ask_openai if kind == "openai" else ask_anthropic
messages = [{"role": "user", "content": prompt}]
first = ask(messages)
messages += [
    {"role": "assistant", "content": first},
    {"role": "user", "content": "notes: " + tool},
]
second = ask(messages)
open("answer.txt", "w").write(" ".join(second.split()) + "\n")
"""


@pytest.fixture(scope="module")
def first_repo(tmp_path_factory) -> Repo:
    return make_project_repo(tmp_path_factory.mktemp("first"))


@pytest.fixture
def calc_repo(first_repo, tmp_path) -> Repo:
    """A clone of the module's first repository, of the test's own: the same
    repository (its root commit) in every test, so that the environment its
    setup builds (the openai SDK from the index, most of a test's minute) is
    built once for the module, as it is once for a project's replays."""
    path = tmp_path / "project"
    git("clone", "--quiet", str(first_repo.path), str(path))
    return Repo(path)


@pytest.fixture(scope="module")
def module_env_cache():
    root = Path(django_settings.REPLAYHUB_WORK_DIR) / f"envs-{uuid.uuid4().hex[:8]}"
    yield root
    remove_tree(root)


@pytest.fixture
def env_cache(settings, module_env_cache):
    """The environment cache, the module's: kept from one test to the next."""
    settings.REPLAYHUB_ENV_CACHE_DIR = module_env_cache
    return module_env_cache


@pytest.fixture
def provider(monkeypatch):
    from replayhub.demo.model_api import StandInProvider

    monkeypatch.setenv(KEY_ENV, "sk-tape-test-key")
    with StandInProvider(key="sk-tape-test-key") as fake:
        yield fake


@pytest.fixture
def project(calc_repo, agent_index, provider):  # noqa: F811
    project = make_calc_project(
        calc_repo,
        agent_command=["python3", "-c", AGENT_SCRIPT, "openai", "plain"],
        allowed_paths=["answer.txt"],
        setup_command=[
            "sh",
            "-c",
            'python3 -m venv "$REPLAYHUB_ENV_DIR" && "$REPLAYHUB_ENV_DIR/bin/pip" '
            f"install --quiet --disable-pip-version-check --index-url {agent_index.url}"
            " openai",
        ],
        setup_inputs=[],
        egress_setup=[f"127.0.0.1:{agent_index.port}"],
        setup_time_limit_seconds=300,
        time_limit_seconds=120,
        # Each test's project shares the module's environment.
        env_share_group="tape-replay-tests",
        test_command=["python3", "-c", "print('1 passed, 0 failed')"],
    )
    for name, kind, url in (
        ("stand-in-gpt", "openai", provider.base_url + "/v1"),
        ("stand-in-claude", "anthropic", provider.base_url),
    ):
        project.providers.add(
            Provider.objects.create(name=name, kind=kind, base_url=url, key_env=KEY_ENV)
        )
    return project


def agent_for(project, kind: str, stream: bool) -> None:
    """The agent speaks ``kind``, streaming or not (its script comes in argv)."""
    project.agent_command = [
        "python3",
        "-c",
        AGENT_SCRIPT,
        kind,
        "stream" if stream else "plain",
    ]
    project.save(update_fields=["agent_command"])


def answer_commit(repo, base: str, tool_line: str, branch: str) -> str:
    repo.checkout(base)
    sha = repo.commit(
        {"answer.txt": " ".join(f"notes: {tool_line}".split()) + "\n"},
        "agent answer",
        branch=branch,
    )
    repo.checkout("main")
    return sha


def replay(run, tier: str = "agentic") -> Replay:
    created = services.replay_create(run=run, trigger="command", tier=tier)
    services.replay_execute(replay_id=created.pk)
    return Replay.objects.get(pk=created.pk)


def first_line(repo, ref: str) -> str:
    return repo.git("show", f"{ref}:test_calc.py").splitlines()[0]


@pytest.mark.parametrize(
    ("kind", "stream"),
    [("openai", False), ("openai", True), ("anthropic", False), ("anthropic", True)],
)
def test_a_live_replays_tape_replays_identically_with_no_upstream_call(
    project, calc_repo, provider, kind, stream
):
    agent_for(project, kind, stream)
    base = calc_repo.rev("main")
    original = answer_commit(
        calc_repo, base, first_line(calc_repo, base), f"agent/{kind}-{stream}"
    )
    run = make_calc_run(project, prompt="say hello", original=original, base=base)

    live = replay(run)
    assert (live.verdict, live.reason_code) == ("identical", "same_tree"), live.reason
    assert provider.calls == 2
    recorded = Tape.objects.get(replay=live)
    assert recorded.exchanges == 2 and recorded.served == 0
    assert len(recorded.digests) == 2

    played = replay(run, tier="tape")

    assert (played.verdict, played.reason_code) == ("identical", "same_tree"), (
        played.reason
    )
    assert provider.calls == 2  # nothing reached the provider
    assert "the environment and harness reproduce this run given the same model " in (
        played.reason
    )
    assert played.cost_usd == 0 and played.tokens == 0
    assert played.evidence["tape"]["served"] == 2
    assert played.evidence["tape"]["source"] == f"replay {live.pk}"
    own = Tape.objects.get(replay=played)
    assert own.served == 2
    assert [e.request for e in own.read()] == [e.request for e in recorded.read()]


def as_record(exchanges: list[tape.Exchange]) -> list[dict]:
    """Exchanges in ``replayhub-record``'s shape (plain answers)."""
    entries = []
    for e in exchanges:
        body = {k: v for k, v in e.request.items() if k not in ("kind", "endpoint")}
        prefix = "/v1" if e.kind == "openai" else ""
        entries.append(
            {
                "provider_kind": e.kind,
                "method": "POST",
                "path": prefix + e.endpoint,
                "request": body,
                "status": 200,
                "stream": False,
                "response": e.response,
                "usage": e.usage,
                "model": e.model,
            }
        )
    return entries


@pytest.fixture
def drifted(project, calc_repo, provider):
    """A run recorded on a base whose test file has since changed: its tape
    (in its record, as the recorder writes it) heard the old first line."""
    agent_for(project, "openai", True)
    base = calc_repo.rev("main")
    old_line = first_line(calc_repo, base)
    original = answer_commit(calc_repo, base, old_line, "agent/recorded")
    recorded = replay(
        make_calc_run(project, prompt="say hello", original=original, base=base)
    )
    exchanges = Tape.objects.get(replay=recorded).read()
    calc_repo.checkout("main")
    changed = calc_repo.commit(
        {
            "test_calc.py": "# the tests were rewritten\n"
            + calc_repo.git("show", f"{base}:test_calc.py")
        },
        "tests changed",
    )
    new_original = answer_commit(
        calc_repo, changed, "# the tests were rewritten", "agent/drifted"
    )
    run = make_calc_run(
        project,
        prompt="say hello",
        original=new_original,
        base=changed,
        external_id="drifted",
        raw={"tape": as_record(exchanges)},
    )
    return run, old_line


def test_a_base_whose_tool_output_changed_ends_tape_diverged_naming_the_call(
    drifted, provider
):
    run, old_line = drifted
    before = provider.calls

    played = replay(run, tier="tape")

    assert (played.verdict, played.reason_code) == ("inconclusive", "tape_diverged")
    assert "call 2's request differs" in played.reason
    divergence = played.evidence["tape"]["divergence"]
    assert divergence["call"] == 2 and divergence["why"] == "differs"
    lines = divergence["diff"].splitlines()
    assert f'-      "content": "notes: {old_line}",' in lines
    assert '+      "content": "notes: # the tests were rewritten",' in lines
    assert played.evidence["tape"]["source"] == "the run's record"
    assert provider.calls == before


def test_tape_then_live_finishes_live_from_the_first_difference(
    drifted, project, provider
):
    run, _ = drifted
    project.tape_then_live = True
    project.save(update_fields=["tape_then_live"])
    before = provider.calls

    played = replay(run, tier="tape")

    assert (played.verdict, played.reason_code) == ("identical", "same_tree"), (
        played.reason
    )
    assert "left the tape at call 2" in played.reason
    assert provider.calls == before + 1
    assert played.evidence["tape"]["divergence"]["call"] == 2
    assert [e.served for e in Tape.objects.get(replay=played).read()] == [True, False]


def test_a_live_replays_tape_is_played_when_the_records_differs_at_call_1(
    project, calc_repo, provider
):
    agent_for(project, "openai", True)
    base = calc_repo.rev("main")
    original = answer_commit(
        calc_repo, base, first_line(calc_repo, base), "agent/elsewhere"
    )
    run = make_calc_run(project, prompt="say hello", original=original, base=base)
    live = replay(run)
    assert live.verdict == "identical", live.reason
    # The record was made where the agent saw other surroundings: its call 1
    # asked something else, so it cannot serve this replay's agent.
    entries = as_record(Tape.objects.get(replay=live).read())
    entries[0]["request"]["messages"][0]["content"] = "said on a laptop"
    run.raw = {"tape": entries}
    run.save(update_fields=["raw"])
    before = provider.calls

    played = replay(run, tier="tape")

    assert (played.verdict, played.reason_code) == ("identical", "same_tree"), (
        played.reason
    )
    assert provider.calls == before  # nothing reached the provider
    evidence = played.evidence["tape"]
    assert evidence["source"] == f"replay {live.pk}"
    assert evidence["chosen"] == (
        f"replay {live.pk} was played: call 1 differs from the run's record's "
        "and matches this one's"
    )
    assert evidence["served"] == 2 and evidence["live_from"] is None
