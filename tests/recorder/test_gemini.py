"""Gemini's ``generateContent`` wire through the recording endpoint (Gemini
CLI's): the call goes to the upstream with the agent's key, the answer comes
back as it streamed, and the tape holds the exchange as the replay gateway
would have taped it, billed, metered and with no key in it."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from replayhub.gateway import tape
from replayhub.gateway.wire import UsageMeter
from replayhub.recorder import endpoint
from replayhub.recorder.endpoint import RecordingEndpoint
from replayhub.recorder.scrub import KeyScrub
from tests.gateway.gemini_model import KEY, GeminiModel
from tests.gateway.test_gemini_tape import PATH, SCRIPT, cli_requests


@pytest.fixture
def model():
    with GeminiModel(SCRIPT) as fake:
        yield fake


def ask(base: str, path: str, body: bytes) -> tuple[int, str, bytes]:
    request = urllib.request.Request(  # noqa: S310 - the endpoint under test
        base + path, body, {"x-goog-api-key": KEY, "Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        return response.status, response.headers["Content-Type"], response.read()


@pytest.mark.parametrize("streamed", [True, False])
def test_a_gemini_call_is_forwarded_and_taped_as_the_gateway_tapes_it(model, streamed):
    path = (
        PATH
        if streamed
        else PATH.replace(":streamGenerateContent?alt=sse", ":generateContent")
    )
    with RecordingEndpoint({"gemini": model.base_url}) as recording:
        base = recording.base_urls()["GOOGLE_GEMINI_BASE_URL"]
        status, kind, data = ask(base, path, cli_requests("C")[0])

    assert status == 200 and kind.startswith(
        "text/event-stream" if streamed else "application/json"
    )
    assert model.calls == 1 and model.keys == [KEY]
    (entry,) = recording.tape
    assert entry["provider_kind"] == "gemini" and entry["path"] == path
    assert entry["billed"] is True and entry["stream"] is streamed
    assert entry["model"] == SCRIPT[0]["modelVersion"]
    meter = UsageMeter("gemini", streaming=streamed)
    meter.feed(data)
    read = meter.finish()
    assert entry["usage"] == {
        "input_tokens": read.input_tokens,
        "output_tokens": read.output_tokens,
    }
    assert KEY in recording.keys
    exchange = tape.from_record(entry)
    assert exchange is not None and exchange.response == SCRIPT[0]


def test_a_gemini_key_in_the_query_is_kept_to_be_masked():
    assert endpoint.query_key("/v1beta/models/m:generateContent?key=AIzaSecret123") == (
        "AIzaSecret123"
    )
    assert endpoint.query_key("/v1beta/models/m:streamGenerateContent?alt=sse") is None
    scrub = KeyScrub(["AIzaSecret123"])
    masked = scrub.text("/v1beta/models/m:generateContent?key=AIzaSecret123")
    assert "AIzaSecret123" not in masked


@pytest.mark.parametrize(
    ("path", "billed"),
    [
        ("/v1beta/models/gemini-2.5-pro:streamGenerateContent", True),
        ("/v1/models/gemini-2.5-flash:generateContent", True),
        ("/v1beta/models/gemini-2.5-pro:countTokens", False),
        ("/v1beta/models", False),
    ],
)
def test_only_gemini_generation_is_billed(path, billed):
    assert endpoint.billed("gemini", path) is billed


@pytest.mark.parametrize(
    ("base", "url"),
    [
        ("https://generativelanguage.googleapis.com", "https://generativelanguage.googleapis.com/v1beta/models/m:generateContent"),
        ("http://proxy:8080/g/v1beta/", "http://proxy:8080/g/v1beta/models/m:generateContent"),
    ],
)  # fmt: skip
def test_the_gemini_upstream_url_does_not_repeat_the_version(base, url):
    path = "/v1beta/models/m:generateContent"
    assert endpoint.upstream_url("gemini", base, path) == url


def test_another_kind_than_the_endpoints_upstreams_is_not_found(model):
    with RecordingEndpoint({"gemini": model.base_url}) as recording:
        root = recording.base_urls()["ANTHROPIC_BASE_URL"]
        request = urllib.request.Request(root + "/v1/messages", b"{}", method="POST")  # noqa: S310
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)  # noqa: S310
    assert refused.value.code == 404
    assert recording.tape == [] and model.calls == 0
