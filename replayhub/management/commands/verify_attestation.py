from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from replayhub.attest import dsse


def _read(path: str, limit: int, what: str) -> bytes:
    """At most ``limit`` bytes of an untrusted file; CommandError beyond."""
    try:
        with Path(path).open("rb") as file:
            data = file.read(limit + 1)
    except OSError as error:
        raise CommandError(
            f"{what} {path!r} cannot be read: {error.strerror}"
        ) from None
    if len(data) > limit:
        raise CommandError(f"{what} {path!r} is larger than {limit:,} bytes")
    return data


class Command(BaseCommand):
    help = (
        "Check a replay's attestation (a DSSE envelope) against a public key and "
        "print the statement it carries. Exit 1, with one line saying why, when "
        "the signature does not verify or the file is no envelope."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", metavar="FILE", help="The attestation (JSON).")
        parser.add_argument(
            "--key",
            required=True,
            metavar="PUBLIC_KEY_FILE",
            help="The Ed25519 public key as PEM (/api/v1/attestation-key.pub).",
        )

    def handle(self, *args, file, key, **options):
        try:
            public_key = dsse.load_public_key(
                _read(key, dsse.MAX_KEY_BYTES, "the key file")
            )
            found = dsse.verify(
                _read(file, dsse.MAX_ENVELOPE_BYTES, "the attestation"), public_key
            )
        except dsse.EnvelopeError as error:
            raise CommandError(f"not verified: {error}") from None
        self.stderr.write(f"verified: signed by the key {dsse.key_id(public_key)}")
        self.stdout.write(json.dumps(found, indent=2, sort_keys=True))
