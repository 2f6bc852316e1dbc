from __future__ import annotations

import contextlib
import os
import signal
import threading
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from replayhub.demo import packaged
from replayhub.demo.model_api import StandInProvider
from replayhub.demo.pkgindex import PackageIndex


class Command(BaseCommand):
    help = (
        "Serve the demo's stand-in model API (no model: it answers by repeating "
        "the prompt) and its package index until stopped. The key is read from $"
        f"{settings.DEMO_MODEL_KEY_ENV}, as the workers read it."
    )

    def handle(self, *args, **options):
        key = os.environ.get(settings.DEMO_MODEL_KEY_ENV)
        if not key:
            raise CommandError(
                f"set {settings.DEMO_MODEL_KEY_ENV} (the workers need the same value).",
                returncode=2,
            )
        url = urlsplit(settings.REPLAYHUB_DEMO_MODEL_URL)
        if url.hostname not in ("127.0.0.1", "localhost") or not url.port:
            raise CommandError(
                "REPLAYHUB_DEMO_MODEL_URL must be http://127.0.0.1:PORT.", returncode=2
            )
        try:
            index_port = packaged.index_port(settings.REPLAYHUB_DEMO_INDEX_URL)
        except ValueError as error:
            raise CommandError(
                f"REPLAYHUB_DEMO_INDEX_URL: {error}", returncode=2
            ) from None
        index_root = settings.VAR_DIR / "demo" / "index"
        packaged.write_demo_index(index_root)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with (
            StandInProvider(key=key, port=url.port) as server,
            PackageIndex(index_root, port=index_port) as index,
        ):
            server.record = False
            self.stdout.write(
                f"stand-in model API (not a real provider) on {server.base_url}; "
                f"package index on {index.url}",
            )
            self.stdout.flush()
            with contextlib.suppress(KeyboardInterrupt):
                stop.wait()
