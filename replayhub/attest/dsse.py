"""DSSE envelopes signed with Ed25519: sign, verify, name a key. No Django.

The envelope is the DSSE v1 JSON form: ``payload`` (base64), ``payloadType``
and ``signatures`` (``keyid``, ``sig``). What is signed is the
pre-authentication encoding of the type and the payload (:func:`pae`), never
the JSON around them, so re-encoding the envelope cannot change what the
signature covers. Ed25519 is deterministic: one key and one payload give one
signature.

:func:`verify` reads an envelope from anyone: bounded in size and depth, and
every failure is :class:`EnvelopeError` with a one-line message.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from replayhub.attest.statement import canonical
from replayhub.lib import boundedjson

PAYLOAD_TYPE = "application/vnd.in-toto+json"
# An attestation is a few kilobytes; a file much larger is not one.
MAX_ENVELOPE_BYTES = 4 * 1024 * 1024
# A PEM key is a few hundred bytes.
MAX_KEY_BYTES = 16 * 1024
_MAX_DEPTH = 32


class EnvelopeError(ValueError):
    """An envelope or a key that cannot be used; the message is one line."""


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1's pre-authentication encoding of ``payload``."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


def key_id(public_key: Ed25519PublicKey) -> str:
    """The key's id: the sha256 of its 32 raw bytes, in hex."""
    raw = public_key.public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    return hashlib.sha256(raw).hexdigest()


def public_pem(public_key: Ed25519PublicKey) -> bytes:
    """The public key as PEM (SubjectPublicKeyInfo), as it is served."""
    return public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def private_pem(private_key: Ed25519PrivateKey) -> bytes:
    """The private key as unencrypted PKCS #8 PEM, as an operator keeps it."""
    return private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def load_private_key(pem: bytes) -> Ed25519PrivateKey:
    """An Ed25519 private key from unencrypted PEM; EnvelopeError otherwise.
    The message never repeats the key's text."""
    if len(pem) > MAX_KEY_BYTES:
        raise EnvelopeError("the private key is not a PEM key: it is too large")
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError, binascii.Error):
        raise EnvelopeError("the private key is not an unencrypted PEM key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise EnvelopeError("the private key is not an Ed25519 key")
    return key


def load_public_key(pem: bytes) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM; EnvelopeError otherwise."""
    if len(pem) > MAX_KEY_BYTES:
        raise EnvelopeError("the public key is not a PEM key: it is too large")
    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError, binascii.Error):
        raise EnvelopeError("the public key is not a PEM public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise EnvelopeError("the public key is not an Ed25519 key")
    return key


def sign(statement: dict[str, Any], private_key: Ed25519PrivateKey) -> dict[str, Any]:
    """The DSSE envelope of ``statement`` (serialised by ``canonical``)."""
    payload = canonical(statement)
    signature = private_key.sign(pae(PAYLOAD_TYPE, payload))
    return {
        "payload": base64.b64encode(payload).decode("ascii"),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [
            {
                "keyid": key_id(private_key.public_key()),
                "sig": base64.b64encode(signature).decode("ascii"),
            }
        ],
    }


def verify(data: bytes, public_key: Ed25519PublicKey) -> dict[str, Any]:
    """The statement an envelope carries, once a signature by ``public_key``
    over it checks; EnvelopeError (one line) for anything else.

    A signature whose ``keyid`` names another key is not tried; one without a
    ``keyid``, or with an empty one, is (DSSE makes the field optional).
    """
    try:
        envelope = boundedjson.loads(
            data, max_bytes=MAX_ENVELOPE_BYTES, max_depth=_MAX_DEPTH
        )
    except ValueError as error:
        raise EnvelopeError(f"not a DSSE envelope: {error}") from None
    if not isinstance(envelope, dict):
        raise EnvelopeError("not a DSSE envelope: not a JSON object")
    payload_type = envelope.get("payloadType")
    if payload_type != PAYLOAD_TYPE:
        raise EnvelopeError(f"the payload type is not {PAYLOAD_TYPE}")
    payload = _base64(envelope.get("payload"), "payload")
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise EnvelopeError("the envelope has no signatures")
    wanted = key_id(public_key)
    message = pae(PAYLOAD_TYPE, payload)
    for entry in signatures[:16]:
        # An empty or absent keyid names no key: the signature is tried.
        if not isinstance(entry, dict) or (entry.get("keyid") or wanted) != wanted:
            continue
        try:
            public_key.verify(_base64(entry.get("sig"), "signature"), message)
        except (InvalidSignature, EnvelopeError):
            continue
        return _statement(payload)
    raise EnvelopeError(f"no signature by the key {wanted[:16]} verifies the payload")


def _statement(payload: bytes) -> dict[str, Any]:
    try:
        found = boundedjson.loads(
            payload, max_bytes=MAX_ENVELOPE_BYTES, max_depth=_MAX_DEPTH
        )
    except ValueError as error:
        raise EnvelopeError(f"the signed payload is not JSON: {error}") from None
    if not isinstance(found, dict):
        raise EnvelopeError("the signed payload is not a JSON object")
    return found


def _base64(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise EnvelopeError(f"the {what} is not base64 text")
    try:
        # DSSE allows the URL-safe alphabet too.
        return base64.b64decode(
            value.replace("-", "+").replace("_", "/"), validate=True
        )
    except (binascii.Error, ValueError):
        raise EnvelopeError(f"the {what} is not base64") from None
