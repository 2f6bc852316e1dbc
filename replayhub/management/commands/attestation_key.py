from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management.base import BaseCommand, CommandError

from replayhub.attest import dsse

PRIVATE_NAME = "replayhub-attestation.key"
PUBLIC_NAME = "replayhub-attestation.pub"


class Command(BaseCommand):
    help = (
        "Make an Ed25519 key pair for signing attestations: DIR/"
        f"{PRIVATE_NAME} (private, mode 0600; name it in "
        f"REPLAYHUB_ATTESTATION_KEY_FILE) and DIR/{PUBLIC_NAME}. Never "
        "overwrites a key."
    )

    def add_arguments(self, parser):
        parser.add_argument("--out", required=True, metavar="DIR")

    def handle(self, *args, out, **options):
        folder = Path(out)
        private, public = folder / PRIVATE_NAME, folder / PUBLIC_NAME
        for path in (private, public):
            if path.exists():
                raise CommandError(f"{path} exists: move it away first")
        key = Ed25519PrivateKey.generate()
        try:
            folder.mkdir(parents=True, exist_ok=True)
            # Created 0600 from the start: the key is never readable by others,
            # not even for a moment.
            descriptor = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as file:
                file.write(dsse.private_pem(key))
            public.write_bytes(dsse.public_pem(key.public_key()))
        except OSError as error:
            raise CommandError(f"the key cannot be written: {error}") from None
        self.stderr.write(
            f"key {dsse.key_id(key.public_key())}: set "
            f"REPLAYHUB_ATTESTATION_KEY_FILE={private.resolve()}"
        )
        self.stdout.write(str(public))
