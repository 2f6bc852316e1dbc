from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from urllib.parse import urlsplit

from django.core.management.base import BaseCommand, CommandError

from replayhub.models import Provider, ProviderKind

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _refuse(message: str) -> CommandError:
    return CommandError(message, returncode=2)


def parse_price(entry: str) -> tuple[str, dict[str, str]]:
    """``MODEL=IN,OUT[,CACHED]`` in USD per million tokens."""
    model, sep, numbers = entry.rpartition("=")
    parts = numbers.split(",")
    if not sep or not model or len(parts) not in (2, 3):
        raise _refuse(f"--price {entry!r}: write MODEL=IN,OUT or MODEL=IN,OUT,CACHED.")
    try:
        amounts = [Decimal(part.strip()) for part in parts]
    except InvalidOperation:
        raise _refuse(f"--price {entry!r}: the prices must be numbers.") from None
    if any(not a.is_finite() or a < 0 for a in amounts):
        raise _refuse(f"--price {entry!r}: prices must be zero or more.")
    price = {"input": str(amounts[0]), "output": str(amounts[1])}
    if len(amounts) == 3:
        price["cached"] = str(amounts[2])
    return model, price


class Command(BaseCommand):
    help = (
        "Register a model provider that replays reach through the gateway. The key "
        "stays in the workers' environment: give the name of its variable."
    )

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--kind", required=True, choices=ProviderKind.values)
        parser.add_argument("--base-url", required=True, metavar="URL")
        parser.add_argument(
            "--key-env",
            required=True,
            metavar="VAR",
            help="The environment variable on the workers that holds the key.",
        )
        parser.add_argument(
            "--price",
            action="append",
            default=[],
            metavar="MODEL=IN,OUT",
            help="USD per million input and output tokens (a third number: "
            "cached input).",
        )

    def handle(self, *args, name, kind, base_url, key_env, price, **options):
        if not _NAME.fullmatch(name):
            raise _refuse(f"{name!r} is not a provider name (letters, digits, - _).")
        if Provider.objects.filter(name=name).exists():
            raise _refuse(f"a provider named {name!r} already exists.")
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise _refuse(f"--base-url {base_url!r} is not an http(s) URL.")
        if url.username or url.password:
            raise _refuse("--base-url must not carry credentials; use --key-env.")
        if not _VARIABLE.fullmatch(key_env):
            raise _refuse(f"--key-env {key_env!r} is not an environment variable name.")
        prices = dict(parse_price(entry) for entry in price)
        provider = Provider.objects.create(
            name=name,
            kind=kind,
            base_url=base_url.rstrip("/"),
            key_env=key_env,
            prices=prices,
        )
        self.stdout.write(
            f"registered provider {provider.name} ({provider.kind}, "
            f"{provider.base_url}); the workers read its key from ${key_env}"
        )
