"""The fast path (orjson, straight-line checks) reads and refuses exactly as the
strict path (stdlib ``json``, the field checker) does."""

from __future__ import annotations

import itertools
import json
import secrets
import string

import pytest

from replayhub.ingest import rows
from replayhub.ingest.fastpath import columns, read_columns, read_record
from replayhub.ingest.native import (
    RecordError,
    _parse_strictly,
    check_record,
    parse_line,
)
from tests.records import record

LIMIT = 1024


def outcome(function, *args, **kw):
    try:
        return ("ok", function(*args, **kw))
    except RecordError as error:
        return ("refused", str(error))


def strict(data: bytes, terminated: bool = True):
    return outcome(_parse_strictly, data, terminated=terminated)


def fields(checked):
    return {name: getattr(checked, name) for name in checked.__slots__}


@pytest.mark.parametrize(
    "data",
    [
        b'{"a": 1, "a": 2}',
        b'{"a" : 1, "a": 2}',
        b'{"a"\t:1,"a"\n:\r2}',
        b'{"x": {"b": 1, "b": 1}}',
        b'{"x": [{"b": 1}, {"c": 1, "c": 2}]}',
        b'{"x": {"y": {"z": 1, "z": 1}}, "w": "\\":"}',
        b'{"note": "he said \\": yes\\" : no", "a": 1, "a": 1}',
        b'{"note": "he said \\": yes"}',
        b'{"n": 18446744073709551616}',
        b'{"n": -9223372036854775809}',
        b'{"n": 123456789012345678901234567890}',
        b'{"n": 1e999}',
        b'{"n": -1e999}',
        b'{"n": NaN}',
        b'{"n": Infinity}',
        b'{"n": 0.00001}',
        b'{"n": 1.5e-7}',
        b'{"n": 1e16, "m": 1E+3, "k": -0.0, "j": -0}',
        b'{"s": "\\ud800"}',
        b'{"s": "\\udc00\\ud800"}',
        b'{"s": "\\ud83d\\ude00"}',
        b'{"s": "\xed\xa0\x80"}',
        b'{"s": "caf\xe9"}',
        b'\xef\xbb\xbf{"a": 1}',
        b'{"a": 1} x',
        b'{"a": 1,}',
        b"[1, 2]",
        b'"text"',
        b"42",
        b"null",
        b'{"s": "a\x01b"}',
        b'{"s": "\\u0000"}',
        b'{"external_id": "run-1", "prom',
        b"[" * 5000,
        b'{"a": ' + b"[" * 300 + b"]" * 300 + b"}",
        b'{"a": ' + b"[" * 990 + b"]" * 990 + b"}",
        b'{"a": ' + b'{"b": ' * 700 + b"1" + b"}" * 700 + b"}",
    ],
)
@pytest.mark.parametrize("terminated", [True, False])
def test_parse_line_reads_and_refuses_as_the_strict_parser(data, terminated):
    fast = outcome(parse_line, data, terminated=terminated)
    expected = strict(data, terminated)
    assert fast[0] == expected[0]
    if fast[0] == "ok":
        assert json.dumps(fast[1]) == json.dumps(expected[1])
        assert type(fast[1]) is type(expected[1])
    else:
        assert fast == expected


def both_ways(value, project="shop", max_prompt_bytes=LIMIT, ensure_ascii=True):
    """read_record on the line against parse_line + check_record on the value."""
    data = json.dumps(value, ensure_ascii=ensure_ascii).encode()
    fast = outcome(
        read_record, data, max_prompt_bytes=max_prompt_bytes, project=project
    )
    slow = outcome(
        lambda: check_record(
            _parse_strictly(data, terminated=True),
            max_prompt_bytes=max_prompt_bytes,
            project=project,
        )
    )
    return fast, slow


@pytest.mark.parametrize(
    "fields_",
    [
        {},
        {"project": "shop"},
        {"project": None},
        {"project": "other"},
        {"project": 5},
        {"project": "not a slug"},
        {"external_id": " "},
        {"external_id": "x" * 256},
        {"external_id": "a\tb"},
        {"prompt": "é" * 300},
        {"prompt": "é" * 600},
        {"prompt": ""},
        {"title": "t" * 500},
        {"title": "t" * 501},
        {"title": ""},
        {"model": 3},
        {"base_sha": "abc1234"},
        {"base_sha": "ABC1234"},
        {"original_commit": None},
        {"original_tests_passed": None},
        {"original_tests_passed": 1},
        {"started_at": "2024-11-03T02:14:07"},
        {"started_at": "2024-11-03 02:14:07-05:00"},
        {"started_at": "soon"},
        {"output": None},
        {"output": 1},
        {"sandbox": None},
        {"sandbox": {}},
        {"sandbox": {"image": "i" * 513}},
        {"sandbox": {"config_sha256": "C" * 64}},
        {"sandbox": "docker"},
        {"usage": None},
        {"usage": {}},
        {"usage": {"turns": 2**63}},
        {"usage": {"turns": True}},
        {"usage": {"cost_usd": 0}},
        {"usage": {"cost_usd": 0.00001}},
        {"usage": {"cost_usd": -1}},
        {"usage": {"cost_usd": 2**70}},
        {"usage": {"extra": [1e-9, {"k": "v"}]}},
        {"extra": {"note": "a\x00b"}},
        {"extra": {"prompt": "Fix bug 1 in the cart module."}},
        {"extra": {"output": "Done; 12 tests passed.", "project": "shop"}},
        {"extra": {"project": None}, "project": None},
        {"extra": ',"prompt":"Fix bug 1 in the cart module."'},
        {"a": {"prompt": "Fix bug 1 in the cart module."}, "b": [{"usage": {}}]},
        {"extra": "literally \\u0000"},
        {"extra": "\U0001f600 \u2028 caf\u00e9"},
        {"extra": 10**30},
        {"drop": ["title", "usage", "sandbox", "output"]},
        {"extra": json.loads("[" * 30 + "1.5" + "]" * 30)},
        {"extra": json.loads("[" * 400 + "]" * 400)},
        {"drop": ["external_id", "prompt", "started_at"]},
    ],
)
@pytest.mark.parametrize("project", ["shop", None])
@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_read_record_accepts_and_refuses_as_the_full_checks(
    fields_, project, ensure_ascii
):
    fast, slow = both_ways(
        record(**fields_), project=project, ensure_ascii=ensure_ascii
    )
    assert fast[0] == slow[0]
    if fast[0] == "ok":
        assert fields(fast[1]) == fields(slow[1])
    else:
        assert fast == slow


@pytest.mark.parametrize(
    "fields_",
    [
        {},
        {"project": "shop"},
        {"project": None},
        {"output": ""},
        {"output": None},
        {"drop": ["title", "usage", "sandbox", "output"]},
        {"title": "t" * 501},
        {"usage": {"extra": [1e-9, {"k": "v"}]}},
        {"extra": "literally \\u0000"},
        {"extra": {"note": "a\x00b"}},
        {"started_at": "soon"},
    ],
)
def test_the_row_stored_is_the_checked_records_on_either_path(fields_):
    """What COPY stores (read_columns, skipping the Record on the usual path)
    is made of the same values as the record the full checks give."""
    data = json.dumps(record(**fields_)).encode()
    read = outcome(read_columns, data, max_prompt_bytes=LIMIT, project="shop")
    checked = outcome(read_record, data, max_prompt_bytes=LIMIT, project="shop")
    if checked[0] == "ok":
        checked = ("ok", columns(checked[1]))
    assert read == checked


def test_a_record_from_a_python_caller_with_a_str_subclass_is_checked_in_full():
    class Text(str):
        pass

    checked = check_record(
        record(title=Text("Task")), max_prompt_bytes=LIMIT, project="shop"
    )
    assert checked.title == "Task"
    assert (
        checked.sha256
        == check_record(
            record(title="Task"), max_prompt_bytes=LIMIT, project="shop"
        ).sha256
    )


def test_the_usual_record_takes_the_fast_path():
    from replayhub.ingest.fastpath import _check_usual
    from replayhub.ingest.native import _fast_parse

    usual = [
        record(title="Café"),
        record(project="shop"),
        record(project=None),
        record(output=""),
        record(drop=["output", "usage", "sandbox"]),
    ]
    for value, ensure_ascii in itertools.product(usual, (True, False)):
        data = json.dumps(value, ensure_ascii=ensure_ascii).encode()
        parsed = _fast_parse(data)
        assert parsed is not None
        checked = _check_usual(parsed, LIMIT, "shop")
        assert checked is not None
        expected = check_record(value, max_prompt_bytes=LIMIT, project="shop")
        assert fields(checked) == fields(expected)


@pytest.mark.parametrize("binary", [True, False])
def test_a_batch_reads_each_line_as_it_is_read_alone_its_keys_masked(binary):
    # Made at random, in OpenAI's 48-character shape.
    key = "sk-" + "".join(
        secrets.choice(string.ascii_letters + string.digits) for _ in range(48)
    )
    values = [
        record(1),
        record(2, output=f"export OPENAI_API_KEY={key}"),
        record(3, output="the bearer of good news"),  # a probe's hit, no key
        {"external_id": "not a record"},
        record(5, title=key),
    ]
    batch: rows.Lines = [
        (n, json.dumps(v).encode(), True) for n, v in enumerate(values, 1)
    ]
    options = {
        "project": "shop",
        "max_prompt_bytes": LIMIT,
        "max_line_bytes": 2**20,
        "binary": binary,
    }

    together = rows.read_batch(batch, **options)
    alone = [rows.read_batch([line], **options) for line in batch]
    assert together.rows == [row for parsed in alone for row in parsed.rows]
    assert together.invalid == [entry for parsed in alone for entry in parsed.invalid]
    assert [row.line for row in together.rows] == [1, 2, 3, 5]
    assert key not in repr(together)
    if not binary:
        assert together.rows[1].columns.output == "export OPENAI_API_KEY=[redacted]"
        assert together.rows[3].columns.title == "[redacted]"
        assert together.rows[2].columns.output == "the bearer of good news"
    # Without the key, each line is read as it was sent.
    clean = rows.read_batch(batch[:1] + batch[2:3], **options)
    assert clean.rows == alone[0].rows + alone[2].rows


def _repeated(data: bytes, member: bytes, before: bytes = b"}") -> bytes:
    """``data`` with ``member`` written again before its last ``before``."""
    at = data.rindex(before)
    return data[:at] + member + data[at:]


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: _repeated(d, b', "title": "again: yes"'),
        lambda d: _repeated(d, b', "title" : "no colon"'),
        lambda d: _repeated(d, b',"extra":"a:b","extra":"a:b"'),
        lambda d: _repeated(d, b', "project": "shop"'),
        lambda d: d.replace(b'"sandbox": {', b'"sandbox": {"image": "x:y", ', 1),
        lambda d: d.replace(b'"usage": {', b'"usage": {"input_tokens"\t:\n1, ', 1),
    ],
)
@pytest.mark.parametrize("project", [None, "shop"])
def test_a_key_written_twice_is_refused_on_the_way_rows_are_read(edit, project):
    fields_ = {"project": project}
    data = edit(json.dumps(record(**fields_)).encode())
    assert data != json.dumps(record(**fields_)).encode()

    read = outcome(read_columns, data, max_prompt_bytes=LIMIT, project="shop")

    assert read == strict(data)
    assert read[0] == "refused" and "appears twice" in read[1]


@pytest.mark.parametrize(
    "fields_",
    [{}, {"project": "shop"}, {"project": None}, {"extra": {"url": "https://x:8080"}}],
)
def test_a_usual_line_without_escapes_is_read_the_plain_way(fields_):
    from replayhub.ingest.fastpath import _read_plain

    data = json.dumps(record(**fields_)).encode()
    plain = _read_plain(data, LIMIT, "shop")

    assert plain is not None
    assert plain == read_columns(data, max_prompt_bytes=LIMIT, project="shop")
    assert plain == columns(
        check_record(json.loads(data), max_prompt_bytes=LIMIT, project="shop")
    )
