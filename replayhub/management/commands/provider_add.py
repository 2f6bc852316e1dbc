from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from replayhub.gateway.registry import ProviderInvalid, provider_fields
from replayhub.models import Provider, ProviderKind

# The option each field comes from, named before its problem.
FLAGS = {"base_url": "--base-url ", "key_env": "--key-env ", "prices": "--price "}


def _refuse(message: str) -> CommandError:
    return CommandError(message, returncode=2)


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
        try:
            fields = provider_fields(
                name=name, kind=kind, base_url=base_url, key_env=key_env, prices=price
            )
        except ProviderInvalid as exc:
            raise _refuse(FLAGS.get(exc.field, "") + str(exc)) from None
        provider = Provider.objects.create(**fields)
        self.stdout.write(
            f"registered provider {provider.name} ({provider.kind}, "
            f"{provider.base_url}); the workers read its key from ${key_env}"
        )
