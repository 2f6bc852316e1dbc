"""JSON too deep for what comes after the gateway: a request is refused in the
API's own shape before it goes up, and kept; an answer, a stream event or a
tape entry is read within the bounds or kept as text, never a crash."""

from __future__ import annotations

import json

import pytest

from replayhub.gateway import tape, wire
from replayhub.gateway.playback import Capture, TapeRecorder
from replayhub.lib.boundedjson import MAX_DEPTH
from tests.gateway.client import (
    CHAT,
    MESSAGES,
    PLACEHOLDER,
    agent,
    anthropic_headers,
    call,
    chat_body,
    messages_body,
    openai_headers,
)


def padded(body: bytes, levels: int) -> bytes:
    """``body`` with a ``pad`` member nested ``levels`` arrays deep (the
    body's own object makes it one level deeper)."""
    return body[:-1] + b', "pad": ' + b"[" * levels + b"]" * levels + b"}"


@pytest.mark.parametrize("levels", [MAX_DEPTH, 700, 5_000, 50_000])
def test_a_deep_anthropic_request_is_refused_in_its_shape_before_going_up(
    gateway, upstream, levels
):
    status, headers, body = call(
        agent(gateway),
        "POST",
        MESSAGES,
        padded(messages_body("hello"), levels),
        anthropic_headers(PLACEHOLDER),
    )

    assert status == 400
    assert headers["x-should-retry"] == "false"
    assert json.loads(body) == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "the gateway does not forward this request: the JSON "
            f"nests deeper than {MAX_DEPTH} levels",
        },
    }
    assert upstream.received == []
    [kept] = gateway.calls
    assert (kept.status, kept.http_status, kept.endpoint) == (
        "refused",
        400,
        "/v1/messages",
    )
    assert kept.model_requested is None
    assert "nests deeper than 100 levels" in kept.error


def test_a_deep_openai_request_is_refused_in_its_shape(gateway, upstream):
    status, _, body = call(
        agent(gateway),
        "POST",
        CHAT,
        padded(chat_body("hello"), 700),
        openai_headers(PLACEHOLDER),
    )

    assert status == 400
    error = json.loads(body)["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].endswith(f"nests deeper than {MAX_DEPTH} levels")
    assert upstream.received == []
    assert [(c.status, c.http_status) for c in gateway.calls] == [("refused", 400)]


def test_a_request_at_the_bound_goes_up_and_the_connection_stays_usable(
    gateway, upstream
):
    conn = agent(gateway)
    headers = anthropic_headers(PLACEHOLDER)
    at_bound = padded(messages_body("one"), MAX_DEPTH - 1)
    past = padded(messages_body("two"), MAX_DEPTH)

    statuses = [call(conn, "POST", MESSAGES, b, headers)[0] for b in (past, at_bound)]

    assert statuses == [400, 200]
    assert len(upstream.received) == 1
    assert [c.http_status for c in gateway.calls] == [400, 200]


def test_a_refused_deep_call_is_not_on_the_tape_and_the_tape_reads(
    make_gateway, upstream
):
    recorder = TapeRecorder()
    gateway = make_gateway(recorder=recorder)
    conn = agent(gateway)
    headers = anthropic_headers(PLACEHOLDER)
    call(conn, "POST", MESSAGES, padded(messages_body("deep"), 700), headers)
    call(conn, "POST", MESSAGES, messages_body("plain"), headers)

    exchanges, truncated = recorder.exchanges()

    assert not truncated
    [kept] = exchanges
    assert kept.request["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "plain"}]}
    ]


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_an_answer_too_deep_to_read_is_kept_as_its_text():
    answer = ('{"content": ' + nested(5_000) + "}").encode()
    capture = Capture("anthropic", "/v1/messages", messages_body("hi"), limit=10**7)
    capture.feed(answer)
    capture.status = 200

    exchange = capture.exchange()

    assert exchange.response == answer.decode()
    assert exchange.request["messages"][0]["content"][0]["text"] == "hi"


def test_a_request_too_deep_to_read_is_kept_on_a_tape_as_its_text():
    body = padded(messages_body("hi"), 5_000)
    normalised = tape.normalise_bytes("anthropic", "/v1/messages", body)
    assert normalised["body"] == body.decode()


def test_the_meter_reads_no_usage_from_an_answer_too_deep_and_does_not_fail():
    meter = wire.UsageMeter("anthropic", streaming=False)
    meter.feed(('{"usage": {"input_tokens": 5}, "x": ' + nested(5_000) + "}").encode())
    assert meter.finish().input_tokens is None

    stream = wire.UsageMeter("anthropic", streaming=True)
    stream.feed(b"data: " + nested(5_000).encode() + b"\n\n")
    stream.feed(b'data: {"type": "message_delta", "usage": {"output_tokens": 3}}\n\n')
    assert stream.finish().output_tokens == 3


def test_a_record_tape_deeper_than_python_recursion_is_normalised():
    marked = {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}
    request: dict = {"messages": [{"role": "user", "content": [marked]}]}
    deep: list = []
    for _ in range(20_000):
        deep = [deep]
    request["tools"] = deep
    entry = {
        "provider_kind": "anthropic",
        "path": "/v1/messages",
        "request": request,
        "response": {"content": [{"type": "text", "text": "hello"}]},
        "status": 200,
    }

    [exchange] = tape.from_record_tape([entry])

    assert exchange.request["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    ]
    assert exchange.request["tools"] is not deep
    level, levels = exchange.request["tools"], 0
    while level:
        level, levels = level[0], levels + 1
    assert levels == 20_000


def test_cache_markers_are_dropped_at_every_depth_and_order_kept():
    value = {
        "b": [{"cache_control": 1, "x": [{"cache_control": 2, "y": 3}]}],
        "a": {"cache_control": 4, "z": [[{"cache_control": 5}]]},
    }
    cleaned = tape.normalise("anthropic", "/v1/messages", value)
    assert list(cleaned) == ["kind", "endpoint", "b", "a"]
    assert cleaned["b"] == [{"x": [{"y": 3}]}]
    assert cleaned["a"] == {"z": [[{}]]}
    assert value["b"][0]["cache_control"] == 1  # the input is left as it was
