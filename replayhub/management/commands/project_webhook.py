from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from replayhub.models import Project, Webhook, WebhookFormat
from replayhub.outbound.events import EVENTS
from replayhub.outbound.services import OutboundInvalid, webhook_add, where


class Command(BaseCommand):
    help = (
        "A project's webhooks: add SLUG URL --events replay.finished,... "
        "[--format cloudevents|slack] [--secret-env NAME]; list SLUG; "
        "remove SLUG ID. A CloudEvents webhook is signed "
        "(X-ReplayHub-Signature-256) with the key in the variable --secret-env "
        "names, from REPLAYHUB_REPO_CREDENTIAL_ENVS; a URL on a private "
        f"address is refused. Events: {', '.join(EVENTS)}."
    )

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        add = actions.add_parser("add")
        add.add_argument("slug", metavar="SLUG")
        add.add_argument("url", metavar="URL")
        add.add_argument("--events", required=True, help="Comma-separated.")
        add.add_argument(
            "--format", choices=WebhookFormat.values, default=WebhookFormat.CLOUDEVENTS
        )
        add.add_argument("--secret-env", default="")
        listing = actions.add_parser("list")
        listing.add_argument("slug", metavar="SLUG")
        remove = actions.add_parser("remove")
        remove.add_argument("slug", metavar="SLUG")
        remove.add_argument("id", type=int, metavar="ID")

    def handle(self, *args, action, slug, **options):
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            raise CommandError(f"there is no project {slug!r}.", returncode=2)
        if action == "list":
            for hook in Webhook.objects.filter(project=project):
                self.stdout.write(_shown(hook))
        elif action == "remove":
            deleted, _ = Webhook.objects.filter(
                project=project, pk=options["id"]
            ).delete()
            if not deleted:
                raise CommandError(
                    f"{slug} has no webhook {options['id']}.", returncode=2
                )
            self.stdout.write(f"webhook {options['id']} removed")
        else:
            try:
                hook = webhook_add(
                    project=project,
                    url=options["url"],
                    events_wanted=[
                        e.strip() for e in options["events"].split(",") if e.strip()
                    ],
                    format=options["format"],
                    secret_env=options["secret_env"],
                )
            except OutboundInvalid as exc:
                raise CommandError(str(exc), returncode=2) from None
            self.stdout.write(_shown(hook))


def _shown(hook: Webhook) -> str:
    signed = f"signed with ${hook.secret_env}" if hook.secret_env else "unsigned"
    return (
        f"{hook.pk}: {where(hook.url)} {hook.format} {','.join(hook.events)} ({signed})"
    )
