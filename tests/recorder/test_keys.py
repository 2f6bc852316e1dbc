"""No key leaves the developer's machine in a run, and the agent gets no token.

The real recorder runs an agent that prints its environment and the key it
was given on its command line, and calls a stand-in model that echoes the key
in its error body (as it is, percent-encoded and in base64). The key, the
SDK key of the environment and the ingest token are then nowhere a scrub would
find them: not in the spool, the posted record, its tape, the run's page or
the API's answer; and the agent's environment held neither the token's
default variable nor the one ``--token-env`` named. A key of a known shape
the recorder never saw is masked by the server as it imports the record."""

from __future__ import annotations

import base64
import json
import secrets
import sys
import urllib.parse
from pathlib import Path

import pytest
from django.urls import reverse

from replayhub.demo.model_api import REAL_KEY
from replayhub.recorder.endpoint import RecordingEndpoint
from replayhub.recorder.record import agent_env
from replayhub.recorder.scrub import KeyScrub
from tests.factories import make_user
from tests.recorder.conftest import LocalHost, World, read_spool, spooled
from tests.recorder.test_spool import closed_port

pytestmark = pytest.mark.services

# A key of no known shape: only the recorder, which forwarded it, can know it.
KEY = "k9-" + secrets.token_hex(20)
TOKEN_ENV = "SHOP_INGEST_TOKEN"
AGENT = """
import json, os, sys, urllib.error, urllib.request

key = sys.argv[sys.argv.index("--api-key") + 1]
print("my key is", key)
for name, value in sorted(os.environ.items()):
    print(f"env {name}={value}")
ask = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
request = urllib.request.Request(
    os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
    json.dumps(ask).encode(),
    {"x-api-key": key, "content-type": "application/json"},
)
try:
    urllib.request.urlopen(request, timeout=30)
except urllib.error.HTTPError as error:
    print("the model said", error.code, error.read().decode())
"""


def echo_key(headers: dict[str, str]) -> dict[str, object]:
    """An upstream's 401 that names the key it got, three ways."""
    key = headers.get("x-api-key", "")
    return {
        "type": "error",
        "error": {
            "type": "authentication_error",
            "message": f"invalid x-api-key: {key}",
            "echo": urllib.parse.quote(f"key={key}", safe=""),
            "debug": base64.b64encode(f"x-api-key: {key}".encode()).decode(),
        },
    }


def nothing_to_mask(text: str, *keys: str) -> bool:
    return KeyScrub(keys).text(text) == text


def test_no_key_or_token_is_in_the_spool_the_record_its_page_or_the_api(
    world: World, tmp_path: Path, client
):
    agent = tmp_path / "printenv_agent.py"
    agent.write_text(AGENT)
    env = world.env(**{TOKEN_ENV: world.token}, REPLAYHUB_TOKEN=world.token)
    keys = (KEY, REAL_KEY, world.token)
    with LocalHost(401, reply=echo_key) as model:
        argv = [sys.executable, str(world.recorder), "--project", "shop"]
        argv += ["--server", f"http://127.0.0.1:{closed_port()}"]
        argv += ["--token-env", TOKEN_ENV, "--prompt", "Say hi"]
        argv += ["--anthropic-upstream", model.url]
        argv += ["--", sys.executable, str(agent), "--api-key", KEY]
        recorded = world.call(argv, env=env)

    assert recorded.returncode == 75, recorded.stderr
    # The agent ran with its key, which went up to the model and came back.
    assert f"my key is {KEY}" in recorded.stdout
    assert f"invalid x-api-key: {KEY}" in recorded.stdout
    assert model.received[0][2]["x-api-key"] == KEY
    # Its environment held the SDK's key, and no ingest token under any name.
    assert f"env ANTHROPIC_API_KEY={REAL_KEY}" in recorded.stdout
    assert f"env {TOKEN_ENV}=" not in recorded.stdout
    assert "env REPLAYHUB_TOKEN=" not in recorded.stdout
    assert world.token not in recorded.stdout

    (path,) = spooled(world)
    assert nothing_to_mask(path.read_text(), *keys)
    record = read_spool(path)["record"]
    assert record["agent"]["command"][-2:] == ["--api-key", "[redacted]"]
    assert "my key is [redacted]" in record["output"]
    (entry,) = record["tape"]
    assert entry["status"] == 401
    assert entry["response"]["error"]["message"] == "invalid x-api-key: [redacted]"

    send = [sys.executable, str(world.recorder), "--send", str(path)]
    sent = world.call([*send, "--server", world.server], env=env)
    assert sent.returncode == 0, sent.stderr
    run = world.stored(record["external_id"])
    assert run.output == record["output"]
    client.force_login(make_user("rita", "reviewer"))
    page = client.get(reverse("reviews:run_detail", args=[run.pk]))
    api = client.get(f"/api/v1/runs/{run.pk}")
    assert page.status_code == api.status_code == 200
    assert "[redacted]" in page.content.decode()
    for text in (str(run.record), page.content.decode(), api.content.decode()):
        assert nothing_to_mask(text, *keys)


def test_the_agent_gets_no_ingest_token_under_either_name(monkeypatch):
    monkeypatch.setenv("REPLAYHUB_TOKEN", "rhi_default_token_value")
    monkeypatch.setenv(TOKEN_ENV, "rhi_named_token_value")
    monkeypatch.setenv("ANTHROPIC_API_KEY", REAL_KEY)
    with RecordingEndpoint({"anthropic": "http://x", "openai": "http://x"}) as end:
        env = agent_env(end, token_env=TOKEN_ENV, task_id="run-1")
    assert "REPLAYHUB_TOKEN" not in env and TOKEN_ENV not in env
    # What the agent needs is all there: its key, its endpoint, its task.
    assert env["ANTHROPIC_API_KEY"] == REAL_KEY
    assert env["ANTHROPIC_BASE_URL"] == end.base_urls()["ANTHROPIC_BASE_URL"]
    assert env["REPLAYHUB_TASK_ID"] == "run-1"


def test_a_key_the_recorder_never_saw_is_masked_by_its_shape_on_import(world: World):
    # Made here: a key of Anthropic's shape that no call carried and no
    # variable holds, so only the server's import can mask it.
    shaped = "sk-ant-api03-" + secrets.token_urlsafe(70)
    argv = [sys.executable, str(world.recorder), "--server", world.server]
    argv += ["--project", "shop", "--prompt", "Nothing to do"]
    argv += ["--", sys.executable, str(world.agent), "noop", "--api-key", shaped]
    recorded = world.call(argv)
    assert recorded.returncode == 0, recorded.stderr
    run = world.stored(recorded.run_id)
    assert run.record["agent"]["command"][-2:] == ["--api-key", "[redacted]"]
    assert shaped not in str(run.record)


def test_a_run_spooled_by_an_older_recorder_is_masked_as_it_is_sent(world: World):
    recorded = world.record(server=f"http://127.0.0.1:{closed_port()}")
    assert recorded.returncode == 75, recorded.stderr
    (path,) = spooled(world)
    delivery = read_spool(path)
    delivery["record"]["output"] = f"ANTHROPIC_API_KEY={REAL_KEY}"
    path.write_text(json.dumps(delivery))

    sent = world.send("--send", str(path), "--server", world.server)
    assert sent.returncode == 0, sent.stderr
    run = world.stored(delivery["record"]["external_id"])
    assert run.output == "ANTHROPIC_API_KEY=[redacted]"
