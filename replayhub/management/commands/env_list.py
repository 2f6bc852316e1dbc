from __future__ import annotations

import json
import time
from dataclasses import asdict

from django.core.management.base import BaseCommand

from replayhub.environments import build


class Command(BaseCommand):
    help = "List the environments cached on this worker, least recently used first."

    def add_arguments(self, parser):
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="Print JSON."
        )

    def handle(self, *args, as_json, **options):
        store = build.cache()
        entries = store.entries()
        if as_json:
            rows = [
                {k: v for k, v in asdict(e).items() if k != "output_tail"}
                for e in entries
            ]
            self.stdout.write(json.dumps(rows, sort_keys=True))
            return
        total = sum(e.size_bytes for e in entries)
        self.stdout.write(
            f"{len(entries)} environments, {total / 1024**2:.1f} MiB of "
            f"{store.max_bytes / 1024**2:.0f} MiB, in {store.root}"
        )
        for entry in entries:
            used = time.strftime("%Y-%m-%d %H:%M", time.gmtime(entry.last_used))
            self.stdout.write(
                f"{entry.key[:16]}  {entry.state:6}  {entry.label:20}  "
                f"{entry.size_bytes / 1024**2:8.1f} MiB  setup "
                f"{entry.setup_seconds:6.1f} s  last used {used} UTC"
            )
