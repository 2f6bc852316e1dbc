"""The recorder's pure parts: usage read as the replay gateway reads it, the
tape kept within the record limit, a record the server's checker takes, and
the CI variables."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from replayhub.demo.model_api import REAL_KEY, StandInProvider
from replayhub.gateway.wire import UsageMeter
from replayhub.ingest.native import check_record
from replayhub.recorder import endpoint, record

ASK = [{"role": "user", "content": "three little words"}]


def call(fake: StandInProvider, kind: str, stream: bool) -> tuple[bytes, bool]:
    """The fake provider's answer, as bytes on the wire, and whether it is SSE."""
    body: dict[str, Any] = {"model": f"{kind}-model", "messages": ASK}
    if stream:
        body["stream"] = True
    path, headers = "/v1/messages", {"x-api-key": REAL_KEY}
    if kind == "openai":
        path, headers = "/v1/chat/completions", {"Authorization": f"Bearer {REAL_KEY}"}
        if stream:
            body = json.loads(endpoint.ask_for_usage(body, json.dumps(body).encode()))
    request = urllib.request.Request(  # noqa: S310 - the fake provider
        fake.base_url + path, json.dumps(body).encode(), headers, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        sse = response.headers["Content-Type"].startswith("text/event-stream")
        return response.read(), sse


RESPONSES_STREAM = (
    b'event: response.created\ndata: {"type": "response.created", "response": '
    b'{"model": "gpt-r", "usage": null}}\n\n'
    b'event: response.output_text.delta\ndata: {"type": '
    b'"response.output_text.delta", "delta": "hi"}\n\n'
    b'event: response.completed\ndata: {"type": "response.completed", "response": '
    b'{"model": "gpt-r", "usage": {"input_tokens": 11, "output_tokens": 4, '
    b'"input_tokens_details": {"cached_tokens": 3}}}}\n\n'
)
ANTHROPIC_CACHED = (
    b'event: message_start\r\ndata: {"type": "message_start", "message": {"model": '
    b'"claude-c", "usage": {"input_tokens": 2, "cache_read_input_tokens": 30, '
    b'"cache_creation_input_tokens": 5, "output_tokens": 1}}}\r\n\r\n'
    b'event: message_delta\r\ndata: {"type": "message_delta", "usage": '
    b'{"output_tokens": 9}}\r\n\r\n'
)


def gateway_reads(kind: str, raw: bytes, stream: bool) -> tuple[Any, ...]:
    meter = UsageMeter(kind, streaming=stream)
    meter.feed(raw)
    usage = meter.finish()
    return usage.input_tokens, usage.output_tokens, usage.model


def recorder_reads(kind: str, raw: bytes, stream: bool) -> tuple[Any, ...]:
    response = endpoint.sse_events(raw) if stream else json.loads(raw)
    usage, model = endpoint.read_usage(kind, response, stream)
    assert usage is not None
    return usage["input_tokens"], usage["output_tokens"], model


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_usage_is_read_as_the_replay_gateway_reads_it(kind, stream):
    with StandInProvider(key=REAL_KEY) as fake:
        fake.cached_tokens = 1
        raw, sse = call(fake, kind, stream)
    assert sse is stream
    assert recorder_reads(kind, raw, stream) == gateway_reads(kind, raw, stream)
    assert recorder_reads(kind, raw, stream) == (3, 3, f"{kind}-model")


@pytest.mark.parametrize(
    ("kind", "raw", "expected"),
    [
        ("openai", RESPONSES_STREAM, (11, 4, "gpt-r")),
        ("anthropic", ANTHROPIC_CACHED, (37, 9, "claude-c")),
    ],
)
def test_responses_api_streams_and_cache_counts_agree_with_the_gateway(
    kind, raw, expected
):
    assert recorder_reads(kind, raw, True) == gateway_reads(kind, raw, True) == expected


def test_a_stream_without_usage_reports_none_and_keeps_the_model():
    raw = b'data: {"model": "m", "choices": [{"delta": {}}]}\n\ndata: [DONE]\n\n'
    assert endpoint.read_usage("openai", endpoint.sse_events(raw), True) == (None, "m")


def entry(n: int, size: int) -> dict[str, Any]:
    return {
        "provider_kind": "anthropic",
        "status": 200,
        "billed": True,
        "model": "claude-test",
        "usage": {"input_tokens": n, "output_tokens": 1},
        "request": {"messages": ["q" * size]},
        "response": {"content": ["a" * size * 2]},
    }


def test_the_tape_is_cut_to_the_budget_largest_responses_first():
    tape = [entry(1, 100), entry(2, 5000), entry(3, 100)]
    kept = record.cap_tape(tape, budget=7000)
    assert record._size(kept) <= 7000
    assert [e.get("truncated") for e in kept] == [None, True, None]
    assert kept[1]["response"] is None and kept[1]["request"] == tape[1]["request"]
    assert [e["usage"] for e in kept] == [e["usage"] for e in tape]
    assert tape[1]["response"] is not None  # the original is not changed


def test_requests_go_after_responses_then_the_last_entries():
    tape = [entry(n, 3000) for n in range(4)]
    kept = record.cap_tape(tape, budget=500)
    assert record._size(kept) <= 500
    assert all(e["request"] is None and e["response"] is None for e in kept)
    assert len(kept) < 4 and kept[0]["usage"]["input_tokens"] == 0
    assert record.cap_tape(tape, budget=10**6) == tape


FACTS = {
    "project": "shop",
    "external_id": "20250101T000000Z-abcd1234",
    "title": "Fix it",
    "prompt": "Fix it\x00 please",
    "started_at": "2025-01-01T00:00:00+00:00",
    "model": None,
    "base_sha": "a" * 40,
    "original_commit": "b" * 40,
    "original_branch": "refs/replayhub/runs/20250101T000000Z-abcd1234",
    "output": "done\udc80",
    "agent": {"exit_code": 0, "duration_seconds": 1.5, "command": ["agent"]},
    "ci": None,
}


def test_a_built_record_passes_the_servers_check_and_fits_the_limit():
    tape = [entry(5, 200_000), entry(7, 200_000)]
    built = record.build_record(FACTS, tape, max_bytes=300_000)
    checked = check_record(json.loads(json.dumps(built)), max_prompt_bytes=2**20)
    assert checked.usage == {"input_tokens": 12, "output_tokens": 2, "turns": 2}
    assert checked.model == "claude-test" and checked.provider == "anthropic"
    assert checked.prompt == "Fix it\ufffd please" and checked.output == "done?"
    assert "ci" not in built and built["tape"][0]["truncated"] is True
    line = json.dumps(built, ensure_ascii=False, separators=(",", ":"))
    assert len(line.encode()) <= 300_000


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {
                "GITHUB_ACTIONS": "true",
                "GITHUB_SERVER_URL": "https://github.com",
                "GITHUB_REPOSITORY": "acme/shop",
                "GITHUB_RUN_ID": "42",
            },
            {
                "provider": "github",
                "url": "https://github.com/acme/shop/actions/runs/42",
            },
        ),
        ({"GITLAB_CI": "true", "CI_JOB_URL": "https://gl/j/1"}, "gitlab"),
        ({"BUILDKITE_BUILD_URL": "https://bk/b/1"}, "buildkite"),
        ({"CIRCLE_BUILD_URL": "https://circle/1"}, "circleci"),
        ({"JENKINS_URL": "https://j/", "BUILD_URL": "https://j/b/1"}, "jenkins"),
        ({"BUILD_URL": "https://somewhere/1"}, None),
        ({"GITHUB_ACTIONS": "true"}, None),
        ({}, None),
    ],
)
def test_the_ci_job_is_named_from_the_usual_variables(env, expected):
    found = record.ci_info(env)
    if isinstance(expected, str):
        assert found is not None and found["provider"] == expected
        assert found["url"].startswith("https://")
    else:
        assert found == expected


@pytest.mark.parametrize(
    ("kind", "base", "path", "url"),
    [
        ("anthropic", "https://api.anthropic.com", "/v1/messages", "https://api.anthropic.com/v1/messages"),
        ("anthropic", "https://proxy/x/v1/", "/v1/messages", "https://proxy/x/v1/messages"),
        ("openai", "https://api.openai.com/v1", "/v1/chat/completions", "https://api.openai.com/v1/chat/completions"),
        ("openai", "http://vllm:8000/v1", "/v1/responses?x=1", "http://vllm:8000/v1/responses?x=1"),
        ("openai", "https://api.openai.com/v1", "/models", "https://api.openai.com/v1/models"),
    ],
)  # fmt: skip
def test_the_upstream_url_does_not_repeat_the_api_version(kind, base, path, url):
    assert endpoint.upstream_url(kind, base, path) == url
