from __future__ import annotations

import shlex
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from replayhub.gitops import GitError
from replayhub.history import History
from replayhub.models import Project, Provider
from replayhub.models.projects import (
    default_test_paths,
    egress_list_problem,
    glob_list_problem,
)


def _argv(option: str, value: str) -> list[str]:
    try:
        argv = shlex.split(value)
    except ValueError as exc:
        raise CommandError(
            f"{option}: cannot split {value!r}: {exc}.", returncode=2
        ) from None
    if not argv:
        raise CommandError(f"{option} is empty: give the command to run.", returncode=2)
    return argv


class Command(BaseCommand):
    help = (
        "Register a project. Commands are split like a shell would split them and "
        "stored as argument lists; they are never run through a shell."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--repo", required=True, help="Path of the git repository.")
        parser.add_argument("--test-command", required=True)
        parser.add_argument("--agent-command", required=True)
        parser.add_argument(
            "--allowed-paths", nargs="+", action="extend", default=[], metavar="GLOB"
        )
        parser.add_argument(
            "--test-paths",
            nargs="+",
            action="extend",
            metavar="GLOB",
            help="The test files and the test runner's configuration (default: "
            "the common layouts, conftest.py, pytest.ini, package.json, ...). "
            "When a replay's differ from the original's, the original's are run "
            "on the replay's code, and that run decides.",
        )
        parser.add_argument(
            "--providers",
            nargs="+",
            action="extend",
            default=[],
            metavar="NAME",
            help="Model providers (provider_add) the agent may call.",
        )
        parser.add_argument(
            "--egress-agent",
            nargs="+",
            action="extend",
            default=[],
            metavar="HOST:PORT",
            help="Hosts the agent may reach through the egress proxy "
            "(e.g. pypi.org:443, *.pythonhosted.org:443). Default: none.",
        )
        parser.add_argument(
            "--egress-tests",
            nargs="+",
            action="extend",
            default=[],
            metavar="HOST:PORT",
            help="Hosts the test runs may reach. Default: none.",
        )
        parser.add_argument(
            "--allow-test-interference",
            action="store_true",
            help="Let a replay whose change could report a test run's success "
            "itself still be equivalent.",
        )
        parser.add_argument("--time-limit", type=int, default=600, metavar="SECONDS")
        parser.add_argument("--default-branch", default="")

    def handle(
        self,
        *args,
        slug,
        repo,
        test_command,
        agent_command,
        allowed_paths,
        time_limit,
        default_branch,
        test_paths,
        allow_test_interference,
        providers,
        egress_agent,
        egress_tests,
        **options,
    ):
        if Project.objects.filter(slug=slug).exists():
            raise CommandError(
                f"a project named {slug!r} already exists.", returncode=2
            )
        path = Path(repo).expanduser().resolve()
        try:
            History(path).close()
        except GitError:
            raise CommandError(
                f"{repo} is not a git repository.", returncode=2
            ) from None
        if time_limit <= 0:
            raise CommandError(
                "--time-limit must be a positive number of seconds.", returncode=2
            )
        globs = [g for g in allowed_paths if g.strip()]
        tests = default_test_paths() if test_paths is None else test_paths
        for option, value in (("--allowed-paths", globs), ("--test-paths", tests)):
            if problem := glob_list_problem(value):
                raise CommandError(f"{option}: {problem}", returncode=2)
        for option, value in (
            ("--egress-agent", egress_agent),
            ("--egress-tests", egress_tests),
        ):
            if problem := egress_list_problem(value):
                raise CommandError(f"{option}: {problem}", returncode=2)
        named = list(Provider.objects.filter(name__in=providers))
        if missing := sorted(set(providers) - {p.name for p in named}):
            raise CommandError(
                f"--providers: no provider named {', '.join(map(repr, missing))} "
                "(register it with provider_add first).",
                returncode=2,
            )
        project = Project.objects.create(
            slug=slug,
            name=slug,
            repo_path=str(path),
            default_branch=default_branch,
            test_command=_argv("--test-command", test_command),
            agent_command=_argv("--agent-command", agent_command),
            allowed_paths=globs,
            time_limit_seconds=time_limit,
            test_paths=tests,
            allow_test_interference=allow_test_interference,
            egress_agent=egress_agent,
            egress_tests=egress_tests,
        )
        project.providers.set(named)
        self.stdout.write(f"registered project {project.slug} ({project.repo_path})")
