from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from replayhub.management import project_options
from replayhub.models import Project
from replayhub.project_setup import ProjectInvalid, refused
from replayhub.rollouts.verifier import UNVERIFIED_WARNING, rewards_unverified
from reviews.project_services import replicates_update


class Command(BaseCommand):
    help = (
        "Register a project. Commands are split like a shell would split them and "
        "stored as argument lists; they are never run through a shell. Every "
        "option can be changed later with project_edit."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug")
        project_options.add_options(parser, editing=False)

    def handle(self, *args, slug, replicates: str | None = None, **options):
        try:
            policy = project_options.replicate_policy(replicates or "off")
            fields, providers = project_options.project_values(
                slug=slug, options=options
            )
            project = Project(slug=slug, name=slug, **fields)
            project.full_clean()
        except ProjectInvalid as exc:
            raise CommandError(exc.message, returncode=2) from None
        except ValidationError as exc:
            raise CommandError(refused(exc).message, returncode=2) from None
        with transaction.atomic():
            project.save()
            project.providers.set(providers)
            if policy is not None:
                replicates_update(actor=None, project=project, policy=policy)
        self.stdout.write(f"registered project {project.slug} ({project.repo_path})")
        if rewards_unverified(project):
            self.stderr.write(
                f"warning: {project.slug} {UNVERIFIED_WARNING} Give "
                "--verifier-command to score them in a sandbox of their own."
            )
