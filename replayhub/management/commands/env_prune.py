from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from replayhub.environments import build


class Command(BaseCommand):
    help = (
        "Evict cached environments: least recently used first down to the disk "
        "cap (default), or all of them, or the named keys. Environments in use "
        "by a running replay are kept."
    )

    def add_arguments(self, parser):
        parser.add_argument("keys", nargs="*", metavar="KEY")
        parser.add_argument(
            "--all", action="store_true", help="Evict every environment not in use."
        )

    def handle(self, *args, keys, all, **options):
        store = build.cache()
        if all or keys:
            known = {e.key: e for e in store.entries()}
            wanted = list(known) if all else []
            for key in keys:
                matches = [k for k in known if k.startswith(key)]
                if len(matches) != 1:
                    raise CommandError(
                        f"{key!r} names {len(matches)} cached environments.",
                        returncode=2,
                    )
                wanted.append(matches[0])
            removed = [key for key in wanted if store.remove(key)]
            kept = len(wanted) - len(removed)
        else:
            removed = store.evict()
            kept = 0
        self.stdout.write(
            f"evicted {len(removed)} environments"
            + (f"; {kept} in use were kept" if kept else "")
        )
