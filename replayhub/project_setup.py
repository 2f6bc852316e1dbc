"""Checking what an admin gives to register or edit a project, in one place.

``manage.py project_add`` and the project form in the browser both call
``project_fields``; each problem is a ``ProjectInvalid`` naming the setting
(its command-line option and its form field) and one sentence.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from django.conf import settings

from replayhub.git import mirrors
from replayhub.git.history import History
from replayhub.git.scratch import GitError
from replayhub.models import Project, Provider
from replayhub.models.projects import (
    default_setup_inputs,
    default_test_paths,
    egress_list_problem,
    glob_list_problem,
)

# The form field of each command-line option checked here.
FIELDS = {
    "slug": "slug",
    "--repo": "repo",
    "--repo-credential-env": "repo_credential_env",
    "--test-command": "test_command",
    "--agent-command": "agent_command",
    "--allowed-paths": "allowed_paths",
    "--test-paths": "test_paths",
    "--time-limit": "time_limit",
    "--egress-agent": "egress_agent",
    "--egress-tests": "egress_tests",
    "--providers": "providers",
    "--setup-command": "setup_command",
    "--setup-inputs": "setup_inputs",
    "--egress-setup": "egress_setup",
    "--harness-command": "harness_command",
    "--verifier-command": "verifier_command",
}


# A slug is one path segment of the project's pages; these segments are the
# pages' own.
SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*\Z")
RESERVED_SLUGS = frozenset({"new"})


class ProjectInvalid(ValueError):
    """One bad setting: ``option`` as the command spells it, ``message`` whole."""

    def __init__(self, option: str, message: str):
        super().__init__(message)
        self.option = option
        self.message = message

    @property
    def field(self) -> str:
        return FIELDS.get(self.option, "")

    @property
    def detail(self) -> str:
        """The message without its leading option, for beside a form field."""
        text = self.message.removeprefix(f"{self.option}: ")
        return text[:1].upper() + text[1:]


def argv(option: str, value: str) -> list[str]:
    """A command split like a shell would split it (never run through one)."""
    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise ProjectInvalid(
            option, f"{option}: cannot split {value!r}: {exc}."
        ) from None
    if not words:
        raise ProjectInvalid(option, f"{option} is empty: give the command to run.")
    return words


def slug_check(slug: str) -> None:
    """Refuse a slug that cannot name the project's pages."""
    if not SLUG.match(slug) or len(slug) > 64:
        raise ProjectInvalid(
            "slug",
            f"{slug!r} is not a valid project name: use up to 64 letters, digits, "
            "hyphens and underscores, starting with a letter or digit.",
        )
    if slug in RESERVED_SLUGS:
        raise ProjectInvalid("slug", f"{slug!r} is reserved: choose another name.")


def project_fields(
    *,
    slug: str,
    repo: str,
    test_command: str | None,
    agent_command: str | None,
    allowed_paths: list[str],
    test_paths: list[str] | None,
    time_limit: int,
    egress_agent: list[str],
    egress_tests: list[str],
    providers: list[str],
    setup_command: str | None = None,
    setup_inputs: list[str] | None = None,
    egress_setup: list[str] = [],  # noqa: B006 (never changed)
    harness_command: str | None = None,
    verifier_command: str | None = None,
    repo_credential_env: str = "",
    editing: Project | None = None,
) -> dict:
    """The checked fields of a project, ready for ``Project``; raises ProjectInvalid.

    ``editing`` is the project being changed (its own slug is not taken).
    ``test_paths`` None means the default layouts, ``setup_inputs`` None the
    common lockfiles. A command given as None is stored empty (no setup phase,
    no harness, no separate verifier); a command given must not be empty. The
    test and agent commands may be left out only in a project of rollouts
    (one with a harness command). ``repo`` is a path on this host or a URL
    the remote of which must answer; ``repo_credential_env`` names the
    variable holding an http(s) URL's credential.
    """
    if editing is None or slug != editing.slug:
        slug_check(slug)
    taken = Project.objects.filter(slug=slug)
    if editing is not None:
        taken = taken.exclude(pk=editing.pk)
    if taken.exists():
        raise ProjectInvalid("slug", f"a project named {slug!r} already exists.")
    repository = repository_fields(repo, repo_credential_env)
    if time_limit <= 0:
        raise ProjectInvalid(
            "--time-limit", "--time-limit must be a positive number of seconds."
        )
    globs = [g for g in allowed_paths if g.strip()]
    tests = default_test_paths() if test_paths is None else test_paths
    for option, value in (("--allowed-paths", globs), ("--test-paths", tests)):
        if problem := glob_list_problem(value):
            raise ProjectInvalid(option, f"{option}: {problem}")
    for option, value in (
        ("--egress-agent", egress_agent),
        ("--egress-tests", egress_tests),
    ):
        if problem := egress_list_problem(value):
            raise ProjectInvalid(option, f"{option}: {problem}")
    harness = _command("--harness-command", harness_command)
    if not harness:
        for option, command in (
            ("--test-command", test_command),
            ("--agent-command", agent_command),
        ):
            if command is None:
                raise ProjectInvalid(
                    option,
                    f"{option} is required (or --harness-command, for a project "
                    "of rollouts).",
                )
    inputs = default_setup_inputs() if setup_inputs is None else setup_inputs
    if problem := glob_list_problem(inputs):
        raise ProjectInvalid("--setup-inputs", f"--setup-inputs: {problem}")
    if problem := egress_list_problem(egress_setup):
        raise ProjectInvalid("--egress-setup", f"--egress-setup: {problem}")
    named = list(Provider.objects.filter(name__in=providers))
    if missing := sorted(set(providers) - {p.name for p in named}):
        raise ProjectInvalid(
            "--providers",
            f"--providers: no provider named {', '.join(map(repr, missing))} "
            "(register it with provider_add first).",
        )
    return {
        **repository,
        "test_command": _command("--test-command", test_command),
        "agent_command": _command("--agent-command", agent_command),
        "allowed_paths": globs,
        "test_paths": tests,
        "time_limit_seconds": time_limit,
        "egress_agent": egress_agent,
        "egress_tests": egress_tests,
        "providers": named,
        "setup_command": _command("--setup-command", setup_command),
        "setup_inputs": inputs,
        "egress_setup": egress_setup,
        "harness_command": harness,
        "verifier_command": _command("--verifier-command", verifier_command),
    }


def repository_fields(repo: str, credential_env: str = "") -> dict[str, str]:
    """The repository's fields: a git repository on this host, or a URL whose
    remote answers (``git ls-remote``, with the credential when one is named)."""
    repo, credential_env = repo.strip(), credential_env.strip()
    if not mirrors.is_remote(repo):
        if credential_env:
            raise ProjectInvalid(
                "--repo-credential-env",
                "--repo-credential-env is for a repository given as an https:// "
                "or http:// URL.",
            )
        path = Path(repo).expanduser().resolve()
        try:
            History(path).close()
        except GitError:
            raise ProjectInvalid("--repo", f"{repo} is not a git repository.") from None
        return {"repo_path": str(path), "repo_credential_env": ""}
    if problem := mirrors.url_problem(repo):
        raise ProjectInvalid("--repo", f"--repo: {problem}")
    if credential_env and (
        problem := mirrors.credential_env_problem(credential_env, repo)
    ):
        raise ProjectInvalid(
            "--repo-credential-env", f"--repo-credential-env: {problem}"
        )
    root = Path(settings.REPLAYHUB_MIRROR_DIR)
    root.mkdir(parents=True, exist_ok=True)
    try:
        mirrors.Remote(repo, credential_env).check(cwd=root)
    except mirrors.RepoUnreachable as exc:
        raise ProjectInvalid(
            "--repo", f"--repo: {repo} did not answer as a git repository: {exc.line}"
        ) from None
    return {"repo_path": repo, "repo_credential_env": credential_env}


def _command(option: str, value: str | None) -> list[str]:
    """A command given (checked, split) or not (None: stored empty)."""
    return argv(option, value) if value is not None else []
