"""The signing key the operator names: a PEM file, or an environment variable.

``REPLAYHUB_ATTESTATION_KEY_FILE`` names a file holding the Ed25519 private
key as unencrypted PKCS #8 PEM; ``REPLAYHUB_ATTESTATION_KEY_ENV`` names the
environment variable that holds that PEM instead (for secrets injected into
the environment). The file wins when both are set. The key is read when a
signature is made, so a replaced file takes effect without a restart, and
it is never stored, logged, or put in an answer: errors say which setting
failed, not what it held.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings

from replayhub.attest.dsse import MAX_KEY_BYTES, EnvelopeError, load_private_key


class KeyUnavailable(Exception):
    """A key is configured but cannot be used; the message is one line and
    names the setting, never the key."""


def configured() -> bool:
    """Whether the operator named a signing key at all."""
    return bool(
        settings.REPLAYHUB_ATTESTATION_KEY_FILE
        or settings.REPLAYHUB_ATTESTATION_KEY_ENV
    )


def signing_key() -> Ed25519PrivateKey | None:
    """The configured private key; None when none is configured, and
    KeyUnavailable when one is but cannot be read."""
    path = settings.REPLAYHUB_ATTESTATION_KEY_FILE
    name = settings.REPLAYHUB_ATTESTATION_KEY_ENV
    if path:
        pem = _read_file(Path(path))
        where = "REPLAYHUB_ATTESTATION_KEY_FILE"
    elif name:
        text = os.environ.get(name, "")
        if not text.strip():
            raise KeyUnavailable(
                f"REPLAYHUB_ATTESTATION_KEY_ENV names {name}, which is not set"
            )
        pem = text.encode("utf-8", "replace")
        where = f"the variable {name}"
    else:
        return None
    try:
        return load_private_key(pem)
    except EnvelopeError as error:
        raise KeyUnavailable(f"{where}: {error}") from None


def _read_file(path: Path) -> bytes:
    try:
        with path.open("rb") as file:
            pem = file.read(MAX_KEY_BYTES + 1)
    except OSError as error:
        raise KeyUnavailable(
            f"REPLAYHUB_ATTESTATION_KEY_FILE cannot be read ({error.strerror})"
        ) from None
    if len(pem) > MAX_KEY_BYTES:
        raise KeyUnavailable("REPLAYHUB_ATTESTATION_KEY_FILE is too large for a key")
    return pem
