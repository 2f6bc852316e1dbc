"""The statement builder over plain stored values: no database."""

from __future__ import annotations

import hashlib
import json

import pytest

from replayhub.attest.statement import (
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    TEXT_LIMIT,
    StoredReplay,
    canonical,
    statement,
    tape_digest,
)

COMMIT = "a" * 40
TREE = "f" * 40


def stored(**changes) -> StoredReplay:
    fields = {
        "replay": {
            "id": 7,
            "run": 3,
            "project": "shop",
            "external_id": "run-3",
            "attempt": 1,
            "tier": "agentic",
            "trigger": "scheduler",
            "verdict": "equivalent",
            "reason_code": "trees_differ_tests_pass",
            "reason": "The trees differ; both pass the tests.",
            "finished_at": "2026-12-01T02:00:00+00:00",
            "tokens": 1200,
            "sandbox_seconds": 41.5,
        },
        "original_commit": COMMIT,
        "record_sha256": "9" * 64,
        "evidence": {
            "checks": [
                {
                    "name": "test_gate",
                    "outcome": "pass",
                    "evidence_class": "independently_executed",
                    "detail": "both suites ran",
                }
            ],
            "agent": {"runner": "gvisor", "isolation": "oci", "exit_code": 0},
            "environment": {"key": "env-1", "cached": True, "inputs": ["a"]},
            "test_changes": {"summary": "1 test file changed"},
        },
        "provenance": {
            "recorded_base": "c" * 40,
            "base": {"sha": "c" * 40, "source": "recorded", "trusted": True},
            "image": "python:3.12@sha256:" + "b" * 64,
            "image_pinned": True,
            "sandbox_config_sha256": "d" * 64,
        },
        "usage": {"input_tokens": 1000, "output_tokens": 200, "cost_usd": 0.42},
        "image_digest": "sha256:" + "b" * 64,
        "tests": [{"tree": "original", "attempt": 1, "ran": True, "passed": True}],
        "comparison": {
            "identical": False,
            "original_tree": "e" * 40,
            "replay_tree": TREE,
        },
        "tape": None,
    }
    fields.update(changes)
    return StoredReplay(**fields)


def test_the_subjects_are_the_original_commit_and_the_replay_tree():
    made = statement(stored(), version="1.2.3")
    assert made["_type"] == STATEMENT_TYPE
    assert made["predicateType"] == PREDICATE_TYPE
    assert made["subject"] == [
        {"name": "original-commit", "digest": {"gitCommit": COMMIT}},
        {"name": "replay-tree", "digest": {"gitTree": TREE}},
    ]


def test_a_replay_with_neither_names_its_runs_record():
    made = statement(stored(original_commit="", comparison=None), version="1")
    assert made["subject"] == [{"name": "run-record", "digest": {"sha256": "9" * 64}}]


def test_a_sha_that_is_not_a_full_hex_sha_is_no_subject():
    odd = stored(original_commit="abc1234", comparison={"replay_tree": "not a sha"})
    assert statement(odd, version="1")["subject"][0]["name"] == "run-record"


def test_the_predicate_holds_what_the_verdict_rests_on():
    predicate = statement(stored(), version="1.2.3")["predicate"]
    assert predicate["verdict"] == "equivalent"
    assert predicate["reason_code"] == "trees_differ_tests_pass"
    assert predicate["base"] == {
        "sha": "c" * 40,
        "source": "recorded",
        "trusted": True,
        "confirmed": None,
        "recorded": "c" * 40,
    }
    assert predicate["sandbox"]["runner"] == "gvisor"
    assert predicate["sandbox"]["isolation"] == "oci"
    assert predicate["sandbox"]["image_digest"] == "sha256:" + "b" * 64
    assert predicate["environment"] == {"key": "env-1", "cached": True}
    assert predicate["tests"][0]["passed"] is True
    assert predicate["test_changes"] == "1 test file changed"
    assert predicate["replayhub"] == {"version": "1.2.3"}
    assert predicate["checks"][0]["name"] == "test_gate"


def test_money_is_left_out_of_the_usage():
    usage = statement(stored(), version="1")["predicate"]["usage"]
    assert usage == {
        "measured": {"input_tokens": 1000, "output_tokens": 200},
        "tokens": 1200,
        "sandbox_seconds": 41.5,
    }


def test_a_floating_image_has_no_digest():
    floating = stored(provenance={"image": "python:3.12"}, image_digest="")
    sandbox = statement(floating, version="1")["predicate"]["sandbox"]
    assert sandbox["image"] == "python:3.12"
    assert sandbox["image_digest"] is None


@pytest.mark.parametrize(
    "odd",
    [
        {"checks": "nope", "agent": [], "environment": 3, "test_changes": None},
        {"checks": [1, "x", None], "agent": {"runner": 5}, "tape": "x"},
    ],
)
def test_odd_stored_values_read_as_null_never_an_error(odd):
    predicate = statement(stored(evidence=odd), version="1")["predicate"]
    assert predicate["checks"] == []
    assert predicate["sandbox"]["runner"] is None
    assert predicate["environment"] is None
    canonical(predicate)


def test_non_finite_numbers_and_booleans_are_no_counts():
    usage = {"input_tokens": True, "weird": float("nan"), "requests": 3}
    predicate = statement(stored(usage=usage), version="1")["predicate"]
    assert predicate["usage"]["measured"] == {"requests": 3}


def test_long_text_is_cut():
    replay = {**stored().replay, "reason": "x" * (TEXT_LIMIT + 50)}
    predicate = statement(stored(replay=replay), version="1")["predicate"]
    assert len(predicate["reason"]) == TEXT_LIMIT


def test_a_tape_is_named_by_the_digest_of_its_exchanges_digests():
    tape = {"exchanges": 2, "truncated": False, "digests": ["11", "22"]}
    evidence = {**stored().evidence, "tape": {"source": "original", "played": 2}}
    replay = {**stored().replay, "tier": "tape"}
    predicate = statement(
        stored(tape=tape, evidence=evidence, replay=replay), version="1"
    )["predicate"]
    assert predicate["tape"]["tier"] == "tape"
    assert predicate["tape"]["source"] == "original"
    assert predicate["tape"]["kept"] == {
        "exchanges": 2,
        "truncated": False,
        "exchange_digests_sha256": hashlib.sha256(b"11\n22\n").hexdigest(),
    }
    assert tape_digest(["11", "22"]) != tape_digest(["22", "11"])


def test_a_replay_without_a_tape_says_so():
    assert statement(stored(), version="1")["predicate"]["tape"] is None


def test_the_same_replay_gives_the_same_bytes():
    first = canonical(statement(stored(), version="1"))
    again = canonical(statement(stored(), version="1"))
    assert first == again
    assert first.isascii()
    assert b'": ' not in first and b'", "' not in first
    assert json.loads(first) == statement(stored(), version="1")


def test_keys_are_sorted_whatever_order_the_values_came_in():
    reordered = dict(reversed(list(stored().usage.items())))
    assert canonical(statement(stored(usage=reordered), version="1")) == canonical(
        statement(stored(), version="1")
    )
