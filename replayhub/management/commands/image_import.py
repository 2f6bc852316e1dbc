from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from replayhub.environments import images


class Command(BaseCommand):
    help = (
        "Unpack a root image on this worker from an OCI image layout (skopeo copy "
        "docker://REF oci:DIR:TAG makes one where a registry is reachable), so "
        "projects naming REF as their root image run on it."
    )

    def add_arguments(self, parser):
        parser.add_argument("ref", help="The image pinned by digest: name@sha256:…")
        parser.add_argument(
            "--layout",
            required=True,
            metavar="DIR[:TAG]",
            help="The OCI image layout and the tag to unpack (default tag: latest).",
        )

    def handle(self, *args, ref, layout, **options):
        directory, _, tag = layout.partition(":")
        try:
            rootfs = images.import_layout(ref, Path(directory), tag or "latest")
        except images.ImageError as error:
            raise CommandError(str(error), returncode=2) from None
        self.stdout.write(f"unpacked {ref} at {rootfs}")
