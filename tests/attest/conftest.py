"""A signing key on disk, named in the settings as an operator names it."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from replayhub.attest import dsse


@pytest.fixture
def signing_key(settings, tmp_path: Path) -> Ed25519PrivateKey:
    key = Ed25519PrivateKey.generate()
    path = tmp_path / "attestation.key"
    path.write_bytes(dsse.private_pem(key))
    settings.REPLAYHUB_ATTESTATION_KEY_FILE = str(path)
    settings.REPLAYHUB_ATTESTATION_KEY_ENV = ""
    return key


@pytest.fixture
def public_key_file(signing_key, tmp_path: Path) -> Path:
    path = tmp_path / "attestation.pub"
    path.write_bytes(dsse.public_pem(signing_key.public_key()))
    return path
