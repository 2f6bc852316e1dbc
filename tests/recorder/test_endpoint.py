"""The recording endpoint on its own: what passes through, what the tape
keeps, and what it refuses. The fake provider is the upstream."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from replayhub.demo.model_api import REAL_KEY, StandInProvider
from replayhub.ingest.fastpath import read_record
from replayhub.recorder.endpoint import RecordingEndpoint
from replayhub.recorder.record import build_record
from tests.recorder.conftest import LocalHost
from tests.recorder.test_spool import closed_port

HI = [{"role": "user", "content": "hi"}]
ASK = {"model": "claude-test", "max_tokens": 8, "messages": HI}


@pytest.fixture
def fake() -> Iterator[StandInProvider]:
    with StandInProvider(key=REAL_KEY) as provider:
        yield provider


def endpoint(fake: StandInProvider, base: str | None = None) -> RecordingEndpoint:
    base = base or fake.base_url
    return RecordingEndpoint({"anthropic": base, "openai": base + "/v1"})


def ask(url: str, body: dict | None = None) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(  # noqa: S310 - the endpoint under test
        url, data, {"x-api-key": REAL_KEY, "Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_a_get_passes_through_and_is_taped_unbilled(fake):
    with endpoint(fake) as recording:
        base = recording.base_urls()["OPENAI_BASE_URL"]
        status, body = ask(base + "/models")
    assert status == 200 and json.loads(body)["data"][0]["id"] == "echo-1"
    (entry,) = recording.tape
    assert entry["method"] == "GET" and entry["path"] == "/v1/models"
    assert entry["billed"] is False and "usage" not in entry
    assert fake.received[0].path == "/v1/models"


def test_a_websocket_upgrade_is_refused_and_goes_nowhere(fake):
    with endpoint(fake) as recording:
        base = recording.base_urls()["OPENAI_BASE_URL"]
        request = urllib.request.Request(  # noqa: S310 - the endpoint under test
            base + "/responses",
            headers={"Upgrade": "websocket", "Connection": "Upgrade"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)  # noqa: S310
    assert refused.value.code == 403
    assert b"not WebSocket" in refused.value.read()
    assert recording.tape == [] and fake.received == []


def test_an_upstream_error_reaches_the_agent_and_the_tape(fake):
    fake.failures = [429]
    with endpoint(fake) as recording:
        status, body = ask(
            recording.base_urls()["ANTHROPIC_BASE_URL"] + "/v1/messages", ASK
        )
    assert status == 429 and json.loads(body)["error"]["message"] == "rate limited"
    (entry,) = recording.tape
    assert entry["status"] == 429 and entry["billed"] is True
    assert REAL_KEY not in json.dumps(recording.tape)


def test_an_upstream_that_is_down_is_a_502_in_the_apis_shape(fake):
    with endpoint(fake, f"http://127.0.0.1:{closed_port()}") as recording:
        url = recording.base_urls()["ANTHROPIC_BASE_URL"] + "/v1/messages"
        status, body = ask(url, ASK)
    assert status == 502 and "could not reach" in json.loads(body)["error"]["message"]
    (entry,) = recording.tape
    assert entry["status"] == 502 and "could not reach" in entry["error"]


@pytest.mark.parametrize("path", ["/wrong-secret/anthropic/v1/messages", "/"])
def test_a_path_without_the_runs_secret_is_404_and_goes_nowhere(fake, path):
    with endpoint(fake) as recording:
        port = recording.server_address[1]
        status, _ = ask(f"http://127.0.0.1:{port}{path}", ASK)
    assert status == 404
    assert recording.tape == [] and fake.received == []


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/v1/messages", 302),
        ("/v1/messages", 303),
        ("/v1/models", 301),
        ("/v1/models", 307),
    ],
)
def test_an_upstream_redirect_is_an_error_and_the_key_goes_nowhere_else(
    elsewhere, path, status
):
    with LocalHost(status, location=f"{elsewhere.url}/v1/keys") as upstream:
        recording = RecordingEndpoint(
            {"anthropic": upstream.url, "openai": upstream.url + "/v1"}
        )
        with recording:
            url = recording.base_urls()["ANTHROPIC_BASE_URL"] + path
            answered, body = ask(url, ASK if path == "/v1/messages" else None)

    assert answered == 502
    message = json.loads(body)["error"]["message"]
    assert f"answered {status}, a redirect to '{elsewhere.url}/v1/keys'" in message
    assert "not followed" in message and "stolen" not in body.decode()
    # The upstream it was set for got the key; the place it pointed to, nothing.
    (got,) = upstream.received
    assert got[2]["x-api-key"] == REAL_KEY
    assert elsewhere.received == []
    (entry,) = recording.tape
    assert entry["status"] == 502 and "a redirect to" in entry["error"]
    assert recording.keys == {REAL_KEY}


def test_a_body_nested_past_what_the_server_reads_is_taped_as_its_text(fake):
    deep = {"model": "claude-test", "max_tokens": 8, "messages": HI}
    deep["pad"] = json.loads("[" * 300 + "]" * 300)
    with endpoint(fake) as recording:
        url = recording.base_urls()["ANTHROPIC_BASE_URL"] + "/v1/messages"
        status, _ = ask(url, deep)
    assert status == 200
    (entry,) = recording.tape
    assert isinstance(entry["request"], str) and entry["request"].startswith("{")
    assert json.loads(entry["request"]) == deep
    assert entry["response"]["content"][0]["text"] == "hi"  # shallow: JSON
    # The record holding it is one the server reads.
    facts = {"project": "shop", "external_id": "deep-1", "prompt": "p"}
    facts.update(base_sha="a" * 40, started_at="2025-01-01T00:00:00+00:00")
    line = json.dumps(build_record(facts, recording.tape)).encode()
    assert read_record(line, max_prompt_bytes=2**20).raw["tape"][0]["status"] == 200
