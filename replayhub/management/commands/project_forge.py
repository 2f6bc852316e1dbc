from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from replayhub.models import Forge, ForgeKind, Project
from replayhub.outbound.services import OutboundInvalid, forge_set


class Command(BaseCommand):
    help = (
        "Name the forge a project's original commits live on, to set a commit "
        "status (context replayhub/<slug>) on each replayed commit: "
        "project_forge shop --forge github --forge-repo owner/repo "
        "--forge-token-env REPLAYHUB_REPO_TOKEN_SHOP. Without options, print "
        "it; --off forgets it. The token is read by that name on the workers "
        "and never stored."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug", metavar="SLUG")
        parser.add_argument("--forge", choices=ForgeKind.values)
        parser.add_argument(
            "--forge-url",
            default="",
            help="The API's base URL (self-hosted); default "
            "https://api.github.com or https://gitlab.com/api/v4.",
        )
        parser.add_argument(
            "--forge-repo",
            help="owner/repo on GitHub; the project's path or id on GitLab.",
        )
        parser.add_argument(
            "--forge-token-env",
            help="The variable holding the token, from REPLAYHUB_REPO_CREDENTIAL_ENVS.",
        )
        parser.add_argument("--off", action="store_true")

    def handle(self, *args, slug, **options):
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            raise CommandError(f"there is no project {slug!r}.", returncode=2)
        if options["off"]:
            deleted, _ = Forge.objects.filter(project=project).delete()
            self.stdout.write(
                f"{slug}: " + ("forge forgotten" if deleted else "no forge")
            )
            return
        if options["forge"] is None:
            forge = Forge.objects.filter(project=project).first()
            self.stdout.write(_shown(forge) if forge else f"{slug}: no forge")
            return
        if not options["forge_repo"] or not options["forge_token_env"]:
            raise CommandError(
                "--forge needs --forge-repo and --forge-token-env.", returncode=2
            )
        try:
            forge = forge_set(
                project=project,
                kind=options["forge"],
                repo=options["forge_repo"],
                token_env=options["forge_token_env"],
                api_url=options["forge_url"],
            )
        except OutboundInvalid as exc:
            raise CommandError(str(exc), returncode=2) from None
        self.stdout.write(_shown(forge))
        if not settings.REPLAYHUB_BASE_URL:
            self.stderr.write(
                "warning: REPLAYHUB_BASE_URL is not set, so the statuses link to "
                "no replay page; set it to the address people open ReplayHub at."
            )


def _shown(forge: Forge) -> str:
    return (
        f"{forge.project.slug}: {forge.kind} {forge.repo} at {forge.api_url}, "
        f"token from ${forge.token_env}"
    )
