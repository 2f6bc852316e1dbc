from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from replayhub.environments import build
from replayhub.git.mirrors import RepoUnreachable
from replayhub.models import Project
from replayhub.sandbox import SandboxUnavailable


class Command(BaseCommand):
    help = (
        "Build a project's environment (its setup phase) on this worker ahead of "
        "the night, or show the cached one."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument(
            "--base",
            metavar="SHA",
            help="The commit to build at (default: the default branch's tip).",
        )

    def handle(self, *args, slug, base, **options):
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            raise CommandError(f"there is no project {slug!r}.", returncode=2)
        if not project.setup_command:
            raise CommandError(
                f"project {slug} has no setup command (project_add --setup-command).",
                returncode=2,
            )
        self.stdout.write(f"preparing the environment of {slug}…")
        try:
            environment = build.build_ahead(project, base)
        except ValueError as error:
            raise CommandError(str(error), returncode=2) from None
        except build.SetupFailed as failed:
            tail = failed.summary.get("output_tail", "").rstrip()
            raise CommandError(
                f"setup failed: {failed.detail}\n{tail}", returncode=1
            ) from None
        except (SandboxUnavailable, build.LockTimeout) as error:
            raise CommandError(str(error), returncode=1) from None
        except RepoUnreachable as error:
            raise CommandError(
                f"the repository could not be fetched: {error}", returncode=1
            ) from None
        assert environment is not None
        how = "cached" if environment.cached else "built"
        self.stdout.write(
            f"{how}: environment {environment.key} "
            f"(setup took {environment.setup_seconds:.1f} s)"
        )
