"""The tape's rules without a gateway: normalising requests, reassembling a
stream's message, matching and the request diff, writing an answer back,
packing and caps."""

from __future__ import annotations

import json

import pytest

from replayhub.gateway import tape
from replayhub.gateway.playback import TapePlayer, TapeRecorder
from replayhub.gateway.tape import Exchange


def anthropic_request(text: str = "hello", **extra):
    return {
        "model": "claude-test",
        "max_tokens": 64,
        "system": [
            {"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}
        ],
        "messages": [{"role": "user", "content": text}],
        **extra,
    }


def test_volatile_parts_are_left_out_and_what_the_model_is_asked_is_kept():
    plain = tape.normalise("anthropic", "/v1/messages", anthropic_request())
    noisy = tape.normalise(
        "anthropic",
        "/v1/messages",
        anthropic_request(stream=True, metadata={"user_id": "u-1"}),
    )

    assert plain == noisy
    assert plain["kind"] == "anthropic" and plain["endpoint"] == "/v1/messages"
    assert plain["system"] == [{"type": "text", "text": "be brief"}]
    assert plain["messages"][0]["content"] == [{"type": "text", "text": "hello"}]
    assert plain["max_tokens"] == 64


def test_a_changed_sampling_parameter_or_message_is_a_different_request():
    base = tape.normalise("openai", "/chat/completions", {"model": "m", "messages": []})
    warmer = tape.normalise(
        "openai", "/chat/completions", {"model": "m", "messages": [], "temperature": 1}
    )
    assert base != warmer


def test_openai_stream_options_and_user_do_not_count():
    a = tape.normalise_bytes(
        "openai",
        "/chat/completions",
        b'{"model":"m","messages":[],"stream":true,"stream_options":'
        b'{"include_usage":true},"user":"x"}',
    )
    b = tape.normalise_bytes(
        "openai", "/chat/completions", b'{"model":"m","messages":[]}'
    )
    assert a == b


def test_a_body_that_is_not_json_is_kept_as_text():
    assert tape.normalise_bytes("openai", "/models", b"\xffnot json")["body"]


ANTHROPIC_STREAM = [
    'event: message_start\ndata: {"type":"message_start","message":{"id":"m1",'
    '"type":"message","role":"assistant","model":"claude-test","content":[],'
    '"stop_reason":null,"usage":{"input_tokens":5,"output_tokens":1}}}',
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    '"content_block":{"type":"text","text":""}}',
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    '"delta":{"type":"text_delta","text":"Hel"}}',
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    '"delta":{"type":"text_delta","text":"lo"}}',
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}',
    'event: content_block_start\ndata: {"type":"content_block_start","index":1,'
    '"content_block":{"type":"tool_use","id":"t1","name":"run","input":{}}}',
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,'
    '"delta":{"type":"input_json_delta","partial_json":"{\\"cmd\\": "}}',
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,'
    '"delta":{"type":"input_json_delta","partial_json":"\\"ls\\"}"}}',
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":1}',
    'event: message_delta\ndata: {"type":"message_delta","delta":'
    '{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":7}}',
    'event: message_stop\ndata: {"type":"message_stop"}',
]


def test_an_anthropic_stream_reassembles_into_its_message():
    message = tape.reassemble("anthropic", ANTHROPIC_STREAM)

    assert message is not None
    assert message["content"] == [
        {"type": "text", "text": "Hello"},
        {"type": "tool_use", "id": "t1", "name": "run", "input": {"cmd": "ls"}},
    ]
    assert message["stop_reason"] == "tool_use"
    assert message["usage"] == {"input_tokens": 5, "output_tokens": 7}


def chunk(delta, finish=None, **extra):
    data = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
    return "data: " + json.dumps(data)


OPENAI_STREAM = [
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Hi "}),
    chunk({"content": "there"}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "run", "arguments": '{"cmd"'},
                }
            ]
        }
    ),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": ': "ls"}'}}]}),
    chunk({}, "tool_calls"),
    'data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-test",'
    '"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}',
    "data: [DONE]",
]


def test_an_openai_stream_reassembles_into_its_completion():
    completion = tape.reassemble("openai", OPENAI_STREAM)

    assert completion is not None
    message = completion["choices"][0]["message"]
    assert message["content"] == "Hi there"
    assert message["tool_calls"][0]["function"] == {
        "name": "run",
        "arguments": '{"cmd": "ls"}',
    }
    assert completion["choices"][0]["finish_reason"] == "tool_calls"
    assert completion["usage"] == {"prompt_tokens": 3, "completion_tokens": 4}


@pytest.mark.parametrize(
    ("kind", "events"), [("anthropic", ANTHROPIC_STREAM), ("openai", OPENAI_STREAM)]
)
def test_a_served_stream_reassembles_into_the_recorded_message(kind, events):
    message = tape.reassemble(kind, events)
    exchange = Exchange(request={"kind": kind}, response=message, streamed=True)

    content_type, pieces = tape.serve(exchange, stream=True)
    again = tape.reassemble(kind, tape.split_events(b"".join(pieces)))

    assert content_type.startswith("text/event-stream")
    assert again == message
    if kind == "openai":
        assert pieces[-1] == b"data: [DONE]\n\n"
    else:
        assert b"message_stop" in pieces[-1]


def test_a_served_plain_answer_is_the_recorded_json():
    message = {"id": "m", "content": [{"type": "text", "text": "<b>hi</b>"}]}
    exchange = Exchange(request={"kind": "anthropic"}, response=message)
    content_type, pieces = tape.serve(exchange, stream=False)
    assert content_type == "application/json"
    assert json.loads(b"".join(pieces)) == message


def recorded(text: str, reply: str = "ok") -> Exchange:
    return Exchange(
        request=tape.normalise("anthropic", "/v1/messages", anthropic_request(text)),
        response={"content": [{"type": "text", "text": reply}]},
    )


def test_a_differing_request_is_named_with_a_readable_diff():
    tape_ = [recorded("one"), recorded("two")]
    actual = tape.normalise("anthropic", "/v1/messages", anthropic_request("TWO"))

    assert (
        tape.compare(
            tape_,
            0,
            tape.normalise("anthropic", "/v1/messages", anthropic_request("one")),
            stream=False,
        )
        is None
    )
    diverged = tape.compare(tape_, 1, actual, stream=False)

    assert diverged is not None and diverged.why == "differs"
    assert diverged.to_dict()["call"] == 2
    assert "--- recorded call 2" in diverged.diff
    assert '-          "text": "two"' in diverged.diff
    assert '+          "text": "TWO"' in diverged.diff


def test_more_calls_than_the_tape_holds_and_fewer_are_divergences():
    tape_ = [recorded("one")]
    actual = tape.normalise("anthropic", "/v1/messages", anthropic_request("one"))

    more = tape.compare(tape_, 1, actual, stream=False)
    assert more is not None and more.why == "more"
    fewer = tape.fewer(tape_, 0)
    assert fewer is not None and fewer.why == "fewer" and "after 0 of" in fewer.detail
    assert tape.fewer(tape_, 1) is None


def test_a_left_out_answer_cannot_be_served():
    left = Exchange(request=recorded("one").request, response=None, truncated=True)
    diverged = tape.compare([left], 0, recorded("one").request, stream=False)
    assert diverged is not None and diverged.why == "unservable"


def test_the_player_serves_in_order_then_refuses_or_goes_live():
    body = json.dumps(anthropic_request("one")).encode()
    other = json.dumps(anthropic_request("other")).encode()

    player = TapePlayer([recorded("one"), recorded("one", "again")])
    first = player.take("anthropic", "/v1/messages", body, stream=False)
    assert isinstance(first, Exchange) and player.served == 1
    refused = player.take("anthropic", "/v1/messages", other, stream=False)
    assert isinstance(refused, tape.Divergence) and refused.index == 1
    assert player.take("anthropic", "/v1/messages", body, stream=False) is refused

    live = TapePlayer([recorded("one")], then_live=True)
    assert live.take("anthropic", "/v1/messages", other, stream=False) is None
    assert live.take("anthropic", "/v1/messages", body, stream=False) is None
    assert live.finish() is not None and live.finish().index == 0


def test_failed_calls_on_a_tape_are_not_played():
    failed = Exchange(request=recorded("one").request, response={}, status=500)
    player = TapePlayer([failed, recorded("one")])
    body = json.dumps(anthropic_request("one")).encode()
    assert isinstance(
        player.take("anthropic", "/v1/messages", body, stream=False), Exchange
    )
    assert player.finish() is None


def test_a_tape_packs_and_unpacks_and_refuses_to_inflate_past_its_limit():
    exchanges = [recorded("one"), recorded("x" * 10_000)]
    packed = tape.pack(exchanges)

    assert tape.unpack(packed) == exchanges
    assert len(packed) < len(tape.canonical([e.to_dict() for e in exchanges]))
    with pytest.raises(ValueError, match="inflates past"):
        tape.unpack(packed, limit=100)


def test_an_exchange_over_its_cap_loses_its_answer_then_its_request():
    big = recorded("x" * 5000, reply="y" * 5000)

    no_answer = tape.capped(big, 7000)
    assert no_answer.response is None and no_answer.truncated
    assert no_answer.request == big.request
    bare = tape.capped(big, 100)
    assert bare.request == {
        "kind": "anthropic",
        "endpoint": "/v1/messages",
        "model": "claude-test",
        "left_out": True,
    }
    assert big.digest() != bare.digest() and len(big.digest()) == 64


def test_the_recorder_keeps_a_tape_within_its_caps():
    recorder = TapeRecorder(exchange_bytes=2000, tape_bytes=3000)
    for text in ("a", "b" * 1500, "c"):
        capture = recorder.start(
            "openai",
            "/chat/completions",
            json.dumps(
                {"model": "m", "messages": [{"role": "user", "content": text}]}
            ).encode(),
            served=False,
        )
        capture.feed(json.dumps({"choices": [{"message": {"content": text}}]}).encode())
        recorder.end(capture, status=200, usage=None)

    exchanges, truncated = recorder.exchanges()

    assert truncated and len(exchanges) == 3
    assert exchanges[0].response["choices"][0]["message"]["content"] == "a"
    assert exchanges[1].response is None
    assert sum(len(tape.canonical(e.to_dict())) for e in exchanges) <= 3000


def test_a_recorder_record_entry_is_normalised_like_a_replays_own():
    entry = {
        "provider_kind": "openai",
        "method": "POST",
        "path": "/v1/chat/completions",
        "request": {"model": "m", "messages": [], "stream": True},
        "status": 200,
        "stream": True,
        "response": OPENAI_STREAM,
        "usage": {"input_tokens": 3, "output_tokens": 4},
        "model": "gpt-test",
    }
    exchange = tape.from_record(entry)

    assert exchange is not None
    assert exchange.request == tape.normalise(
        "openai", "/chat/completions", {"model": "m", "messages": []}
    )
    assert exchange.response["choices"][0]["message"]["content"] == "Hi there"
    assert exchange.usage == {"input_tokens": 3, "output_tokens": 4}
    assert tape.from_record({"provider_kind": "http://evil"}) is None
    assert tape.from_record_tape("not a list") == []
