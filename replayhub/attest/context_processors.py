"""What every page may ask of attestations: whether any are signed."""

from __future__ import annotations

from django.http import HttpRequest

from replayhub.attest import keys


def attestations(request: HttpRequest) -> dict[str, bool]:
    """``attestations_signed``: a key is configured, so a finished replay's
    page offers its attestation. Reads two settings, never the key."""
    return {"attestations_signed": keys.configured()}
