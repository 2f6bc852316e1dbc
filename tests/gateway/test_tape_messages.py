"""A tape's messages read alike whatever the wire wrote: the Responses API's
items and Gemini's contents give the same calls and results as chat's."""

from __future__ import annotations

from replayhub.gateway import tape_messages


def test_responses_items_give_calls_their_outputs_and_reasoning():
    request = {
        "instructions": "be brief",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "shell",
                "arguments": '{"cmd": "ls"}',
            },
            {"type": "function_call_output", "call_id": "c1", "output": "a.py"},
        ],
    }
    answer = {
        "output": [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "ok"}]},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "done"}],
            },
        ]
    }

    [user, call, output] = tape_messages.history(request)
    said = tape_messages.answer(answer)

    assert tape_messages.system(request) == "be brief"
    assert (user.role, user.text) == ("user", "fix it")
    assert call.calls == (("c1", "shell", '{"cmd": "ls"}'),)
    assert output.results == (("c1", "", "a.py"),)
    assert (said.text, said.reasoning) == ("done", "ok")


def test_gemini_contents_give_function_calls_and_responses_by_name():
    request = {
        "systemInstruction": {"parts": [{"text": "be brief"}]},
        "contents": [
            {"role": "user", "parts": [{"text": "fix it"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "ls", "args": {}}}]},
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "ls", "response": {"o": 1}}}],
            },
        ],
    }
    answer = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "hm", "thought": True}]}}
        ]
    }

    [user, model, response] = tape_messages.history(request)
    said = tape_messages.answer(answer)

    assert tape_messages.system(request) == "be brief"
    assert user.text == "fix it" and model.role == "assistant"
    assert model.calls == (("", "ls", {}),)
    assert response.results == (("", "ls", '{"o": 1}'),)
    assert (said.text, said.reasoning) == ("", "hm")
