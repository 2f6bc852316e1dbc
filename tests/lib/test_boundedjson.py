"""The one reader of untrusted JSON: what it reads as ``json.loads`` does, and
everything it refuses -- too large, too deep, not JSON -- refused in one line,
never with a ``RecursionError``, however deep the text and however deep the
caller's own stack."""

from __future__ import annotations

import json
import math
import sys

import pytest

from replayhub.lib import boundedjson
from replayhub.lib.boundedjson import (
    MAX_DEPTH,
    REFUSED_KEY,
    STORED_MAX_DEPTH,
    Refused,
    StoredDecoder,
    StoredListDecoder,
    check_depth,
    depth,
    loads,
)


def nested(levels: int, *, opener: str = "[", inner: str = "1") -> str:
    """``levels`` containers around ``inner``: arrays, objects or both in turn."""
    if opener == "mixed":
        text = inner
        for level in range(levels):
            text = f'{{"k":{text}}}' if level % 2 else f"[{text}]"
        return text
    close = {"[": "]", "{": "}"}[opener]
    if opener == "{":
        return '{"k":' * levels + inner + close * levels
    return opener * levels + inner + close * levels


def one_line(error: Exception) -> bool:
    text = str(error)
    return bool(text) and "\n" not in text and "\r" not in text


# --- what is read ----------------------------------------------------------------

READ_AS_JSON_DOES = [
    "0",
    "-1.5e3",
    '"text"',
    "true",
    "null",
    "[]",
    "{}",
    '{"a": [1, 2, {"b": null}], "c": "d"}',
    '[1, "two", 3.0, false, {"x": []}]',
    ' \n {"spaced" : [ 1 , 2 ] } \n',
    '{"a": 1, "a": 2}',  # the last of a repeated key, as json.loads
    '"\\u00e9\\ud83d\\ude00"',
    '{"bracket text": "[[[[{{{{"}',
]


@pytest.mark.parametrize("text", READ_AS_JSON_DOES)
def test_valid_json_reads_as_json_loads_reads_it(text):
    assert loads(text) == json.loads(text)
    assert loads(text.encode()) == json.loads(text)


@pytest.mark.parametrize(
    "data",
    [b"[1, 2]", bytearray(b"[1, 2]"), memoryview(b"[1, 2]"), "[1, 2]"],
    ids=["bytes", "bytearray", "memoryview", "str"],
)
def test_bytes_bytearray_memoryview_and_text_are_all_read(data):
    assert loads(data) == [1, 2]


@pytest.mark.parametrize(
    "text",
    [
        "NaN",
        "[Infinity, -Infinity]",
        '"\\ud800"',
        "\ufeff[1]",
    ],
)
def test_lenient_reads_what_python_json_reads_and_orjson_does_not(text):
    expected = json.loads(text.removeprefix("\ufeff"))
    got = loads(text.encode("utf-8"))
    if isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == expected


def test_utf16_text_is_read_as_json_loads_reads_it():
    data = '{"a": [1]}'.encode("utf-16")
    assert loads(data) == json.loads(data) == {"a": [1]}


@pytest.mark.parametrize("text", ["NaN", '"\\ud800"', "\ufeff[1]"])
def test_strict_reading_refuses_what_orjson_does_not_read(text):
    with pytest.raises(Refused) as refused:
        loads(text.encode("utf-8"), lenient=False)
    assert refused.value.bound == ""
    assert str(refused.value).startswith("not valid JSON: ")
    assert one_line(refused.value)


def test_an_integer_past_64_bits_reads_as_a_float():
    assert loads("18446744073709551616") == float(2**64)
    assert loads("18446744073709551615") == 2**64 - 1


# --- depth -------------------------------------------------------------------------


@pytest.mark.parametrize("opener", ["[", "{", "mixed"])
def test_the_bound_itself_is_read_and_one_level_more_is_refused(opener):
    assert depth(loads(nested(MAX_DEPTH, opener=opener))) == MAX_DEPTH
    with pytest.raises(Refused) as refused:
        loads(nested(MAX_DEPTH + 1, opener=opener))
    assert refused.value.bound == "depth"
    assert str(refused.value) == f"the JSON nests deeper than {MAX_DEPTH} levels"


@pytest.mark.parametrize("levels", [101, 700, 950, 1023, 1024, 1025, 5_000, 50_000])
def test_any_depth_past_the_bound_is_refused_in_one_line(levels):
    for data in (nested(levels), nested(levels).encode()):
        with pytest.raises(Refused) as refused:
            loads(data)
        assert refused.value.bound == "depth"
        assert one_line(refused.value)


@pytest.mark.parametrize("levels", [150, 5_000])
def test_deep_text_only_python_json_reads_is_refused_by_depth_too(levels):
    # NaN sends the text to the stdlib parser, which recurses: its limit is
    # met as a refusal, never as a RecursionError.
    with pytest.raises(Refused) as refused:
        loads(nested(levels, inner="NaN"))
    assert refused.value.bound == "depth"


def test_a_caller_chooses_its_own_depth():
    assert loads("[[[1]]]", max_depth=3) == [[[1]]]
    with pytest.raises(Refused, match="deeper than 2 levels"):
        loads("[[[1]]]", max_depth=2)


def test_a_deep_value_is_refused_from_a_caller_near_the_recursion_limit():
    # The reader spends no Python frame a level: a caller whose own stack is
    # nearly full still gets a refusal, not a RecursionError.
    margin = 40

    def call_at(frames: int, data: str):
        if frames:
            return call_at(frames - 1, data)
        return loads(data)

    used = len(_stack())
    room = sys.getrecursionlimit() - used - margin
    assert call_at(room, nested(MAX_DEPTH)) is not None
    with pytest.raises(Refused):
        call_at(room, nested(20_000))
    with pytest.raises(Refused):
        call_at(room, nested(900, inner="NaN"))


def _stack() -> list:
    frames, frame = [], sys._getframe()
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


def test_brackets_inside_strings_do_not_count_as_depth():
    text = json.dumps({"code": "[" * 10_000 + "{" * 10_000, "list": [[1]]})
    assert loads(text)["list"] == [[1]]


def test_a_wide_shallow_value_is_read_whole():
    value = [{"i": i, "tags": [str(i)]} for i in range(50_000)]
    assert loads(json.dumps(value)) == value


DEPTHS = [
    (1, 0),
    ("x", 0),
    (None, 0),
    ([], 1),
    ({}, 1),
    ([1, 2, 3], 1),
    ({"a": {"b": [1]}}, 3),
    ([[], [[]], [[[]]]], 4),
    ([{"a": [[{}]]}, 1], 5),
]


@pytest.mark.parametrize(("value", "expected"), DEPTHS)
def test_depth_counts_containers_down_the_deepest_branch(value, expected):
    assert depth(value) == expected


def test_depth_of_a_value_too_deep_for_recursion_is_counted_all_the_same():
    value: list = []
    for _ in range(100_000):
        value = [value]
    assert depth(value) == 100_001
    assert depth(value, stop_past=10) == 11


def test_check_depth_refuses_a_python_value_past_the_bound():
    check_depth(json.loads(nested(MAX_DEPTH)))
    with pytest.raises(Refused, match="deeper than 100 levels"):
        check_depth(json.loads(nested(MAX_DEPTH + 1)))


def test_check_depth_trusts_a_count_of_openers_at_or_under_the_bound():
    deep = json.loads(nested(150))
    check_depth(deep, openers=MAX_DEPTH)  # the caller vouches for the text
    with pytest.raises(Refused):
        check_depth(deep, openers=MAX_DEPTH + 1)


# --- size and syntax ------------------------------------------------------------------


def test_the_size_bound_itself_is_read_and_one_byte_more_is_refused():
    text = '"' + "x" * 98 + '"'
    assert loads(text, max_bytes=100) == "x" * 98
    with pytest.raises(Refused) as refused:
        loads(text + " ", max_bytes=100)
    assert refused.value.bound == "size"
    assert str(refused.value) == "the JSON is larger than 100 bytes"


def test_the_size_bound_is_checked_before_anything_is_parsed():
    with pytest.raises(Refused, match="larger than 10 bytes"):
        loads(b"[" * 1_000_000, max_bytes=10)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"{",
        b"[1,]",
        b"{'single': 1}",
        b"[1] trailing",
        b"\xff\xfe\x00garbage",
        b"\x80\x81",
        b"{\n\n\n",
        b"[" * 10 + b"oops",
    ],
)
def test_text_that_is_not_json_is_refused_in_one_line(data):
    with pytest.raises(Refused) as refused:
        loads(data)
    assert refused.value.bound == ""
    assert str(refused.value).startswith("not valid JSON")
    assert one_line(refused.value)


def test_a_refusal_is_a_value_error():
    assert issubclass(Refused, ValueError)
    assert not issubclass(Refused, RecursionError)


def test_a_message_given_on_several_lines_keeps_its_first():
    assert str(Refused("first\nsecond")) == "first"


# --- stored values --------------------------------------------------------------------


def test_the_stored_decoder_reads_what_json_loads_reads():
    text = '{"a": [1, {"b": "c"}]}'
    assert json.loads(text, cls=StoredDecoder) == json.loads(text)


def test_a_stored_value_within_twice_the_bound_is_read():
    text = nested(STORED_MAX_DEPTH)
    assert depth(json.loads(text, cls=StoredDecoder)) == STORED_MAX_DEPTH


@pytest.mark.parametrize("levels", [STORED_MAX_DEPTH + 1, 950, 5_000])
def test_a_stored_value_too_deep_reads_as_refused_in_the_columns_shape(levels):
    text = '{"pad": ' + nested(levels) + "}"
    refused = json.loads(text, cls=StoredDecoder)
    assert set(refused) == {REFUSED_KEY}
    assert refused[REFUSED_KEY] == (
        f"not shown: the JSON nests deeper than {STORED_MAX_DEPTH} levels"
    )
    [item] = json.loads(text, cls=StoredListDecoder)
    assert set(item) == {REFUSED_KEY}


def test_stored_text_that_is_not_json_fails_as_the_default_decoder_fails():
    with pytest.raises(json.JSONDecodeError):
        json.loads("{not json", cls=StoredDecoder)


def test_the_module_has_one_exception_type():
    errors = [
        name
        for name, value in vars(boundedjson).items()
        if isinstance(value, type) and issubclass(value, Exception)
    ]
    assert errors == ["Refused"]
