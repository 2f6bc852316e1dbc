"""The gateway over its unix socket, in front of the fake provider: calls
forwarded, streamed and metered; the socket's life."""

from __future__ import annotations

import json
import os
import select
import stat
import threading
import time
from decimal import Decimal

import pytest

from replayhub.demo.model_api import REAL_KEY
from replayhub.gateway import Caps, MeteredCall, ModelGateway, Upstream
from tests.conftest import wait_for
from tests.gateway.client import (
    CHAT,
    MESSAGES,
    PLACEHOLDER,
    agent,
    anthropic_headers,
    ask_claude,
    ask_gpt,
    call,
    chat_body,
    events,
    messages_body,
    openai_headers,
)
from tests.gateway.conftest import PRICES, providers

# Forwarding and metering


def test_an_anthropic_call_is_forwarded_with_the_real_key_and_metered(
    gateway, upstream
):
    status, _, body = ask_claude(gateway, "hello there world")

    assert status == 200
    reply = json.loads(body)
    assert reply["content"][0]["text"] == "hello there world"
    (received,) = upstream.received
    assert received.path == "/v1/messages"
    assert received.header("x-api-key") == REAL_KEY
    assert received.header("anthropic-version") == "2023-06-01"
    assert received.header("Accept-Encoding") == "identity"
    assert received.header("Authorization") is None
    (record,) = gateway.calls
    assert record.provider == "claude"
    assert record.kind == "anthropic"
    assert record.endpoint == "/v1/messages"
    assert record.model_requested == record.model_answered == "claude-test"
    # "be brief" + "hello there world" in, the echo out.
    assert (record.input_tokens, record.output_tokens, record.cached_tokens) == (
        5,
        3,
        0,
    )
    assert record.cost_usd == (5 * Decimal(3) + 3 * Decimal(15)) / 1_000_000
    assert (record.status, record.http_status, record.error) == (200, 200, "")
    assert not record.streamed and record.first_byte_ms is None
    assert record.latency_ms > 0 and record.started_at.tzinfo is not None


def test_an_openai_call_is_forwarded_with_the_real_key_and_metered(gateway, upstream):
    upstream.cached_tokens = 2
    status, _, body = ask_gpt(gateway, "one two three four")

    assert status == 200
    assert json.loads(body)["choices"][0]["message"]["content"] == "one two three four"
    (received,) = upstream.received
    assert received.path == "/v1/chat/completions"
    assert received.header("Authorization") == f"Bearer {REAL_KEY}"
    assert received.header("x-api-key") is None
    (record,) = gateway.calls
    assert (record.provider, record.kind, record.endpoint) == (
        "gpt",
        "openai",
        "/chat/completions",
    )
    assert (record.input_tokens, record.output_tokens, record.cached_tokens) == (
        6,
        4,
        2,
    )
    assert record.cost_usd == (6 * Decimal(2) + 4 * Decimal(8)) / 1_000_000


def test_the_upstream_never_sees_the_placeholder(gateway, upstream):
    ask_claude(gateway)
    ask_gpt(gateway, stream=True)
    ask_claude(gateway, stream=True)

    assert len(upstream.received) == 3
    for received in upstream.received:
        assert PLACEHOLDER not in repr(received.headers)
        assert PLACEHOLDER.encode() not in received.body


def test_an_anthropic_stream_passes_through_before_it_ends(gateway, upstream):
    upstream.hold = threading.Event()
    conn = agent(gateway)
    conn.request(
        "POST",
        MESSAGES,
        messages_body("a b c", stream=True),
        anthropic_headers(PLACEHOLDER),
    )
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader("Content-Type").startswith("text/event-stream")

    # The upstream holds the rest of its stream until the first event is seen.
    first = response.read1(65536)
    assert first.startswith(b"event: message_start\n")
    assert gateway.calls == []
    upstream.hold.set()
    body = first + response.read()

    kinds = [event["type"] for event in events(body)]
    assert kinds[0] == "message_start" and kinds[-2:] == [
        "message_delta",
        "message_stop",
    ]
    text = "".join(
        e["delta"]["text"] for e in events(body) if e["type"] == "content_block_delta"
    )
    assert text == "a b c "
    (record,) = gateway.calls
    assert record.streamed
    assert (record.input_tokens, record.output_tokens) == (5, 3)
    assert record.cost_usd == (5 * Decimal(3) + 3 * Decimal(15)) / 1_000_000
    assert record.first_byte_ms is not None and record.first_byte_ms < record.latency_ms


def test_an_openai_stream_passes_through_and_asks_for_usage(gateway, upstream):
    upstream.hold = threading.Event()
    conn = agent(gateway)
    conn.request(
        "POST", CHAT, chat_body("x y", stream=True), openai_headers(PLACEHOLDER)
    )
    response = conn.getresponse()
    first = response.read1(65536)
    assert b'"role": "assistant"' in first
    upstream.hold.set()
    body = first + response.read()

    assert json.loads(upstream.received[0].body)["stream_options"] == {
        "include_usage": True
    }
    chunks = events(body)
    assert (
        "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1])
        == "x y "
    )
    # The usage chunk the gateway asked for reaches the agent too.
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 2
    assert body.endswith(b"data: [DONE]\n\n")
    (record,) = gateway.calls
    assert (record.streamed, record.input_tokens, record.output_tokens) == (True, 4, 2)
    assert record.cost_usd == (4 * Decimal(2) + 2 * Decimal(8)) / 1_000_000


def test_stream_events_arrive_as_the_upstream_sends_them(gateway, upstream):
    upstream.event_delay = 0.05
    conn = agent(gateway)
    conn.request(
        "POST",
        CHAT,
        chat_body("one two three", stream=True),
        openai_headers(PLACEHOLDER),
    )
    response = conn.getresponse()
    arrivals = []
    while piece := response.read1(65536):
        arrivals.append((time.perf_counter(), piece))

    # Six events 50 ms apart arrive in pieces spread over the stream, not at once.
    assert len(arrivals) >= 5
    assert arrivals[-1][0] - arrivals[0][0] >= 0.2


def test_a_slow_first_byte_is_measured(gateway, upstream):
    upstream.first_byte_delay = 0.2
    ask_claude(gateway, stream=True)

    (record,) = gateway.calls
    assert record.first_byte_ms is not None and record.first_byte_ms >= 200


def test_the_model_that_answered_is_recorded_and_priced(gateway, upstream):
    upstream.answer_model = "claude-other"
    _, _, body = ask_claude(gateway, "a b")
    ask_claude(gateway, "a b", stream=True)

    assert json.loads(body)["model"] == "claude-other"
    for record in gateway.calls:
        assert (record.model_requested, record.model_answered) == (
            "claude-test",
            "claude-other",
        )
        assert record.cost_usd == (4 * Decimal(1) + 2 * Decimal(5)) / 1_000_000


def test_a_model_without_a_price_costs_unknown(gateway, upstream):
    upstream.answer_model = "mystery"
    call(
        agent(gateway),
        "POST",
        CHAT,
        chat_body("a", model="mystery"),
        openai_headers(PLACEHOLDER),
    )

    (record,) = gateway.calls
    assert record.input_tokens == 3 and record.cost_usd is None


def test_count_tokens_and_models_pass_without_being_metered_as_use(gateway, upstream):
    conn = agent(gateway)
    status, _, body = call(
        conn,
        "POST",
        "/claude/v1/messages/count_tokens",
        messages_body("a b c"),
        anthropic_headers(PLACEHOLDER),
    )
    assert (status, json.loads(body)) == (200, {"input_tokens": 5})
    status, _, _ = call(
        conn, "GET", "/claude/v1/models", None, anthropic_headers(PLACEHOLDER)
    )
    assert status == 200
    status, _, _ = call(
        conn, "GET", "/gpt/v1/models", None, openai_headers(PLACEHOLDER)
    )
    assert status == 200

    assert [c.endpoint for c in gateway.calls] == [
        "/v1/messages/count_tokens",
        "/v1/models",
        "/models",
    ]
    assert all(c.input_tokens is None and c.cost_usd is None for c in gateway.calls)
    assert gateway.totals.tokens == 0 and gateway.totals.requests == 3


def test_one_connection_carries_many_calls_of_both_kinds(gateway, upstream):
    conn = agent(gateway)
    for i in range(5):
        status, _, _ = call(
            conn,
            "POST",
            MESSAGES,
            messages_body(f"n {i}"),
            anthropic_headers(PLACEHOLDER),
        )
        assert status == 200
        status, _, body = call(
            conn,
            "POST",
            CHAT,
            chat_body(f"m {i}", stream=True),
            openai_headers(PLACEHOLDER),
        )
        assert status == 200 and body.endswith(b"data: [DONE]\n\n")
    assert len(gateway.calls) == 10
    assert gateway.totals.tokens == 5 * (4 + 2) + 5 * (4 + 2)


def test_an_openai_agent_without_v1_and_an_upstream_without_v1_still_meet(
    make_gateway, upstream
):
    gateway = make_gateway(
        upstreams=[Upstream("local", "openai", upstream.base_url, "")]
    )
    upstream.key = ""  # a local server that takes no key
    status, _, _ = call(
        agent(gateway),
        "POST",
        "/local/chat/completions",
        chat_body("hi"),
        {"Authorization": f"Bearer {PLACEHOLDER}"},
    )

    assert status == 200
    assert upstream.received[0].path == "/v1/chat/completions"
    assert upstream.received[0].header("Authorization") is None
    assert gateway.calls[0].output_tokens == 1


def test_a_query_string_is_forwarded(gateway, upstream):
    call(
        agent(gateway),
        "POST",
        MESSAGES + "?beta=true",
        messages_body("a"),
        anthropic_headers(PLACEHOLDER),
    )
    assert upstream.received[0].path == "/v1/messages?beta=true"


def test_a_chunked_request_body_is_read(gateway, upstream):
    conn = agent(gateway)
    body = messages_body("in pieces")
    conn.putrequest("POST", MESSAGES)
    for name, value in anthropic_headers(PLACEHOLDER).items():
        conn.putheader(name, value)
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    for i in range(0, len(body), 10):
        piece = body[i : i + 10]
        conn.send(b"%x\r\n%b\r\n" % (len(piece), piece))
    conn.send(b"0\r\n\r\n")
    response = conn.getresponse()

    assert response.status == 200
    assert json.loads(response.read())["content"][0]["text"] == "in pieces"
    assert upstream.received[0].body == body


def test_a_kept_alive_connection_the_upstream_dropped_is_not_reused(gateway, upstream):
    upstream.drop_idle = True
    assert [ask_claude(gateway)[0] for _ in range(3)] == [200, 200, 200]
    assert [c.status for c in gateway.calls] == [200, 200, 200]


def test_a_call_on_a_connection_dropped_as_it_goes_out_is_retried_once(
    gateway, upstream, monkeypatch
):
    upstream.drop_idle = True
    # As if the upstream closed it just after the idle check.
    monkeypatch.setattr(select, "select", lambda *a: ([], [], []))
    assert [ask_gpt(gateway)[0] for _ in range(3)] == [200, 200, 200]
    assert len(upstream.received) == 3


# The socket


def test_the_socket_is_open_to_the_sandbox_user_and_removed_on_close(make_gateway):
    gateway = make_gateway()
    assert stat.S_IMODE(os.stat(gateway.socket_path).st_mode) == 0o666
    gateway.close()
    assert not os.path.exists(gateway.socket_path)


def test_closing_ends_a_stream_in_flight(make_gateway, upstream):
    gateway = make_gateway()
    upstream.hold = threading.Event()
    conn = agent(gateway)
    conn.request(
        "POST",
        MESSAGES,
        messages_body("a b", stream=True),
        anthropic_headers(PLACEHOLDER),
    )
    response = conn.getresponse()
    response.read1(65536)

    started = time.perf_counter()
    gateway.close()
    with pytest.raises(Exception):  # noqa: B017 - any broken-off read
        response.read()
    assert time.perf_counter() - started < 5
    upstream.hold.set()
    (record,) = gateway.calls
    assert record.status == 200 and "broke off" in record.error
    # Its usage never arrived whole: it is charged its worst case, and says so.
    assert record.usage_estimated
    assert record.input_tokens == -(-len(messages_body("a b", stream=True)) // 3)
    assert record.output_tokens == 100  # the max_tokens it asked for


def test_a_socket_path_that_exists_is_not_taken_over(socket_dir, upstream):
    path = socket_dir / "taken.sock"
    path.write_text("")
    gateway = ModelGateway(path, providers(upstream.base_url), PLACEHOLDER, Caps())
    with pytest.raises(FileExistsError):
        gateway.start()


def test_an_on_call_that_fails_does_not_break_the_agents_call(
    make_gateway, upstream, caplog
):
    def broken(record: MeteredCall) -> None:
        raise RuntimeError("database down")

    gateway = make_gateway(on_call=broken)
    assert ask_claude(gateway)[0] == 200
    assert ask_claude(gateway)[0] == 200
    # Logged by the gateway's thread, which may still be at it when the
    # agent already has its answer.
    wait_for(lambda: "database down" in caplog.text, timeout=10)


def test_prices_are_read_per_provider(make_gateway, upstream):
    gateway = make_gateway(
        upstreams=[
            Upstream("claude", "anthropic", upstream.base_url, REAL_KEY, {}),
            Upstream("gpt", "openai", upstream.base_url + "/v1", REAL_KEY, PRICES),
        ]
    )
    ask_claude(gateway)
    ask_gpt(gateway)
    assert [c.cost_usd is None for c in gateway.calls] == [True, False]
