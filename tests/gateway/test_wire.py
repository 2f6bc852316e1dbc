"""The wire formats, without a socket: paths, keys, headers, bodies, metering,
cost and error shapes."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from replayhub.gateway import wire
from replayhub.gateway.redact import Redactor
from replayhub.gateway.wire import ANTHROPIC, OPENAI, Usage, UsageMeter

ANTHROPIC_STREAM = (
    b"event: message_start\n"
    b'data: {"type":"message_start","message":{"id":"msg_1","type":"message",'
    b'"role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],'
    b'"usage":{"input_tokens":12,"cache_read_input_tokens":100,'
    b'"cache_creation_input_tokens":20,"output_tokens":1}}}\n'
    b"\n"
    b"event: ping\n"
    b'data: {"type": "ping"}\n'
    b"\n"
    b": a comment line\n"
    b"event: content_block_delta\n"
    b'data: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"gr\xc3\xbc\xc3\x9fe \xe2\x9c\x93"}}\n'
    b"\n"
    b"event: message_delta\n"
    b'data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":42}}\n'
    b"\n"
    b"event: message_stop\n"
    b'data: {"type":"message_stop"}\n'
    b"\n"
)
ANTHROPIC_USAGE = Usage(
    input_tokens=132,
    output_tokens=42,
    cached_tokens=100,
    cache_write_tokens=20,
    model="claude-sonnet-4-5-20250929",
    complete=True,
)
OPENAI_STREAM = (
    b'data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-2024-08-06",'
    b'"choices":[{"index":0,"delta":{"content":"h\xc3\xa9llo"}}],"usage":null}\n'
    b"\n"
    b'data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-2024-08-06",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}\n'
    b"\n"
    b'data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-2024-08-06",'
    b'"choices":[],"usage":{"prompt_tokens":30,"completion_tokens":7,'
    b'"total_tokens":37,"prompt_tokens_details":{"cached_tokens":10}}}\n'
    b"\n"
    b"data: [DONE]\n"
    b"\n"
)
OPENAI_USAGE = Usage(
    input_tokens=30,
    output_tokens=7,
    cached_tokens=10,
    cache_write_tokens=0,
    model="gpt-4o-2024-08-06",
    complete=True,
)
STREAMS = [
    (ANTHROPIC, ANTHROPIC_STREAM, ANTHROPIC_USAGE),
    (OPENAI, OPENAI_STREAM, OPENAI_USAGE),
]


def meter_stream(kind: str, chunks: list[bytes], **kwargs: int) -> Usage:
    meter = UsageMeter(kind, streaming=True, **kwargs)
    for chunk in chunks:
        meter.feed(chunk)
    return meter.finish()


def meter_json(kind: str, data: object) -> Usage:
    meter = UsageMeter(kind, streaming=False)
    body = json.dumps(data).encode()
    meter.feed(body[:7])
    meter.feed(body[7:])
    return meter.finish()


# Paths


@pytest.mark.parametrize(
    ("kind", "method", "path"),
    [
        (ANTHROPIC, "POST", "/v1/messages"),
        (ANTHROPIC, "POST", "/v1/messages/count_tokens"),
        (ANTHROPIC, "GET", "/v1/models"),
        (OPENAI, "POST", "/chat/completions"),
        (OPENAI, "POST", "/v1/chat/completions"),
        (OPENAI, "POST", "/responses"),
        (OPENAI, "POST", "/v1/completions"),
        (OPENAI, "POST", "/embeddings"),
        (OPENAI, "GET", "/models"),
        (OPENAI, "GET", "/v1/models"),
    ],
)
def test_the_apis_own_endpoints_are_allowed(kind, method, path):
    assert wire.allowed(kind, method, path)


@pytest.mark.parametrize(
    ("kind", "method", "path"),
    [
        (ANTHROPIC, "GET", "/v1/messages"),
        (ANTHROPIC, "POST", "/v1/messages/"),
        (ANTHROPIC, "POST", "/messages"),
        (ANTHROPIC, "POST", "/v1/files"),
        (ANTHROPIC, "POST", "/v1/messages/batches"),
        (ANTHROPIC, "POST", "/v1/messages/../organizations"),
        (ANTHROPIC, "POST", "/v1/%6dessages"),
        (ANTHROPIC, "DELETE", "/v1/models"),
        (ANTHROPIC, "POST", "/v1/chat/completions"),
        (OPENAI, "POST", "/v1/messages"),
        (OPENAI, "GET", "/chat/completions"),
        (OPENAI, "POST", "/v1/files"),
        (OPENAI, "POST", "/v1/v1/chat/completions"),
        (OPENAI, "POST", "/fine_tuning/jobs"),
        (OPENAI, "POST", "//chat/completions"),
        (OPENAI, "POST", ""),
        ("other", "POST", "/v1/messages"),
    ],
)
def test_everything_else_is_refused(kind, method, path):
    assert not wire.allowed(kind, method, path)


@pytest.mark.parametrize(
    ("kind", "base_url", "path", "target"),
    [
        (ANTHROPIC, "https://api.anthropic.com", "/v1/messages", "/v1/messages"),
        (ANTHROPIC, "https://api.anthropic.com/", "/v1/messages", "/v1/messages"),
        (ANTHROPIC, "https://api.anthropic.com/v1", "/v1/messages", "/v1/messages"),
        (
            ANTHROPIC,
            "https://proxy.example/anthropic",
            "/v1/messages?beta=true",
            "/anthropic/v1/messages?beta=true",
        ),
        (
            OPENAI,
            "https://api.openai.com/v1",
            "/v1/chat/completions",
            "/v1/chat/completions",
        ),
        (
            OPENAI,
            "https://api.openai.com/v1/",
            "/chat/completions",
            "/v1/chat/completions",
        ),
        (
            OPENAI,
            "http://127.0.0.1:11434",
            "/v1/chat/completions",
            "/v1/chat/completions",
        ),
        (OPENAI, "http://127.0.0.1:8000/", "/models", "/v1/models"),
        (
            OPENAI,
            "https://generativelanguage.googleapis.com/v1beta/openai",
            "/v1/chat/completions",
            "/v1beta/openai/chat/completions",
        ),
        (
            OPENAI,
            "https://api.groq.com/openai/v1",
            "/responses",
            "/openai/v1/responses",
        ),
    ],
)
def test_the_agents_path_joins_the_upstream_base_url(kind, base_url, path, target):
    assert wire.upstream_path(kind, base_url, path) == target


# Keys and headers


def test_anthropic_takes_the_key_from_x_api_key_or_a_bearer_token():
    assert wire.placeholder(ANTHROPIC, [("X-Api-Key", " ph ")]) == "ph"
    assert wire.placeholder(ANTHROPIC, [("authorization", "Bearer ph")]) == "ph"
    assert (
        wire.placeholder(ANTHROPIC, [("x-api-key", "a"), ("Authorization", "Bearer b")])
        == "a"
    )
    assert wire.placeholder(ANTHROPIC, [("Authorization", "Basic cGg6")]) is None
    assert wire.placeholder(ANTHROPIC, []) is None


def test_openai_takes_the_key_from_a_bearer_token_only():
    assert wire.placeholder(OPENAI, [("Authorization", "bearer ph")]) == "ph"
    assert wire.placeholder(OPENAI, [("x-api-key", "ph")]) is None
    assert wire.placeholder(OPENAI, [("Authorization", "Bearer ")]) is None


AGENT_HEADERS = [
    ("Host", "127.0.0.1:8080"),
    ("Connection", "keep-alive, X-Hop"),
    ("X-Hop", "1"),
    ("Keep-Alive", "timeout=5"),
    ("Transfer-Encoding", "chunked"),
    ("Proxy-Authorization", "Basic eA=="),
    ("Content-Length", "10"),
    ("Accept-Encoding", "gzip, br"),
    ("Expect", "100-continue"),
    ("x-api-key", "placeholder"),
    ("Authorization", "Bearer placeholder"),
    ("api-key", "placeholder"),
    ("anthropic-version", "2023-06-01"),
    ("anthropic-beta", "prompt-caching-2024-07-31"),
    ("Content-Type", "application/json"),
    ("User-Agent", "agent/1.0"),
]


def test_upstream_headers_drop_hops_host_and_every_key_and_carry_the_real_one():
    anthropic = wire.upstream_headers(ANTHROPIC, AGENT_HEADERS, "sk-real")
    assert anthropic == [
        ("anthropic-version", "2023-06-01"),
        ("anthropic-beta", "prompt-caching-2024-07-31"),
        ("Content-Type", "application/json"),
        ("User-Agent", "agent/1.0"),
        ("Accept-Encoding", "identity"),
        ("x-api-key", "sk-real"),
    ]
    openai = wire.upstream_headers(OPENAI, AGENT_HEADERS, "sk-real")
    assert openai[-1] == ("Authorization", "Bearer sk-real")
    assert "placeholder" not in repr(openai)


def test_a_server_that_takes_no_key_gets_no_auth_header():
    headers = wire.upstream_headers(OPENAI, AGENT_HEADERS, "")
    assert not {name.lower() for name, _ in headers} & wire.AUTH_HEADERS


def test_response_headers_leave_framing_to_the_gateway():
    headers = wire.response_headers(
        [
            ("Content-Type", "text/event-stream"),
            ("Transfer-Encoding", "chunked"),
            ("Content-Length", "5"),
            ("Connection", "close, X-Private"),
            ("X-Private", "1"),
            ("request-id", "req_1"),
        ]
    )
    assert headers == [("Content-Type", "text/event-stream"), ("request-id", "req_1")]


# Request bodies


def test_the_request_names_its_model_and_whether_it_streams():
    body = b'{"model": "claude-x", "stream": true, "messages": []}'
    request = wire.read_request(ANTHROPIC, "/v1/messages", body)
    assert (request.model, request.stream, request.body) == ("claude-x", True, body)
    assert not wire.read_request(ANTHROPIC, "/v1/messages", b'{"stream": "yes"}').stream
    assert wire.read_request(ANTHROPIC, "/v1/messages", b'{"model": 3}').model is None


@pytest.mark.parametrize("body", [b"", b"not json", b"[1, 2]", b'"s"', b"\xff\xfe"])
def test_a_body_that_is_not_a_json_object_goes_up_as_it_came(body):
    request = wire.read_request(OPENAI, "/chat/completions", body)
    assert (request.model, request.stream, request.body) == (None, False, body)


def test_an_openai_stream_asks_for_usage_leaving_the_agents_bytes_as_they_were():
    body = b'{"model": "m", "stream": true, "messages": [{"role": "user"}]}\n'
    sent = wire.read_request(OPENAI, "/v1/chat/completions", body).body
    assert sent.startswith(body.rstrip()[:-1])
    assert json.loads(sent)["stream_options"] == {"include_usage": True}


def test_stream_options_the_agent_gave_are_kept_and_usage_added():
    body = b'{"model":"m","stream":true,"stream_options":{"include_usage":false,"x":1}}'
    sent = json.loads(wire.read_request(OPENAI, "/completions", body).body)
    assert sent["stream_options"] == {"include_usage": True, "x": 1}
    asked = b'{"stream":true,"stream_options":{"include_usage":true}}'
    assert wire.read_request(OPENAI, "/chat/completions", asked).body == asked


@pytest.mark.parametrize(
    ("kind", "path", "body"),
    [
        (OPENAI, "/chat/completions", b'{"model": "m", "stream": false}'),
        (OPENAI, "/responses", b'{"model": "m", "stream": true}'),
        (ANTHROPIC, "/v1/messages", b'{"model": "m", "stream": true}'),
    ],
)
def test_other_bodies_go_up_unchanged(kind, path, body):
    assert wire.read_request(kind, path, body).body == body


# Metering a JSON response


def test_anthropic_json_usage_counts_cache_reads_and_writes_as_input():
    usage = meter_json(
        ANTHROPIC,
        {
            "model": "claude-answered",
            "usage": {
                "input_tokens": 5,
                "output_tokens": 9,
                "cache_read_input_tokens": 50,
                "cache_creation_input_tokens": 7,
            },
        },
    )
    assert usage == Usage(62, 9, 50, 7, "claude-answered", complete=True)


def test_openai_json_usage_in_both_spellings():
    chat = meter_json(
        OPENAI,
        {
            "model": "gpt-x",
            "usage": {
                "prompt_tokens": 11,
                "completion_tokens": 3,
                "prompt_tokens_details": {"cached_tokens": 4},
            },
        },
    )
    assert chat == Usage(11, 3, 4, 0, "gpt-x", complete=True)
    responses = meter_json(
        OPENAI,
        {
            "model": "gpt-y",
            "usage": {
                "input_tokens": 8,
                "output_tokens": 2,
                "input_tokens_details": {"cached_tokens": 1},
            },
        },
    )
    assert responses == Usage(8, 2, 1, 0, "gpt-y", complete=True)
    embeddings = meter_json(OPENAI, {"usage": {"prompt_tokens": 6, "total_tokens": 6}})
    assert (embeddings.input_tokens, embeddings.output_tokens) == (6, 0)


def test_a_response_without_usage_is_not_metered():
    assert meter_json(ANTHROPIC, {"input_tokens": 40}) == Usage()
    assert meter_json(OPENAI, {"data": [{"id": "m"}]}) == Usage()


def test_an_error_body_is_read_into_the_usage_error():
    usage = meter_json(
        ANTHROPIC,
        {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"},
        },
    )
    assert usage.error == "overloaded_error: Overloaded"
    usage = meter_json(
        OPENAI, {"error": {"message": "bad model", "code": "model_not_found"}}
    )
    assert usage.error == "model_not_found: bad model"


@pytest.mark.parametrize("body", [b"", b"{", b"null", b"\xff", b'{"usage": 3}'])
def test_junk_json_is_not_metered(body):
    meter = UsageMeter(ANTHROPIC, streaming=False)
    meter.feed(body)
    assert meter.finish() == Usage()


def test_a_json_body_past_its_cap_is_dropped_not_kept():
    meter = UsageMeter(OPENAI, streaming=False, max_json_bytes=64)
    body = json.dumps({"usage": {"prompt_tokens": 1}, "pad": "x" * 100}).encode()
    meter.feed(body)
    assert meter.finish() == Usage()


# Metering a stream


@pytest.mark.parametrize(("kind", "stream", "expected"), STREAMS)
def test_a_stream_in_one_piece(kind, stream, expected):
    assert meter_stream(kind, [stream]) == expected


@pytest.mark.parametrize(("kind", "stream", "expected"), STREAMS)
def test_a_stream_split_at_every_byte_boundary(kind, stream, expected):
    for at in range(len(stream) + 1):
        assert meter_stream(kind, [stream[:at], stream[at:]]) == expected, at


@pytest.mark.parametrize(("kind", "stream", "expected"), STREAMS)
def test_a_stream_fed_byte_by_byte(kind, stream, expected):
    pieces = [stream[i : i + 1] for i in range(len(stream))]
    assert meter_stream(kind, pieces) == expected


@pytest.mark.parametrize(("kind", "stream", "expected"), STREAMS)
@pytest.mark.parametrize("newline", [b"\r\n", b"\r"])
def test_a_stream_with_other_line_ends_split_everywhere(
    kind, stream, expected, newline
):
    stream = stream.replace(b"\n", newline)
    for at in range(len(stream) + 1):
        assert meter_stream(kind, [stream[:at], stream[at:]]) == expected, at


def test_a_data_field_split_over_lines_is_one_event():
    stream = (
        b'data: {"model": "m",\n'
        b'data: "usage": {"prompt_tokens": 2, "completion_tokens": 1}}\n'
        b"\n"
    )
    assert meter_stream(OPENAI, [stream]) == Usage(2, 1, 0, 0, "m", complete=True)


def test_junk_in_a_stream_is_skipped():
    junk = (
        b"data: not json\n\n"
        b"data: [1, 2]\n\n"
        b"garbage line without colon\n\n"
        b"\xff\xfe\x00\n\n"
        b'data: {"type": "message_start", "message": "no"}\n\n'
        b'data: {"type": "message_delta", "usage": {"output_tokens": "many"}}\n\n'
    )
    for at in range(len(junk) + 1):
        usage = meter_stream(ANTHROPIC, [junk[:at], junk[at:], ANTHROPIC_STREAM])
        assert usage == ANTHROPIC_USAGE, at


def test_an_event_past_its_cap_is_skipped_and_later_ones_still_count():
    huge = b"data: " + b"x" * 5000 + b"\n\n"
    meter = UsageMeter(ANTHROPIC, streaming=True, max_event_bytes=1024)
    for i in range(0, len(huge), 100):
        meter.feed(huge[i : i + 100])
    meter.feed(ANTHROPIC_STREAM)
    assert meter.finish() == ANTHROPIC_USAGE
    assert meter.skipped_events == 1


def test_a_line_without_an_end_never_grows_past_the_cap():
    meter = UsageMeter(OPENAI, streaming=True, max_event_bytes=1024)
    for _ in range(1000):
        meter.feed(b"data: " + b"y" * 1000)
    assert len(meter._line) <= 1024
    meter.feed(b"\n\n" + OPENAI_STREAM)
    assert meter.finish() == OPENAI_USAGE
    assert meter.skipped_events == 1


def test_an_event_of_many_lines_past_the_cap_is_skipped():
    lines = b"".join(b"data: " + b"z" * 100 + b"\n" for _ in range(50)) + b"\n"
    assert meter_stream(ANTHROPIC, [lines, ANTHROPIC_STREAM], max_event_bytes=1024) == (
        ANTHROPIC_USAGE
    )


def test_a_stream_cut_before_its_final_usage_is_incomplete():
    cut = ANTHROPIC_STREAM[: ANTHROPIC_STREAM.index(b"event: message_delta")]
    usage = meter_stream(ANTHROPIC, [cut])
    assert (usage.input_tokens, usage.output_tokens, usage.complete) == (132, 1, False)
    cut = OPENAI_STREAM[: OPENAI_STREAM.index(b'"choices":[],')]
    usage = meter_stream(OPENAI, [cut])
    assert usage == Usage(model="gpt-4o-2024-08-06")


def test_an_anthropic_delta_that_repeats_the_input_counts_replaces_them():
    stream = ANTHROPIC_STREAM.replace(
        b'"usage":{"output_tokens":42}',
        b'"usage":{"input_tokens":13,"cache_read_input_tokens":100,'
        b'"cache_creation_input_tokens":20,"output_tokens":42}',
    )
    assert meter_stream(ANTHROPIC, [stream]).input_tokens == 133


def test_an_error_event_in_a_stream_is_read():
    stream = (
        b"event: error\n"
        b'data: {"type": "error", "error": {"type": "overloaded_error", '
        b'"message": "Overloaded"}}\n\n'
    )
    assert meter_stream(ANTHROPIC, [stream]).error == "overloaded_error: Overloaded"


def test_a_responses_api_stream_reports_usage_on_completion():
    stream = (
        b"event: response.created\n"
        b'data: {"type":"response.created","response":{"model":"gpt-5","usage":null}}\n'
        b"\n"
        b"event: response.output_text.delta\n"
        b'data: {"type":"response.output_text.delta","delta":"hi"}\n'
        b"\n"
        b"event: response.completed\n"
        b'data: {"type":"response.completed","response":{"model":"gpt-5",'
        b'"usage":{"input_tokens":9,"output_tokens":4,'
        b'"input_tokens_details":{"cached_tokens":2}}}}\n'
        b"\n"
    )
    for at in range(len(stream) + 1):
        usage = meter_stream(OPENAI, [stream[:at], stream[at:]])
        assert usage == Usage(9, 4, 2, 0, "gpt-5", complete=True), at


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("text/event-stream", True),
        ("text/event-stream; charset=utf-8", True),
        ("Text/Event-Stream", True),
        ("application/json", False),
        (None, False),
    ],
)
def test_event_streams_are_told_by_their_content_type(content_type, expected):
    assert wire.is_event_stream(content_type) is expected


# Cost


PRICES = {
    "m": {"input": 3, "output": "15", "cached": "0.30"},
    "plain": {"input": "1.5", "output": "2"},
    "writes": {"input": "3", "output": "15", "cached": "0.3", "cache_write": "3.75"},
}


def test_cost_is_per_million_tokens_with_cache_reads_at_their_price():
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cached_tokens=400_000)
    assert wire.cost(PRICES, "m", usage) == Decimal("1.8") + Decimal("0.12") + Decimal(
        "1.5"
    )


def test_cached_input_defaults_to_the_input_price():
    usage = Usage(input_tokens=10, output_tokens=20, cached_tokens=5)
    assert wire.cost(PRICES, "plain", usage) == Decimal("0.000055")


def test_cache_writes_take_their_own_price_when_given():
    usage = Usage(
        input_tokens=300, output_tokens=0, cached_tokens=100, cache_write_tokens=100
    )
    expected = (100 * Decimal("3") + 100 * Decimal("0.3") + 100 * Decimal("3.75")) / (
        1_000_000
    )
    assert wire.cost(PRICES, "writes", usage) == expected
    assert wire.cost(PRICES, "plain", usage) == Decimal("0.00045")


def test_an_unknown_model_or_unreported_usage_costs_unknown_not_zero():
    usage = Usage(input_tokens=10, output_tokens=10)
    assert wire.cost(PRICES, "unknown", usage) is None
    assert wire.cost(PRICES, None, usage) is None
    assert wire.cost({}, "m", usage) is None
    assert wire.cost(PRICES, "m", Usage()) is None
    assert wire.cost({"bad": {"input": "x", "output": 1}}, "bad", usage) is None
    assert wire.cost(PRICES, "m", Usage(input_tokens=0, output_tokens=0)) == 0


# Errors


def test_errors_come_in_each_apis_own_shape():
    anthropic = json.loads(wire.error_body(ANTHROPIC, 429, "cap reached"))
    assert anthropic == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "cap reached"},
    }
    openai = json.loads(wire.error_body(OPENAI, 401, "wrong key"))
    assert openai["error"]["message"] == "wrong key"
    assert openai["error"]["type"] == "authentication_error"
    assert (
        json.loads(wire.error_body(ANTHROPIC, 502, "x"))["error"]["type"] == "api_error"
    )
    assert (
        json.loads(wire.error_body(OPENAI, 504, "x"))["error"]["type"] == "server_error"
    )


# Redaction


SECRET = b"sk-real-0123456789"


def test_the_secret_is_masked_wherever_chunks_split_it():
    text = b"before " + SECRET + b" middle " + SECRET + SECRET + b" sk-re after sk-"
    masked = text.replace(SECRET, b"[redacted]")
    for at in range(len(text) + 1):
        for at2 in range(at, len(text) + 1, 7):
            redactor = Redactor(SECRET)
            out = b"".join(
                redactor.feed(part) for part in (text[:at], text[at:at2], text[at2:])
            )
            assert out + redactor.flush() == masked, (at, at2)


def test_a_chunk_that_cannot_start_the_secret_is_never_held():
    redactor = Redactor(SECRET)
    assert redactor.feed(b"data: {}\n\n") == b"data: {}\n\n"
    assert redactor.feed(b"ends in sk-re") == b"ends in "
    assert redactor.feed(b"ad more") == b"sk-read more"  # not the key after all
    assert redactor.flush() == b""
    assert Redactor(b"").feed(b"anything") == b"anything"
