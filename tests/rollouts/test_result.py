"""Reading the harness's result file: strictly, size-capped, never trusted."""

from __future__ import annotations

import json
import os

import pytest

from replayhub.rollouts.completions import normalise, same, similarity
from replayhub.rollouts.result import ResultProblem, parse_result, read_result


def problem(data: bytes) -> ResultProblem:
    with pytest.raises(ResultProblem) as caught:
        parse_result(data)
    return caught.value


def test_a_string_completion_is_one_assistant_message():
    result = parse_result(b'{"completion": "done", "reward": 1}')
    assert result.reward == 1.0
    assert [m.to_dict() for m in result.completion] == [
        {"role": "assistant", "content": "done"}
    ]


def test_a_message_list_keeps_tool_calls_in_either_shape():
    completion = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "name": "bash", "arguments": '{"command": "ls"}'}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "x.py"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "ok"}],
            "tool_calls": [
                {
                    "id": "b",
                    "type": "function",
                    "function": {"name": "bash", "arguments": {"command": "ls"}},
                }
            ],
        },
    ]
    result = parse_result(
        json.dumps({"completion": completion, "reward": 0.5}).encode()
    )
    first, tool, last = result.completion
    assert first.tool_calls[0].name == "bash"
    assert tool.tool_call_id == "a"
    assert last.content == "ok" and last.tool_calls[0].name == "bash"


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"", "empty"),
        (b"\xff\xfe", "UTF-8"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"completion": "x"}', '"reward"'),
        (b'{"reward": 1}', '"completion"'),
        (b'{"completion": "x", "reward": true}', "not a number"),
        (b'{"completion": "x", "reward": "1"}', "not a number"),
        (b'{"completion": "x", "reward": NaN}', "NaN"),
        (b'{"completion": "x", "reward": 1e999}', "finite"),
        (b'{"completion": "x", "reward": 1, "reward": 0}', "repeats"),
        (b'{"completion": 3, "reward": 1}', "completion"),
        (b'{"completion": [{"role": "root"}], "reward": 1}', "role"),
        (b'{"completion": [{"role": "tool", "content": {}}], "reward": 1}', "content"),
        (b'{"completion": "x", "reward": 1', "not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "nests deeper than 100 levels"),
    ],
)
def test_anything_but_a_well_formed_result_is_malformed(data, words):
    found = problem(data)
    assert found.reason == "result_malformed"
    assert words in found.detail
    assert "\n" not in found.detail


def test_a_missing_file_is_missing(tmp_path):
    with pytest.raises(ResultProblem) as caught:
        read_result(tmp_path / "result.json")
    assert caught.value.reason == "result_missing"


def test_a_link_to_a_host_file_is_never_followed(tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text('{"completion": "host secret", "reward": 1}')
    (tmp_path / "result.json").symlink_to(secret)
    with pytest.raises(ResultProblem) as caught:
        read_result(tmp_path / "result.json")
    assert caught.value.reason == "result_malformed"


def test_a_fifo_or_an_oversized_file_is_refused_without_reading_it(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ResultProblem):
        read_result(tmp_path / "fifo")  # would block a reader that waited
    big = tmp_path / "big.json"
    big.write_bytes(b'{"completion": "' + b"a" * 2000 + b'", "reward": 1}')
    with pytest.raises(ResultProblem) as caught:
        read_result(big, max_bytes=1000)
    assert "over the 1,000 accepted" in caught.value.detail


def test_completions_differing_only_in_call_ids_and_argument_spacing_are_the_same():
    one = normalise(
        [
            {
                "role": "assistant",
                "content": "hi ",
                "tool_calls": [
                    {"id": "call_1", "name": "bash", "arguments": '{"a": 1, "b": 2}'}
                ],
            }
        ]
    )
    other = normalise(
        [
            {
                "role": "assistant",
                "content": "hi",
                "tool_calls": [
                    {"id": "call_9", "name": "bash", "arguments": '{"b":2,"a":1}'}
                ],
            }
        ]
    )
    assert same(one, other)
    assert not same(one, normalise("hi"))


def test_similarity_is_token_level_jaccard():
    assert similarity(normalise("a b c"), normalise("A b d")) == 0.5
    assert similarity(normalise(""), normalise("")) == 0.0  # no words, no evidence
    assert similarity(normalise("x"), normalise("y")) == 0.0
