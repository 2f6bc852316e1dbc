"""``record_sha256`` is pinned: the same record must keep the same hash forever.

The values below were computed by the original stdlib-``json`` implementation
(sorted keys, ``","``/``":"`` separators, ``ensure_ascii=False``, ``repr`` of
floats). A faster serializer must reproduce them byte for byte, or the runs
already stored would turn into conflicts on the next import of the same file.
"""

from __future__ import annotations

import hashlib
import json
import math
import random

import pytest

from replayhub.ingest.native import canonical_json, check_record, stored_part
from replayhub.ingest.native import parse_line as parse
from tests.records import record

KNOWN_SHA256 = "3ef34750745871c813e6c6a23cc015c792212f3656e58749e3d039a08d4a1283"
KNOWN_RAW_JSON = (
    '{"effort":"high","external_id":"run-0001","model":"claude-sonnet-4-5",'
    '"original_branch":"agent/task-1",'
    '"original_commit":"0000000000000000000000000000000000000001",'
    '"original_tests_passed":true,"output":"Done; 12 tests passed.",'
    '"prompt":"Fix bug 1 in the cart module.","provider":"anthropic",'
    '"sandbox":{"config_sha256":"' + "c" * 64 + '",'
    '"image":"ghcr.io/acme/agent@sha256:' + "ab" * 32 + '"},'
    '"started_at":"2024-11-03T02:14:07Z","title":"Task 1",'
    '"usage":{"cost_usd":0.01,"input_tokens":1200,"output_tokens":300}}'
)

# Non-ASCII, an astral character, escapes, U+2028, DEL, a literal "\u0000",
# floats in exponent form, -0.0, an integer beyond 64 bits, keys that sort
# differently by case and code point, and a project key (left out of the hash).
TRICKY_LINE = (
    '{"project": "shop", "external_id": "run-\\u00e9-1", "prompt": "Caf\\u00e9 '
    '\\ud83d\\ude00 \\"q\\" \\\\ \\t\\u2028 <&> \\u007f", '
    '"started_at": "2024-11-03T03:14:07.250+01:00", "usage": {"cost_usd": 0.1, '
    '"input_tokens": 12, "turns": 0, "x": 1e22, "y": 1.5e-7, "z": -0.0, '
    '"w": 123456789012345678901234567890}, "extra": {"b": [1, 2.50, true, null, '
    '{}], "a": "\\\\u0000"}, "\\u00e9t\\u00e9": "\\/", "Z": 1, "_": 1e16}'
)
TRICKY_SHA256 = "832b4d78f6750877ec21c89bf04bc0e8249a0afce470cda88f78d988c263cb20"
TRICKY_RAW_JSON = (
    '{"project":"shop","Z":1,"_":1e+16,"external_id":"run-é-1",'
    '"extra":{"a":"\\\\u0000","b":[1,2.5,true,null,{}]},'
    '"prompt":"Café 😀 \\"q\\" \\\\ \\t\u2028 <&> \x7f",'
    '"started_at":"2024-11-03T03:14:07.250+01:00",'
    '"usage":{"cost_usd":0.1,"input_tokens":12,"turns":0,'
    '"w":123456789012345678901234567890,"x":1e+22,"y":1.5e-07,"z":-0.0},'
    '"été":"/"}'
)


def check(value, project="shop"):
    return check_record(value, max_prompt_bytes=1024, project=project)


def stdlib_canonical(value) -> str:
    """The reference: how ``record_sha256`` was defined when it was introduced."""
    return json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


def stored_text(canonical: str) -> str:
    """The stored part of a canonical text: the prompt and output, kept in their
    own columns, taken out."""
    value = json.loads(canonical)
    for name in ("prompt", "output"):
        if isinstance(value.get(name), str) and value[name]:
            del value[name]
    return stdlib_canonical(value)


def test_the_hash_of_a_known_record_is_pinned():
    checked = check(record())
    assert checked.sha256 == KNOWN_SHA256
    assert checked.sha256 == hashlib.sha256(KNOWN_RAW_JSON.encode()).hexdigest()
    assert checked.stored_json == stored_text(KNOWN_RAW_JSON)
    assert '"prompt"' not in checked.stored_json


def test_the_hash_of_a_known_line_is_pinned():
    checked = check(parse(json.dumps(record()).encode()))
    assert checked.sha256 == KNOWN_SHA256


def test_the_hash_of_a_tricky_record_is_pinned():
    checked = check(parse(TRICKY_LINE.encode()), project=None)
    assert checked.stored_json == stored_text(TRICKY_RAW_JSON)
    assert checked.sha256 == TRICKY_SHA256
    without_project = TRICKY_RAW_JSON.replace('"project":"shop",', "")
    assert checked.sha256 == hashlib.sha256(without_project.encode()).hexdigest()


def _random_text(rng: random.Random) -> str:
    alphabet = [chr(c) for c in range(0x01, 0x80)] + [
        "é",
        "ß",
        "€",
        "\u2028",
        "\u2029",
        "\ufeff",
        "\U0001f600",
        "ÿ",
        "\x85",
    ]
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))


def _random_number(rng: random.Random):
    kind = rng.randrange(7)
    if kind == 0:
        return rng.randint(-(2**70), 2**70)
    if kind == 1:
        return rng.randint(-1000, 1000)
    if kind == 2:
        return round(rng.random(), rng.randint(0, 8))
    if kind == 3:
        return rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30)
    if kind == 4:
        return float(
            rng.choice([0.0, -0.0, 1e16, 1e15, 1e-4, 1e-5, 9999999999999998.0])
        )
    if kind == 5:
        return float(rng.randint(-(10**17), 10**17))
    return struct_float(rng)


def struct_float(rng: random.Random) -> float:
    value = rng.getrandbits(64)
    number = __import__("struct").unpack("<d", value.to_bytes(8, "little"))[0]
    return number if math.isfinite(number) else 1.0


def _random_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return _random_text(rng)
    if kind == 1:
        return _random_number(rng)
    if kind == 2:
        return rng.choice([True, False, None])
    if kind in (3, 4):
        return _random_number(rng) if kind == 3 else _random_text(rng)
    if kind == 5:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {
        _random_text(rng): _random_value(rng, depth + 1)
        for _ in range(rng.randint(0, 5))
    }


@pytest.mark.parametrize("seed", range(20))
def test_the_canonical_text_matches_the_stdlib_definition(seed):
    rng = random.Random(seed)
    for _ in range(200):
        value = record(extra=_random_value(rng), **{_random_text(rng): 1})
        value["usage"]["cost_usd"] = abs(_random_number(rng))
        try:
            expected = stdlib_canonical(value)
        except ValueError:
            continue
        assert canonical_json(value) == expected
        line = json.dumps(value, ensure_ascii=rng.random() < 0.5).encode()
        parsed = parse(line)
        assert parsed == value
        assert canonical_json(parsed) == expected
        checked = check(parsed)
        assert checked.stored_json == stdlib_canonical(stored_part(value))
        assert checked.sha256 == hashlib.sha256(expected.encode()).hexdigest()
