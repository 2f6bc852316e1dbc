"""The recorder's key scrub: every form an echo of a key can take is masked,
the same forms the replay gateway's redactor masks, in any JSON value however
deep, and nothing that is not a key."""

from __future__ import annotations

import base64
import json
import secrets
import urllib.parse

import pytest

from replayhub.gateway.redact import scrub as gateway_scrub
from replayhub.recorder.record import build_record
from replayhub.recorder.scrub import MASK, KeyScrub, credential, map_strings

KEY = "sk-test-" + secrets.token_urlsafe(24) + "/+x"


def json_escaped(text: str, every: int = 1) -> str:
    return "".join(
        f"\\u{ord(c):04x}" if n % every == 0 else c for n, c in enumerate(text)
    )


def echoes(key: str) -> dict[str, str]:
    raw = key.encode()
    return {
        "plain": f"Incorrect API key provided: {key}.",
        "json": f'{{"key": "{json_escaped(key)}"}}',
        "json, some": json_escaped(key, every=3),
        "json, upper hex": json_escaped(key).upper().replace("\\U", "\\u"),
        "slash escaped": key.replace("/", "\\/"),
        "percent": "key=" + urllib.parse.quote(key, safe=""),
        "percent, every char": "".join(f"%{b:02X}" for b in raw),
        "mixed": f"%{raw[0]:02x}" + json_escaped(key[1:2]) + key[2:],
        **{
            f"base64 at {shift}": base64.b64encode(b"x" * shift + raw + b"!").decode()
            for shift in range(3)
        },
        "base64 url-safe": base64.urlsafe_b64encode(b"ab" + raw).decode(),
    }


@pytest.mark.parametrize("form", list(echoes(KEY)))
def test_every_form_of_a_key_is_masked_as_the_gateway_masks_it(form):
    text = echoes(KEY)[form]
    masked = KeyScrub([KEY]).text(text)
    assert MASK in masked
    assert KEY not in masked and KEY[8:20] not in masked
    # The gateway's redactor masks the same text, to the same.
    assert masked == gateway_scrub(text.encode(), KEY.encode()).decode()


def test_a_value_is_masked_everywhere_in_it_keys_included_however_deep():
    deep: object = [KEY]
    for _ in range(5000):  # deeper than Python's stack
        deep = [deep]
    value = {"argv": ["agent", "--api-key", KEY], KEY: 1, "deep": deep, "n": 3}
    masked = KeyScrub([KEY]).value(value)
    assert masked["argv"] == ["agent", "--api-key", MASK]
    assert masked[MASK] == 1 and masked["n"] == 3
    inner = masked["deep"]
    while isinstance(inner[0], list):
        inner = inner[0]
    assert inner == [MASK]
    assert value["argv"][-1] == KEY  # the original is not changed


def test_a_short_value_is_no_key_and_masks_nothing():
    scrub = KeyScrub(["EMPTY", "", None, "test"])
    assert scrub.secrets == set()
    assert scrub.text("test the EMPTY key") == "test the EMPTY key"


def test_the_key_a_header_carries_is_its_credential():
    assert credential("Authorization", f"Bearer {KEY}") == KEY
    assert credential("x-api-key", f" {KEY} ") == KEY
    assert credential("authorization", "") == ""


def test_map_strings_keeps_the_order_and_the_other_values():
    value = {"b": [1, 2.5, None, True, "x"], "a": {"c": "y"}}
    changed = map_strings(value, str.upper)
    assert changed == {"B": [1, 2.5, None, True, "X"], "A": {"C": "Y"}}
    assert list(changed) == ["B", "A"]


def test_a_built_record_holds_no_key_anywhere():
    facts = {
        "project": "shop",
        "external_id": "20250101T000000Z-abcd1234",
        "prompt": f"use {KEY}",
        "output": "ANTHROPIC_API_KEY=" + KEY + "\n" + echoes(KEY)["base64 at 1"],
        "agent": {"command": ["agent", f"--api-key={KEY}"]},
    }
    tape = [
        {
            "provider_kind": "anthropic",
            "status": 401,
            "request": {"messages": [{"role": "user", "content": KEY}]},
            "response": {"error": {"message": echoes(KEY)["percent"]}},
        }
    ]
    record = build_record(facts, tape, keys=KeyScrub([KEY]))
    assert KEY not in json.dumps(record, ensure_ascii=False)
    assert record["agent"]["command"] == ["agent", f"--api-key={MASK}"]
    assert record["tape"][0]["response"]["error"]["message"] == f"key={MASK}"
