"""The gateway over its unix socket, in front of the fake provider."""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
import threading
import time
from decimal import Decimal

import pytest

from replayhub.gateway import Caps, ModelCall, ModelGateway, Upstream
from tests.gateway.client import (
    UnixHTTPConnection,
    anthropic_headers,
    call,
    chat_body,
    events,
    messages_body,
    openai_headers,
)
from tests.gateway.conftest import PLACEHOLDER, PRICES, REAL_KEY, providers

MESSAGES = "/claude/v1/messages"
CHAT = "/gpt/v1/chat/completions"


def agent(gateway: ModelGateway) -> UnixHTTPConnection:
    return UnixHTTPConnection(gateway.socket_path)


def ask_claude(gateway, text="hello there world", *, stream=False, key=PLACEHOLDER):
    return call(
        agent(gateway),
        "POST",
        MESSAGES,
        messages_body(text, stream=stream),
        anthropic_headers(key),
    )


def ask_gpt(gateway, text="hello there world", *, stream=False, key=PLACEHOLDER):
    return call(
        agent(gateway),
        "POST",
        CHAT,
        chat_body(text, stream=stream),
        openai_headers(key),
    )


def error_message(kind: str, body: bytes) -> str:
    data = json.loads(body)
    if kind == "anthropic":
        assert data["type"] == "error"
    return data["error"]["message"]


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


# Refusals


def test_a_wrong_placeholder_is_refused_in_the_apis_shape_and_recorded(
    gateway, upstream
):
    status, headers, body = ask_claude(gateway, key="sk-guess")
    assert status == 401
    assert "not this replay's key" in error_message("anthropic", body)
    assert headers["x-should-retry"] == "false"
    status, _, body = ask_gpt(gateway, key="sk-guess")
    assert status == 401
    assert "not this replay's key" in error_message("openai", body)

    assert upstream.received == []
    assert [(c.status, c.http_status) for c in gateway.calls] == [
        ("refused", 401),
        ("refused", 401),
    ]
    assert b"sk-guess" not in body


def test_a_refused_call_leaves_its_connection_usable(make_gateway, upstream):
    gateway = make_gateway(max_body_bytes=1000)
    conn = agent(gateway)
    for key, text, status in [
        ("wrong", "a", 401),
        (PLACEHOLDER, "word " * 300, 413),
        (PLACEHOLDER, "fine", 200),
    ]:
        body = messages_body(text)
        assert call(conn, "POST", MESSAGES, body, anthropic_headers(key))[0] == status
    assert len(upstream.received) == 1


def test_a_missing_placeholder_is_refused(gateway, upstream):
    status, _, _ = call(
        agent(gateway),
        "POST",
        MESSAGES,
        messages_body("a"),
        {"anthropic-version": "2023-06-01"},
    )
    assert status == 401
    assert upstream.received == []


def test_a_placeholder_in_the_other_apis_header_is_refused(gateway, upstream):
    headers = {"x-api-key": PLACEHOLDER, "Content-Type": "application/json"}
    status, _, _ = call(agent(gateway), "POST", CHAT, chat_body("a"), headers)
    assert status == 401


def test_an_unknown_provider_is_404(gateway, upstream):
    status, _, body = call(
        agent(gateway),
        "POST",
        "/nobody/v1/messages",
        messages_body("a"),
        anthropic_headers(PLACEHOLDER),
    )

    assert status == 404
    assert "no provider named 'nobody'" in error_message("anthropic", body)
    (record,) = gateway.calls
    assert (record.provider, record.status, record.http_status) == (
        "nobody",
        "refused",
        404,
    )
    assert upstream.received == []


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/claude/v1/files"),
        ("GET", "/claude/v1/messages"),
        ("POST", "/claude/v1/messages/batches"),
        ("POST", "/claude/v1/../v1/messages"),
        ("DELETE", "/gpt/v1/models"),
        ("POST", "/gpt/v1/fine_tuning/jobs"),
        ("POST", "/claude"),
        ("OPTIONS", "/gpt/v1/chat/completions"),
    ],
)
def test_a_path_the_api_does_not_name_is_403(gateway, upstream, method, path):
    status, _, body = call(
        agent(gateway), method, path, b"{}", anthropic_headers(PLACEHOLDER)
    )

    assert status == 403
    assert "does not forward" in json.loads(body)["error"]["message"]
    assert upstream.received == []
    assert gateway.calls[0].status == "refused"


def test_a_body_past_the_limit_is_413(make_gateway, upstream):
    gateway = make_gateway(max_body_bytes=1000)
    status, _, _ = ask_claude(gateway, "word " * 300)
    assert status == 413
    assert upstream.received == []
    assert ask_claude(gateway, "short")[0] == 200


# Caps


def test_the_requests_cap_refuses_the_call_after_the_last_one_allowed(
    make_gateway, upstream
):
    gateway = make_gateway(Caps(max_requests=2))
    assert ask_claude(gateway)[0] == 200
    assert gateway.cap_fired is None
    assert ask_gpt(gateway)[0] == 200
    assert gateway.cap_fired is None

    status, headers, body = ask_claude(gateway)
    assert status == 429
    assert "requests cap is reached" in error_message("anthropic", body)
    assert headers["x-should-retry"] == "false"
    assert gateway.cap_fired == "requests"
    assert len(upstream.received) == 2
    assert [c.status for c in gateway.calls] == [200, 200, "refused"]


def test_the_tokens_cap_lets_the_call_that_crosses_it_complete(make_gateway, upstream):
    gateway = make_gateway(Caps(max_tokens=10))
    assert ask_claude(gateway, "one two three")[0] == 200  # 5 + 3 tokens
    assert ask_claude(gateway, "one two three", stream=True)[0] == 200  # 16: past
    assert gateway.cap_fired is None

    status, _, body = ask_gpt(gateway)
    assert status == 429
    assert "tokens cap" in error_message("openai", body)
    assert gateway.cap_fired == "tokens"
    assert gateway.totals.tokens == 16
    assert len(upstream.received) == 2


def test_the_cost_cap_fires_on_measured_cost(make_gateway, upstream):
    gateway = make_gateway(Caps(max_cost_usd=Decimal("0.0001")))
    assert ask_claude(gateway, "a b c")[0] == 200  # $0.00006
    assert ask_claude(gateway, "a b c")[0] == 200  # $0.00012
    assert ask_claude(gateway, "a b c")[0] == 429
    assert gateway.cap_fired == "cost"
    assert gateway.totals.cost_usd == Decimal("0.00012")


def test_the_cost_cap_refuses_once_the_cost_is_unknown(make_gateway, upstream):
    gateway = make_gateway(Caps(max_cost_usd=Decimal(100)))
    upstream.answer_model = "mystery"
    call(
        agent(gateway),
        "POST",
        CHAT,
        chat_body("a", model="mystery"),
        openai_headers(PLACEHOLDER),
    )
    assert ask_gpt(gateway)[0] == 429
    assert gateway.cap_fired == "cost"
    assert gateway.totals.unpriced == 1


def test_the_requests_cap_holds_for_calls_at_the_same_time(make_gateway, upstream):
    gateway = make_gateway(Caps(max_requests=3))
    upstream.first_byte_delay = 0.1
    statuses: list[int] = []

    def one() -> None:
        statuses.append(ask_claude(gateway)[0])

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(statuses) == [200] * 3 + [429] * 5
    assert len(upstream.received) == 3


# Upstream failures


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_upstream_that_is_down_is_502_and_recorded(make_gateway):
    gateway = make_gateway(upstreams=providers(f"http://127.0.0.1:{free_port()}"))
    status, _, body = ask_claude(gateway)

    assert status == 502
    assert "unreachable" in error_message("anthropic", body)
    (record,) = gateway.calls
    assert (record.status, record.http_status) == (502, 502)
    assert "ConnectionRefusedError" in record.error
    assert gateway.totals.requests == 1


def test_an_upstream_that_does_not_answer_in_time_is_504(make_gateway, upstream):
    gateway = make_gateway(read_timeout=0.2)
    upstream.first_byte_delay = 1
    status, _, body = ask_gpt(gateway)

    assert status == 504
    assert "did not answer in time" in error_message("openai", body)
    assert gateway.calls[0].status == 504


def test_an_upstream_error_passes_through_and_is_recorded(gateway, upstream):
    upstream.key = "another"
    status, _, body = ask_claude(gateway)

    assert status == 401
    assert json.loads(body)["error"]["type"] == "authentication_error"
    (record,) = gateway.calls
    assert record.status == 401 and "invalid x-api-key" in record.error


# The key stays secret


def test_the_real_key_appears_in_no_answer_record_or_log(
    make_gateway, upstream, caplog
):
    caplog.set_level(logging.DEBUG)
    answers = []
    seen: list[ModelCall] = []
    gateway = make_gateway(on_call=seen.append)
    upstream.leak_key = True  # an upstream that echoes the key it got
    for stream in (False, True):
        answers.append(ask_claude(gateway, stream=stream))
        answers.append(ask_gpt(gateway, stream=stream))
    answers.append(ask_claude(gateway, key="wrong"))
    answers.append(call(agent(gateway), "POST", "/nobody/x", b"{}", {}))
    upstream.key = "another"
    answers.append(ask_gpt(gateway))

    gateway.close()  # every on_call has run

    assert any(b"(your key was ****" in body for _, _, body in answers)
    for _, headers, body in answers:
        assert REAL_KEY.encode() not in body
        assert REAL_KEY not in repr(headers)
    assert REAL_KEY not in repr(gateway.calls) and REAL_KEY not in repr(seen)
    assert len(seen) == len(gateway.calls) == 7
    assert caplog.records and REAL_KEY not in caplog.text
    for upstream_ in gateway.providers.values():
        assert REAL_KEY not in repr(upstream_) and REAL_KEY not in str(upstream_)


def test_a_key_a_header_cannot_carry_is_refused_without_echoing_it():
    with pytest.raises(ValueError) as raised:
        Upstream("p", "openai", "https://api.example/v1", "sk-abc\r\nX: y")
    assert "sk-abc" not in str(raised.value)


@pytest.mark.parametrize(
    "base_url",
    [
        "ftp://x/v1",
        "https://user:sk-secret@api.example/v1",
        "https:///v1",
        "https://x/?a=1",
    ],
)
def test_a_base_url_must_be_plain_http_or_https(base_url):
    with pytest.raises(ValueError) as raised:
        Upstream("p", "openai", base_url, "k")
    assert "sk-secret" not in str(raised.value)


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


def test_a_socket_path_that_exists_is_not_taken_over(socket_dir, upstream):
    path = socket_dir / "taken.sock"
    path.write_text("")
    gateway = ModelGateway(path, providers(upstream.base_url), PLACEHOLDER, Caps())
    with pytest.raises(FileExistsError):
        gateway.start()


def test_an_on_call_that_fails_does_not_break_the_agents_call(
    make_gateway, upstream, caplog
):
    def broken(record: ModelCall) -> None:
        raise RuntimeError("database down")

    gateway = make_gateway(on_call=broken)
    assert ask_claude(gateway)[0] == 200
    assert ask_claude(gateway)[0] == 200
    assert "database down" in caplog.text


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
