"""What a model server streams and what a tape holds are any JSON: a number,
a list or an object where the wire has text, a list or a type name is read
past -- the answer reassembled, served and shown from what is usable -- never
an exception in the gateway or on the replay page (each case below raised
one before)."""

from __future__ import annotations

import json
import zlib

import pytest

from replayhub.gateway import tape, tape_messages, wire

# A lone surrogate, as a JSON escape in a tape reads back.
LONE = "\ud800"


def event(data: object, name: str = "") -> str:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data)}"


def test_an_anthropic_stream_whose_block_holds_a_number_for_its_text_reassembles():
    events = [
        event({"type": "message_start", "message": {"id": "m", "content": []}}),
        event(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": 7},
            }
        ),
        event(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Done."},
            }
        ),
        event({"type": "content_block_delta", "index": 0, "delta": ["x"]}),
        event({"type": "message_delta", "delta": {}, "usage": {"output_tokens": 2}}),
    ]
    message = tape.reassemble(wire.ANTHROPIC, events)
    assert message is not None
    assert message["content"] == [{"type": "text", "text": "Done."}]
    assert message["usage"] == {"output_tokens": 2}


def test_responses_and_chat_streams_with_odd_types_and_choices_reassemble():
    responses = [
        event({"type": ["response.completed"], "response": {"id": "r"}}),
        event({"type": {"a": 1}}),
        event(
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": {"type": "message", "content": 3},
            }
        ),
        event({"type": "response.created", "response": {"id": "r", "output": []}}),
    ]
    rebuilt = tape.reassemble(wire.OPENAI, responses)
    assert rebuilt is not None
    assert rebuilt["id"] == "r"
    assert rebuilt["output"] == [{"type": "message", "content": 3}]
    chat = [
        event({"id": "c", "choices": 5}),
        event({"id": "c", "choices": [{"index": 0, "delta": ["hi"]}]}),
        event({"id": "c", "choices": [{"index": 0, "delta": {"content": "hi"}}]}),
    ]
    completion = tape.reassemble(wire.OPENAI, chat)
    assert completion is not None
    assert completion["choices"][0]["message"]["content"] == "hi"


@pytest.mark.parametrize(
    ("kind", "endpoint", "response"),
    [
        (wire.ANTHROPIC, "/messages", {"content": 4, "usage": [1, 2]}),
        (
            wire.ANTHROPIC,
            "/messages",
            {"content": [{"type": "text", "text": "\ud800"}]},
        ),
        (wire.OPENAI, "/chat/completions", {"choices": [{"message": ["hi"]}]}),
        (wire.OPENAI, "/chat/completions", {"choices": 3}),
        (wire.OPENAI, "/responses", {"output": 5}),
        (wire.OPENAI, "/responses", {"output": [{"type": "message", "content": 1}]}),
        (wire.GEMINI, "/models/g:generateContent", {"candidates": 2}),
    ],
)
def test_a_taped_answer_of_odd_shape_is_served_as_a_stream(kind, endpoint, response):
    exchange = tape.Exchange(
        request={"kind": kind, "endpoint": endpoint}, response=response, streamed=True
    )
    content_type, chunks = tape.serve(exchange, stream=True)
    assert content_type.startswith("text/event-stream")
    assert chunks and all(chunk.startswith((b"event:", b"data:")) for chunk in chunks)
    said = tape_messages.answer(response)
    assert said.role == "assistant"


def test_a_tape_of_odd_shape_shows_what_it_can_on_the_replay_page():
    said = tape_messages.answer({"content": [{"type": ["text"], "text": "x"}]})
    assert (said.text, said.calls) == ("", ())
    [message] = tape_messages.history(
        {"messages": [{"role": "assistant", "content": "ok", "tool_calls": 9}]}
    )
    assert (message.text, message.calls) == ("ok", ())
    assert tape_messages.system({"systemInstruction": {"parts": 1.5}}) == ""
    system = [
        {"type": ["text"], "text": "hidden"},
        {"type": "text", "text": "Be brief"},
    ]
    assert tape_messages.system({"system": system}) == "Be brief"
    [content] = tape_messages.history({"contents": [{"role": "model", "parts": 7}]})
    assert content.role == "assistant"


def test_a_stored_tape_that_is_not_zlib_data_is_a_value_error():
    with pytest.raises(ValueError, match="not zlib data"):
        tape.unpack(b"not a tape")
    assert tape.unpack(zlib.compress(b"[]")) == []
