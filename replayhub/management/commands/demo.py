from __future__ import annotations

import io
import json
import secrets
import time
from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from replayhub import roles, services
from replayhub.demo import calculator, packaged
from replayhub.models import (
    Project,
    Provider,
    ProviderKind,
    Replay,
    ReplayStatus,
    Run,
    Trigger,
)
from reviews.trends.rollups import rollup_range


class Command(BaseCommand):
    help = (
        "Build the demo project, import its recorded runs through the ingest path "
        "and replay them through the worker. Safe to run again."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--wait",
            type=int,
            default=300,
            metavar="SECONDS",
            help="How long to wait for the worker to finish the replays (0: do not).",
        )
        parser.add_argument(
            "--logins-only",
            action="store_true",
            help="Create the demo's reviewer and lead logins, print them and stop "
            "(./dev run prints them with the URL, before the demo's progress).",
        )
        parser.add_argument(
            "--logins-shown",
            action="store_true",
            help="The logins were printed already (--logins-only, as ./dev run "
            "does): the closing lines say where they are saved instead of "
            "printing them again.",
        )

    def handle(self, *args, wait, logins_only=False, logins_shown=False, **options):
        if logins_only:
            self.print_logins()
            return
        folder = settings.VAR_DIR / "demo"
        folder.mkdir(parents=True, exist_ok=True)
        self.say("building the demo repository")
        commits = calculator.build_repository(folder / "calc")
        project = self.project(folder / "calc")
        self.import_and_queue(
            project, calculator.records(commits), folder / "runs.jsonl"
        )
        # The second project's tests need a package the host does not have:
        # its setup phase installs it from the demo's index, once.
        index_url = settings.REPLAYHUB_DEMO_INDEX_URL
        repo = folder / f"calc-env-{packaged.index_port(index_url)}"
        env_commits = packaged.build_repository(repo, index_url)
        env_project, _ = Project.objects.update_or_create(
            slug=packaged.SLUG, defaults=packaged.project_fields(repo, index_url)
        )
        self.import_and_queue(
            env_project, packaged.records(env_commits), folder / "runs-env.jsonl"
        )
        if wait:
            self.wait_for_replays([project, env_project], wait)
        # The trends dashboard reads rollups; count what the demo replayed.
        since = timezone.now().date() - timedelta(days=2)
        rows = rollup_range(since=since, project=project)
        rows += rollup_range(since=since, project=env_project)
        self.say(f"trends: {rows} rollup rows")
        self.close(logins_shown=logins_shown)

    def close(self, *, logins_shown: bool) -> None:
        """The closing lines. They name every login, the admin's too (printed
        first by bootstrap_admin, it has scrolled away by now), unless they
        were printed already: then once is enough, and they say where the
        logins are saved."""
        if not logins_shown:
            self.print_logins()
            self.print_admin_login()
            return
        self.demo_logins()
        self.say(
            "the logins are printed above, with the URL, and saved in "
            f"{settings.VAR_DIR / 'demo-logins.txt'} and "
            f"{settings.VAR_DIR / 'admin-password.txt'}"
        )

    def import_and_queue(self, project, records, records_file) -> None:
        with records_file.open("w") as out:
            for record in records:
                out.write(json.dumps(record) + "\n")
        self.say(f"importing {records_file}")
        buffer = io.StringIO()
        call_command(
            "import_runs",
            str(records_file),
            "--project",
            project.slug,
            "--json",
            stdout=buffer,
        )
        summary = json.loads(buffer.getvalue())
        self.say(
            f"imported {summary['imported']}, already there {summary['duplicates']}"
        )
        with transaction.atomic():
            fresh = list(Run.objects.filter(project=project, replays__isnull=True))
            for run in fresh:
                services.replay_request(run=run, trigger=Trigger.COMMAND)
        if fresh:
            self.say(f"queued {len(fresh)} replays of {project.slug} for the worker")

    def project(self, repo) -> Project:
        project, created = Project.objects.get_or_create(
            slug="demo",
            defaults={
                "name": "Demo calculator",
                "repo_path": str(repo),
                "test_command": ["python3", "-m", "unittest", "-v"],
                "agent_command": ["sh", "agent.sh"],
                "allowed_paths": ["calc.py", "test_*.py"],
                "time_limit_seconds": 8,
                "memory_limit_mb": 512,
                "max_attempts": 1,
            },
        )
        if created:
            self.say("registered project demo")
        # The stand-in model API: no model, a local server that echoes the
        # prompt, so that one demo replay goes through the gateway.
        provider, _ = Provider.objects.update_or_create(
            name="stand-in",
            defaults={
                "kind": ProviderKind.ANTHROPIC,
                "base_url": settings.REPLAYHUB_DEMO_MODEL_URL,
                "key_env": settings.DEMO_MODEL_KEY_ENV,
                "prices": {"coder-large": {"input": "3", "output": "15"}},
            },
        )
        project.providers.add(provider)
        return project

    def wait_for_replays(self, projects, timeout: int) -> None:
        deadline = time.monotonic() + timeout
        last = None
        while True:
            replays = Replay.objects.filter(project__in=projects)
            total = replays.count()
            done = replays.filter(status=ReplayStatus.FINISHED).count()
            if (done, total) != last:
                self.say(f"replays finished: {done}/{total}")
                last = (done, total)
            if done == total or time.monotonic() > deadline:
                break
            time.sleep(1)
        verdicts = Counter(
            Replay.objects.filter(
                project__in=projects, status=ReplayStatus.FINISHED
            ).values_list("verdict", flat=True)
        )
        mix = ", ".join(f"{n} {verdict}" for verdict, n in sorted(verdicts.items()))
        self.say(f"verdicts: {mix or 'none yet'}")
        if done < total:
            self.say("the worker is still busy; the rest appear as it finishes")

    def print_logins(self) -> None:
        saved = self.demo_logins()
        for username, password in saved.items():
            self.stdout.write(f"demo login: {username} / {password}")
        self.stdout.write(
            f"demo logins saved in {settings.VAR_DIR / 'demo-logins.txt'}"
        )

    def demo_logins(self) -> dict[str, str]:
        """The demo's people, created (or their roles restored) with the
        passwords saved in ``demo-logins.txt``, new ones saved there."""
        logins_file = settings.VAR_DIR / "demo-logins.txt"
        saved = {}
        if logins_file.exists():
            saved = dict(line.split() for line in logins_file.read_text().splitlines())
        user_model = get_user_model()
        # Two reviewers: second opinions and agreement need a pair.
        people = (
            ("reviewer", roles.REVIEWER),
            ("reviewer2", roles.REVIEWER),
            ("lead", roles.LEAD),
        )
        for username, role in people:
            password = saved.get(username) or secrets.token_urlsafe(9)
            user, created = user_model.objects.get_or_create(username=username)
            if created or username not in saved:
                user.set_password(password)
                user.save()
            user.groups.add(Group.objects.get(name=role))
            saved[username] = password
        logins_file.write_text("".join(f"{u} {p}\n" for u, p in saved.items()))
        logins_file.chmod(0o600)
        return saved

    def print_admin_login(self) -> None:
        """The admin login as bootstrap_admin saved it, or where to look."""
        secret_file = settings.VAR_DIR / "admin-password.txt"
        saved = secret_file.read_text().split() if secret_file.exists() else []
        if len(saved) == 2:
            username, password = saved
            self.stdout.write(
                f"admin login: {username} / {password}  (saved in {secret_file})"
            )
        elif get_user_model().objects.filter(is_superuser=True).exists():
            self.stdout.write("admin login: an administrator created before the demo")
        else:
            self.stdout.write("admin login: none yet (manage.py bootstrap_admin)")

    def say(self, message: str) -> None:
        self.stdout.write(f"demo: {message}")
        self.stdout.flush()
