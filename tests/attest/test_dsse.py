"""Envelopes checked by an independent DSSE implementation (securesystemslib),
and refused by it and by ReplayHub once one byte changes."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import SSlibKey

from replayhub.attest import dsse, signing
from replayhub.attest.statement import PREDICATE_TYPE, STATEMENT_TYPE, canonical
from replayhub.models import Replay
from tests.factories import make_replay

pytestmark = pytest.mark.django_db


def independent_key(signing_key) -> SSlibKey:
    public = signing_key.public_key()
    return SSlibKey.from_crypto(public, keyid=dsse.key_id(public))


def independently_verified(envelope: dict, signing_key) -> dict:
    """The statement, once securesystemslib accepts the envelope."""
    # from_dict takes the signatures' dicts apart: it gets a copy.
    parsed = Envelope.from_dict(json.loads(json.dumps(envelope)))
    parsed.verify([independent_key(signing_key)], 1)
    return json.loads(parsed.payload)


def with_payload_byte_changed(envelope: dict, at: int) -> dict:
    payload = bytearray(base64.b64decode(envelope["payload"]))
    payload[at] ^= 0x01
    return {**envelope, "payload": base64.b64encode(bytes(payload)).decode()}


def test_every_verdicts_envelope_verifies_with_securesystemslib(signing_key):
    for verdict in ("identical", "equivalent", "divergent", "inconclusive"):
        replay = make_replay(verdict=verdict)
        envelope = signing.replay_envelope(replay, signing_key)
        statement = independently_verified(envelope, signing_key)
        assert statement["_type"] == STATEMENT_TYPE
        assert statement["predicateType"] == PREDICATE_TYPE
        assert statement["predicate"]["verdict"] == verdict
        assert envelope["payloadType"] == "application/vnd.in-toto+json"


def test_the_subjects_are_the_runs_commit_and_the_stored_replay_tree(signing_key):
    replay = make_replay()
    statement = signing.replay_statement(replay)
    assert statement["subject"] == [
        {"name": "original-commit", "digest": {"gitCommit": "a" * 40}},
        {"name": "replay-tree", "digest": {"gitTree": "f" * 40}},
    ]
    predicate = statement["predicate"]
    assert predicate["replay"]["id"] == replay.pk
    assert predicate["base"]["source"] == "recorded"
    assert predicate["tests"][0]["tree"] == "original"
    assert predicate["comparison"]["replay_tree"] == "f" * 40
    assert predicate["sandbox"]["image_digest"] == "sha256:" + "b" * 64


def test_the_key_id_is_the_sha256_of_the_raw_public_key(signing_key):
    envelope = signing.replay_envelope(make_replay(), signing_key)
    raw = signing_key.public_key().public_bytes_raw()
    assert envelope["signatures"][0]["keyid"] == hashlib.sha256(raw).hexdigest()


def test_the_encoding_signed_is_dsses_pae():
    ours = dsse.pae("application/vnd.in-toto+json", b'{"a":1}')
    theirs = Envelope(b'{"a":1}', "application/vnd.in-toto+json", {}).pae()
    assert ours == theirs == b'DSSEv1 28 application/vnd.in-toto+json 7 {"a":1}'


def test_the_same_replay_always_gives_the_same_envelope(signing_key):
    replay = make_replay()
    first = signing.replay_envelope(replay, signing_key)
    again = signing.replay_envelope(Replay.objects.get(pk=replay.pk), signing_key)
    assert canonical(first) == canonical(again)


@pytest.mark.parametrize("at", [0, 40, -2])
def test_one_changed_byte_of_the_payload_fails_both_verifiers(signing_key, at):
    envelope = signing.replay_envelope(make_replay(), signing_key)
    forged = with_payload_byte_changed(envelope, at)
    with pytest.raises(VerificationError):
        independently_verified(forged, signing_key)
    with pytest.raises(dsse.EnvelopeError, match="no signature"):
        dsse.verify(canonical(forged), signing_key.public_key())
    assert dsse.verify(canonical(envelope), signing_key.public_key())


def test_another_key_verifies_nothing(signing_key):
    envelope = signing.replay_envelope(make_replay(), signing_key)
    other = Ed25519PrivateKey.generate().public_key()
    with pytest.raises(dsse.EnvelopeError):
        dsse.verify(canonical(envelope), other)
    with pytest.raises(VerificationError):
        keyid = envelope["signatures"][0]["keyid"]
        # from_dict takes the signatures' dicts apart: it gets a copy.
        Envelope.from_dict(json.loads(json.dumps(envelope))).verify(
            [SSlibKey.from_crypto(other, keyid=keyid)], 1
        )


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"not json", "not a DSSE envelope"),
        (b"[1]", "not a JSON object"),
        (b'{"payloadType": "text/plain"}', "payload type"),
        (
            b'{"payloadType": "application/vnd.in-toto+json", "payload": "!!"}',
            "not base64",
        ),
        (
            b'{"payloadType": "application/vnd.in-toto+json", "payload": "e30=",'
            b' "signatures": []}',
            "no signatures",
        ),
        (b"[" * 5000 + b"]" * 5000, "not a DSSE envelope"),
        (b" " * (dsse.MAX_ENVELOPE_BYTES + 1), "not a DSSE envelope"),
    ],
)
def test_a_malformed_envelope_is_one_line_of_error(signing_key, data, says):
    with pytest.raises(dsse.EnvelopeError, match=says) as caught:
        dsse.verify(data, signing_key.public_key())
    assert "\n" not in str(caught.value)


def test_a_signature_with_an_empty_keyid_is_tried(signing_key):
    envelope = signing.replay_envelope(make_replay(), signing_key)
    envelope["signatures"][0]["keyid"] = ""
    assert dsse.verify(canonical(envelope), signing_key.public_key())
