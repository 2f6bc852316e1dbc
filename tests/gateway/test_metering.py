"""A cap is a ceiling: calls are metered to the upstream's end even when the
agent hangs up, and a call whose usage never arrives is charged its worst case."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from replayhub.gateway import Caps
from tests.conftest import wait_for
from tests.gateway.client import (
    CHAT,
    MESSAGES,
    PLACEHOLDER,
    agent,
    anthropic_headers,
    chat_body,
    messages_body,
    openai_headers,
)


def hang_up_after_the_first_bytes(gateway, path: str, body: bytes, headers) -> None:
    """Send a streamed call, read the start of the answer, then reset the
    connection (RST, no FIN) as an agent that got what it wanted would."""
    conn = agent(gateway)
    conn.request("POST", path, body=body, headers=headers)
    response = conn.getresponse()
    assert response.status == 200
    response.read1(256)
    sock = conn.sock
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_a_stream_the_agent_cut_off_is_metered_to_the_upstreams_end(
    make_gateway, upstream, kind
):
    gateway = make_gateway()
    upstream.event_delay = 0.02
    upstream.bill_output_tokens = 1_500_000
    long_text = " ".join(f"word{n}" for n in range(40))
    if kind == "anthropic":
        path, body = MESSAGES, messages_body(long_text, stream=True)
        headers = anthropic_headers(PLACEHOLDER)
    else:
        path, body = CHAT, chat_body(long_text, stream=True)
        headers = openai_headers(PLACEHOLDER)

    hang_up_after_the_first_bytes(gateway, path, body, headers)

    (record,) = wait_for(lambda: gateway.calls, timeout=20)
    assert "the agent disconnected" in record.error
    # What the upstream billed, read from its last events after the agent left.
    assert record.output_tokens == 1_500_000
    assert not record.usage_estimated
    assert gateway.totals.tokens == record.input_tokens + 1_500_000
    # claude-test $15 / gpt-test $8 per million output tokens.
    assert record.cost_usd >= (22 if kind == "anthropic" else 12)


def test_a_stream_the_upstream_cut_before_its_usage_is_charged_its_worst_case(
    make_gateway, upstream
):
    gateway = make_gateway(Caps(max_tokens=100_000))
    upstream.cut_after = 4  # message_start, block start, ping, one delta
    status_line = agent(gateway)
    status_line.request(
        "POST",
        MESSAGES,
        body=messages_body("a b c d e f", stream=True),
        headers=anthropic_headers(PLACEHOLDER),
    )
    response = status_line.getresponse()
    with pytest.raises(Exception):  # noqa: B017 - the stream broke off
        response.read()

    (record,) = wait_for(lambda: gateway.calls, timeout=20)
    assert record.usage_estimated
    assert record.output_tokens == 100  # the max_tokens it asked for
    assert record.reserved_tokens == record.input_tokens + 100
    assert gateway.totals.tokens == record.reserved_tokens
    assert gateway.totals.reserved_tokens == 0


def test_metering_after_a_hang_up_is_bounded_in_time(
    make_gateway, upstream, monkeypatch
):
    from replayhub.gateway import forward

    monkeypatch.setattr(forward, "DRAIN_UPSTREAM_SECONDS", 0.3)
    gateway = make_gateway()
    upstream.event_delay = 0.1  # 40 words: four seconds of events
    text = " ".join(f"w{n}" for n in range(40))
    started = time.monotonic()
    hang_up_after_the_first_bytes(
        gateway,
        MESSAGES,
        messages_body(text, stream=True),
        anthropic_headers(PLACEHOLDER),
    )

    (record,) = wait_for(lambda: gateway.calls, timeout=20)
    assert time.monotonic() - started < 3
    assert "not read" in record.error
    assert record.usage_estimated  # its last event never came
