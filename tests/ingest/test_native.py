"""The native record format, as pure functions: no database."""

from __future__ import annotations

import hashlib
import json

import pytest

from replayhub.ingest.native import (
    RecordError,
    canonical_json,
    check_record,
    parse_line,
    stored_part,
    whole_record,
)
from tests.records import record

LIMIT = 1024


def check(value, *, max_prompt_bytes=LIMIT, project="shop"):
    return check_record(value, max_prompt_bytes=max_prompt_bytes, project=project)


def problem(value, **kw) -> str:
    with pytest.raises(RecordError) as caught:
        check(value, **kw)
    return str(caught.value)


def parse_problem(data: bytes, **kw) -> str:
    with pytest.raises(RecordError) as caught:
        parse_line(data, **kw)
    return str(caught.value)


# --- bytes to JSON ---------------------------------------------------------------


def test_invalid_utf8_is_refused_with_the_position_of_the_bad_byte():
    message = parse_problem(b'{"prompt": "caf\xe9"}')
    assert message.startswith("not valid UTF-8: byte 16 of the line")
    assert "\\xe9" in message


def test_a_truncated_last_line_says_the_file_was_probably_cut_off():
    message = parse_problem(b'{"external_id": "run-1", "prom', terminated=False)
    assert message.startswith("not valid JSON: ")
    assert "the file was probably cut off" in message


def test_a_broken_line_in_the_middle_is_not_called_cut_off():
    assert "cut off" not in parse_problem(b'{"a": }')


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_standard_numbers_are_refused(constant):
    assert "is not a JSON number" in parse_problem(
        b'{"usage": {"cost_usd": %s}}' % constant
    )


def test_a_key_repeated_in_one_object_is_refused():
    message = parse_problem(b'{"external_id": "a", "external_id": "b"}')
    assert message == 'the key "external_id" appears twice in one object'


def test_deep_nesting_is_refused_without_crashing():
    assert parse_problem(b"[" * 100_000) == "the JSON nests deeper than 100 levels"


def test_a_number_with_thousands_of_digits_is_refused():
    assert parse_problem(b'{"n": ' + b"9" * 5000 + b"}").startswith("not valid JSON")


def test_a_utf8_byte_order_mark_is_ignored():
    assert parse_line(b'\xef\xbb\xbf{"a": 1}') == {"a": 1}


# --- the record ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "kind"),
    [([record()], "an array"), ("run-1", "a string"), (42, "a number"), (None, "null")],
)
def test_json_that_is_not_an_object_is_refused(value, kind):
    assert problem(value) == f"a record must be a JSON object, not {kind}"


def test_every_missing_required_field_is_named():
    message = problem(record(drop=["external_id", "prompt", "started_at"]))
    assert message.split("; ") == [
        "external_id: required field is missing",
        "prompt: required field is missing",
        "started_at: required field is missing",
    ]


def test_a_required_field_sent_as_null_is_named():
    assert problem(record(prompt=None)) == "prompt: required field is null"


def test_the_project_is_required_when_the_import_names_none():
    message = problem(record(), project=None)
    assert message.startswith("project: required field is missing")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"title": 7}, "title: must be a string, not a number 7"),
        ({"external_id": 12}, "external_id: must be a string, not a number 12"),
        ({"prompt": ["a"]}, "prompt: must be a string, not an array"),
        (
            {"original_tests_passed": "yes"},
            'original_tests_passed: must be true, false or null, not a string "yes"',
        ),
        ({"sandbox": "docker"}, 'sandbox: must be an object, not a string "docker"'),
        ({"sandbox": {"image": 3}}, "sandbox.image: must be a string, not a number 3"),
        ({"usage": []}, "usage: must be an object, not an array"),
        (
            {"usage": {"input_tokens": "12"}},
            'usage.input_tokens: must be a whole number, not a string "12"',
        ),
        (
            {"usage": {"turns": True}},
            "usage.turns: must be a whole number, not a boolean True",
        ),
        ({"usage": {"output_tokens": 1.5}}, "usage.output_tokens: must be a whole"),
        ({"usage": {"input_tokens": -1}}, "usage.input_tokens: -1 is out of range"),
        ({"usage": {"cost_usd": "0.1"}}, "usage.cost_usd: must be a number"),
        ({"usage": {"cost_usd": -0.5}}, "usage.cost_usd: -0.5 is not a non-negative"),
        ({"started_at": 1700000000}, "started_at: must be an ISO 8601 date-time"),
        ({"project": 5}, "project: must be a string, not a number 5"),
    ],
)
def test_wrong_types_are_refused_naming_the_field(fields, message):
    assert problem(record(**fields)).startswith(message)


def test_all_problems_of_a_line_are_reported_together():
    message = problem(record(title=1, model=2, started_at="soon"))
    assert [part.split(":")[0] for part in message.split("; ")] == [
        "title",
        "model",
        "started_at",
    ]


@pytest.mark.parametrize(
    "sha",
    [
        "HEAD",
        "main",
        "--upload-pack=touch /tmp/pwned",
        "abc12",  # too short
        "A" * 40,  # upper case
        "g" * 40,
        "a" * 65,
        "a1b2c3d ",
    ],
)
@pytest.mark.parametrize("field", ["base_sha", "original_commit"])
def test_a_sha_that_is_not_lowercase_hex_is_refused(field, sha):
    message = problem(record(**{field: sha}))
    assert message.startswith(f"{field}: ")
    assert "is not a commit sha (7 to 64 lowercase hex digits)" in message


def test_short_and_sha256_length_commit_names_are_accepted():
    checked = check(record(base_sha="abc1234", original_commit="f" * 64))
    assert (checked.base_sha, checked.original_commit) == ("abc1234", "f" * 64)


@pytest.mark.parametrize("absent", ["null", "missing"])
def test_a_run_without_an_original_commit_is_valid(absent):
    value = (
        record(original_commit=None)
        if absent == "null"
        else record(drop=["original_commit"])
    )
    assert check(value).original_commit == ""


def test_a_sandbox_config_hash_must_be_a_sha256():
    message = problem(record(sandbox={"config_sha256": "abc"}))
    assert message.startswith("sandbox.config_sha256: ")
    assert "is not a sha256 (64 lowercase hex digits)" in message


@pytest.mark.parametrize(
    "moment", ["2024-11-03T02:14:07", "2024-11-03", "yesterday", "03/11/2024 02:14"]
)
def test_started_at_must_be_iso_8601_with_a_timezone(moment):
    assert problem(record(started_at=moment)).startswith("started_at: ")


@pytest.mark.parametrize(
    "moment",
    [
        "2024-11-03T02:14:07Z",
        "2024-11-03T02:14:07.250+01:00",
        "2024-11-03 02:14:07-05:00",
    ],
)
def test_started_at_accepts_any_offset(moment):
    assert check(record(started_at=moment)).started_at.utcoffset() is not None


def test_a_prompt_above_the_limit_is_refused_naming_the_limit():
    message = problem(record(prompt="é" * 600))  # 1,200 UTF-8 bytes
    assert message == "prompt: 1,200 bytes is above the limit of 1,024 bytes"


def test_a_prompt_at_the_limit_is_accepted():
    assert len(check(record(prompt="é" * 512)).prompt) == 512


def test_an_empty_prompt_is_refused():
    assert problem(record(prompt="  ")) == "prompt: must not be empty"


def test_text_longer_than_its_column_is_refused_rather_than_cut():
    assert problem(record(title="t" * 501)).startswith(
        "title: 501 characters is above the limit of 500"
    )


def test_an_external_id_with_control_characters_is_refused():
    message = problem(record(external_id="run-1\n\x1b[31m"))
    assert message == "external_id: must not contain control characters"


def test_a_record_naming_another_project_is_refused():
    message = problem(record(project="billing"), project="shop")
    assert (
        message == 'project: the record names "billing" but the import is into "shop"'
    )


def test_the_project_comes_from_the_record_when_the_import_names_none():
    assert check(record(project="billing"), project=None).project == "billing"


def test_a_nul_character_anywhere_is_refused():
    assert "NUL character" in problem(record(extra={"note": "a\x00b"}))


def test_a_backslash_followed_by_u0000_as_text_is_not_a_nul():
    assert check(record(output="literally \\u0000")).output == "literally \\u0000"


def test_an_unpaired_surrogate_is_refused():
    value = parse_line(json.dumps(record(title="\ud800")).encode())
    assert "unpaired UTF-16 surrogate" in problem(value)


def test_a_number_too_large_for_json_is_refused():
    value = parse_line(line_of(record(extra=1e999)))
    assert problem(value) == "contains a number too large to store"


def line_of(value) -> bytes:
    return json.dumps(value).replace("Infinity", "1e999").encode()


# --- what is kept ----------------------------------------------------------------


def test_unknown_keys_are_kept_in_the_raw_record():
    value = record(platform={"job": 88412, "tags": ["nightly"]}, reviewed=None)
    checked = check(value)
    assert checked.raw == value
    stored = json.loads(checked.stored_json)
    assert stored["platform"] == value["platform"] and stored["reviewed"] is None
    assert whole_record(stored, {"prompt": checked.prompt, "output": checked.output})


@pytest.mark.parametrize(
    "fields",
    [
        {"prompt": "p", "output": "o"},
        {"prompt": "p", "output": ""},
        {"prompt": "p", "output": None},
        {"prompt": "p"},
        {"prompt": "", "output": 3},
    ],
)
def test_the_stored_part_and_the_columns_give_back_the_record_exactly(fields):
    value = {"external_id": "run-1", "extra": {"prompt": "nested stays"}, **fields}
    columns = {
        name: fields[name] if isinstance(fields.get(name), str) else ""
        for name in ("prompt", "output")
    }
    stored = stored_part(value)
    # Text its column holds is not stored again.
    assert all(name not in stored for name, text in columns.items() if text)
    assert whole_record(stored, columns) == value
    # A row that stored the whole record reads the same.
    assert whole_record(value, columns) == value


def test_content_that_looks_like_html_or_sql_is_kept_verbatim():
    nasty = "<script>alert(1)</script> '; DROP TABLE replayhub_run; --"
    checked = check(record(title=nasty, prompt=nasty, output=nasty))
    assert (checked.title, checked.prompt, checked.output) == (nasty, nasty, nasty)


def test_the_hash_is_over_canonical_json_so_key_order_and_spacing_do_not_matter():
    value = record()
    spaced = json.dumps(dict(reversed(value.items())), indent=2).encode()
    assert check(parse_line(spaced)).sha256 == check(value).sha256
    expected = hashlib.sha256(canonical_json(value).encode()).hexdigest()
    assert check(value).sha256 == expected


def test_the_hash_ignores_the_project_key_so_it_may_come_from_either_side():
    with_key = check(record(project="shop"), project=None)
    without = check(record(), project="shop")
    assert with_key.sha256 == without.sha256
    assert "project" in with_key.raw
    assert "project" not in without.raw


def test_any_change_of_content_changes_the_hash():
    assert (
        check(record()).sha256 != check(record(output="Done; 13 tests passed.")).sha256
    )
