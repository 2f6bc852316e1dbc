"""What the gateway refuses, how it fails, and the real key kept out of
everything it answers, records and logs."""

from __future__ import annotations

import base64
import json
import logging
import shutil
import socket
import ssl
import subprocess
import threading
from decimal import Decimal

import pytest

from replayhub.demo.model_api import REAL_KEY, StandInProvider
from replayhub.gateway import Caps, MeteredCall, Upstream
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
    error_message,
    events,
    messages_body,
    openai_headers,
)
from tests.gateway.conftest import providers

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


def reserved(body: bytes, max_tokens: int) -> int:
    """What the gateway holds back for a call: its input at a token per three
    bytes of body, and its output limit."""
    return -(-len(body) // 3) + max_tokens


def test_a_call_is_admitted_only_if_its_worst_case_fits_the_tokens_cap(
    make_gateway, upstream
):
    worst = reserved(messages_body("one two three"), 100)
    gateway = make_gateway(Caps(max_tokens=worst + 8))
    assert ask_claude(gateway, "one two three")[0] == 200  # 5 + 3 tokens
    assert gateway.cap_fired is None
    assert gateway.calls[0].reserved_tokens == worst
    assert gateway.totals.reserved_tokens == 0  # given back once measured

    # 8 spent, and this call's worst case would take the totals past the cap.
    assert ask_claude(gateway, "one two three four")[0] == 429
    # No output limit named: reserved at the kind's default bound.
    status, _, body = ask_gpt(gateway)
    assert status == 429
    assert "tokens cap" in error_message("openai", body)
    assert gateway.cap_fired == "tokens"
    assert gateway.totals.tokens == 8
    assert len(upstream.received) == 1


def test_calls_at_the_same_time_never_spend_past_the_tokens_cap(make_gateway, upstream):
    worst = reserved(messages_body("hello there world"), 100)
    gateway = make_gateway(Caps(max_tokens=5 * worst))
    # Slow enough that no call is through (which would give back the part of
    # its worst case it did not spend) before all thirty have been asked.
    upstream.first_byte_delay = 1.5
    statuses: list[int] = []
    together = threading.Barrier(30)

    def one() -> None:
        together.wait()
        statuses.append(ask_claude(gateway)[0])

    threads = [threading.Thread(target=one) for _ in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Each admitted call held its worst case: at most five were in flight.
    assert statuses.count(200) == len(upstream.received) <= 5
    assert statuses.count(429) >= 25
    assert gateway.totals.tokens <= 5 * worst
    assert gateway.totals.reserved_tokens == 0


def test_the_cost_cap_holds_each_calls_worst_case_at_its_price(make_gateway, upstream):
    # claude-test: $3 in, $15 out per million tokens.
    worst = Decimal(-(-len(messages_body("a b c")) // 3) * 3 + 100 * 15) / 1_000_000
    gateway = make_gateway(Caps(max_cost_usd=worst + Decimal("0.0001")))
    assert ask_claude(gateway, "a b c")[0] == 200  # $0.00006 spent
    assert gateway.calls[0].reserved_cost_usd == worst
    assert ask_claude(gateway, "a b c")[0] == 200  # $0.00012
    # $0.00012 spent: one more worst case no longer fits.
    assert ask_claude(gateway, "a b c")[0] == 429
    assert gateway.cap_fired == "cost"
    assert gateway.totals.cost_usd == Decimal("0.00012")
    assert len(upstream.received) == 2


def test_the_cost_cap_refuses_a_model_it_has_no_price_for(make_gateway, upstream):
    gateway = make_gateway(Caps(max_cost_usd=Decimal(100)))
    status, _, _ = call(
        agent(gateway),
        "POST",
        CHAT,
        chat_body("a", model="mystery"),
        openai_headers(PLACEHOLDER),
    )
    assert status == 429
    assert gateway.cap_fired == "cost"
    assert upstream.received == []
    assert ask_gpt(gateway)[0] == 200


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
    seen: list[MeteredCall] = []
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

    assert any(b"(your key was [redacted])" in body for _, _, body in answers)
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


@pytest.fixture
def self_signed_upstream(socket_dir):
    """An HTTPS server whose certificate no default trust store accepts."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    cert, key = socket_dir / "cert.pem", socket_dir / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    with StandInProvider(REAL_KEY) as fake:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        fake._server.socket = context.wrap_socket(fake._server.socket, server_side=True)
        yield fake


def test_an_https_upstream_must_present_a_trusted_certificate(
    make_gateway, self_signed_upstream
):
    base_url = f"https://127.0.0.1:{self_signed_upstream.port}"
    gateway = make_gateway(upstreams=providers(base_url))
    status, _, _ = ask_claude(gateway)

    assert status == 502
    assert "CERTIFICATE_VERIFY_FAILED" in gateway.calls[0].error
    assert self_signed_upstream.received == []


@pytest.mark.parametrize(
    ("form", "stream"),
    [
        *(
            (form, stream)
            for form in ("plain", "base64", "json", "percent")
            for stream in (False, True)
        ),
        ("gzip", False),  # the stand-in compresses whole bodies only
    ],
)
def test_an_echoed_key_is_scrubbed_in_every_encoding(
    make_gateway, upstream, form, stream
):
    gateway = make_gateway()
    upstream.leak_key, upstream.leak_as = True, form
    encoded = {
        "plain": REAL_KEY.encode(),
        "base64": base64.b64encode(REAL_KEY.encode()),
        "json": b"\\u0073\\u006b\\u002d" + REAL_KEY.encode()[3:],
        "percent": b"".join(b"%%%02X" % c for c in REAL_KEY.encode()),
        "gzip": REAL_KEY.encode(),
    }[form]

    for ask in (ask_claude, ask_gpt):
        status, headers, body = ask(gateway, stream=stream)
        assert status == 200
        assert "content-encoding" not in headers
        assert encoded not in body and REAL_KEY.encode() not in body
        assert b"[redacted]" in body
        # Nothing of the key's length shows: the mask is always the same.
        assert str(len(REAL_KEY)).encode() not in body.split(b"your key was")[-1][:20]


@pytest.mark.parametrize("ask", ["claude", "gpt"])
def test_a_key_split_over_a_streams_deltas_is_scrubbed(make_gateway, upstream, ask):
    gateway = make_gateway()
    upstream.leak_key, upstream.leak_as = True, "split"
    status, _, body = (ask_claude if ask == "claude" else ask_gpt)(gateway, stream=True)
    assert status == 200
    texts = []
    for event in events(body):
        if ask == "claude":
            texts.append(event.get("delta", {}).get("text", ""))
        else:
            texts += [c["delta"].get("content") or "" for c in event["choices"]]
    text = "".join(texts)
    assert REAL_KEY not in text and REAL_KEY[:8] not in text
    assert "(your key was [redacted])" in text
    # The usage still reached the meter.
    assert gateway.calls[-1].output_tokens


def test_a_body_in_an_encoding_the_gateway_cannot_read_is_not_passed_on(
    make_gateway, upstream
):
    gateway = make_gateway()
    upstream.leak_key, upstream.leak_as = True, "br"
    status, _, body = ask_claude(gateway)
    assert status == 502
    assert "cannot read" in error_message("anthropic", body)
    assert gateway.calls[-1].status == 502


def test_refused_calls_past_the_first_few_are_only_counted(make_gateway, upstream):
    gateway = make_gateway(Caps(max_requests=0), max_kept=3)
    for _ in range(10):
        assert ask_claude(gateway)[0] == 429

    assert len(gateway.calls) == 3
    assert gateway.refused_counts == {"claude 429": 10}
