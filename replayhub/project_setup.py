"""Checking what an admin gives to register or edit a project, in one place.

``manage.py project_add``, ``manage.py project_edit`` and the project form in
the browser all call ``project_fields``; each problem is a ``ProjectInvalid``
naming the setting (its command-line option and its form field) and one
sentence, in the command's words and in the form's. ``project_fields`` finds
every problem before it refuses (``ProjectProblems``): the commands print the
first on one line, the form shows each beside its field.

``project_fields`` reads nothing over the network. A repository given as a
URL is asked whether it answers by ``remote_check``, which each caller runs
last, once every other check has passed: the remote's host is chosen by
whoever fills the form, and a refused form sends nothing anywhere, least of
all a credential.

``SETTINGS`` (``models.project_settings``) is the one table of a replay's
settings; ``parse_setting`` reads one from the command line and
``checked_settings`` checks their values.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.text import capfirst

from replayhub import agents
from replayhub.agents.profile import WIRE_NAMES, version_problem
from replayhub.environments.images import image_digest
from replayhub.git import mirrors
from replayhub.git.history import History
from replayhub.git.scratch import GitError, branch_name
from replayhub.lib.globs import glob_list_problem
from replayhub.lib.shellwords import unexpanded_variable
from replayhub.models import Budget, Project, Provider
from replayhub.models.project_settings import (
    SETTING,
    SETTINGS,
    Setting,
    long_tests_problem,
    setting_problem,
)
from replayhub.models.projects import (
    credential_policy,
    default_setup_inputs,
    default_test_paths,
    egress_list_problem,
)
from replayhub.nights import shares, tiers


def parse_setting(setting: Setting, text: str | list[str]) -> Any:
    """A setting's value from the command line (a word, or the globs); raises
    ProjectInvalid naming the option. ``none`` empties an optional number."""
    option = setting.option
    if setting.kind == "globs":
        return [glob for glob in text if glob.strip()]
    assert isinstance(text, str)
    word = text.strip()
    if setting.optional and word.lower() in ("none", ""):
        return None
    if setting.kind == "choice":
        return word
    if setting.kind == "money":
        try:
            amount = Decimal(word)
        except InvalidOperation:
            amount = Decimal("NaN")
        if not amount.is_finite():
            raise ProjectInvalid(option, f"{option}: {text!r} is not an amount.")
        return amount
    try:
        return int(word)
    except ValueError:
        empty = " or none" if setting.optional else ""
        raise ProjectInvalid(
            option, f"{option}: {text!r} is not a whole number{empty}."
        ) from None


def checked_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` (field name to value, of ``SETTINGS`` only) once checked;
    raises ProjectProblems naming every bad one, the first first."""
    out = {}
    problems: list[ProjectInvalid] = []
    for name, value in values.items():
        setting = SETTING[name]
        option = setting.option
        problem = ""
        if setting.kind == "globs":
            problem = glob_list_problem(value)
        elif setting.kind == "choice":
            choices = [str(choice) for choice, _ in setting.model_field.choices or ()]
            if value not in choices:
                problem = f"choose one of {', '.join(choices)}."
        elif value is None:
            if not setting.optional:
                problem = "give a number."
        else:
            problem = setting_problem(setting, value)
            if setting.kind == "money" and not problem:
                value = Decimal(value).quantize(Decimal("0.0001"))
        if problem:
            problem = problem[:1].lower() + problem[1:]
            problems.append(ProjectInvalid(option, f"{option}: {problem}"))
        out[name] = value
    if problems:
        raise ProjectProblems(problems)
    return out


# The form field of each command-line option checked here.
FIELDS = {
    "slug": "slug",
    "--repo": "repo",
    "--repo-credential-env": "repo_credential_env",
    "--test-command": "test_command",
    "--agent-command": "agent_command",
    "--agent": "agent",
    "--agent-version": "agent_version",
    "--allowed-paths": "allowed_paths",
    "--test-paths": "test_paths",
    "--egress-agent": "egress_agent",
    "--egress-tests": "egress_tests",
    "--providers": "providers",
    "--setup-command": "setup_command",
    "--setup-inputs": "setup_inputs",
    "--egress-setup": "egress_setup",
    "--harness-command": "harness_command",
    "--verifier-command": "verifier_command",
    "--root-image": "root_image",
    "--env-share-group": "env_share_group",
    "--default-branch": "default_branch",
    **{setting.option: setting.field for setting in SETTINGS},
}


# A slug is one path segment of the project's pages; these segments are the
# pages' own.
SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*\Z")
SLUG_CHARS = 64  # the column's
RESERVED_SLUGS = frozenset({"new"})


class ProjectInvalid(ValueError):
    """One bad setting: ``option`` as the command spells it, ``message`` whole
    (the command's words), ``said`` the form's words when they differ by more
    than the leading option."""

    def __init__(self, option: str, message: str, said: str = ""):
        super().__init__(message)
        self.option = option
        self.message = message
        self.said = said

    @property
    def field(self) -> str:
        return FIELDS.get(self.option, "")

    @property
    def detail(self) -> str:
        """The problem in the form's words, for beside its field: never an
        option's name."""
        if self.said:
            return self.said
        text = self.message.removeprefix(f"{self.option}: ")
        # A sentence starts with a capital; a URL or a path is left as given.
        if text.split(" ", 1)[0].isalpha():
            return capfirst(text)
        return text


class ProjectProblems(ProjectInvalid):
    """Every problem found at once. It stands for the first (its option and
    message), so a command that reports one line reports that one; the form
    reads ``problems`` and puts each beside its field."""

    problems: list[ProjectInvalid]

    def __init__(self, problems: list[ProjectInvalid]):
        assert problems, "ProjectProblems needs a problem"
        flat: list[ProjectInvalid] = []
        for problem in problems:
            flat.extend(
                problem.problems if isinstance(problem, ProjectProblems) else [problem]
            )
        first = flat[0]
        super().__init__(first.option, first.message, first.said)
        self.problems = flat


class _Collector:
    """The problems of one check, gathered rather than raised one by one."""

    def __init__(self) -> None:
        self.problems: list[ProjectInvalid] = []

    def add(self, option: str, message: str, said: str = "") -> None:
        self.problems.append(ProjectInvalid(option, message, said))

    def run(self, check, *args, default=None):
        """``check(*args)``, or ``default`` with its problems kept."""
        try:
            return check(*args)
        except ProjectProblems as exc:
            self.problems.extend(exc.problems)
        except ProjectInvalid as exc:
            self.problems.append(exc)
        return default

    def refuse(self) -> None:
        if self.problems:
            raise ProjectProblems(self.problems)


def option_of(field: str) -> str:
    """The option that sets a project field (the field itself when none does)."""
    for option, name in FIELDS.items():
        if name == field and option.startswith("--"):
            return option
    return field


def refused(error: ValidationError) -> ProjectInvalid:
    """The model's refusal (``full_clean``) as problems, every field's; it
    stands for its first field's."""
    if hasattr(error, "error_dict"):
        problems = []
        for field, errors in error.error_dict.items():
            option = option_of(field)
            text = " ".join(m for e in errors for m in e.messages)
            problems.append(ProjectInvalid(option, f"{option}: {text}"))
        return ProjectProblems(problems)
    return ProjectInvalid("", " ".join(error.messages))


def argv(option: str, value: str) -> list[str]:
    """A command split like a shell would split it (never run through one)."""
    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise ProjectInvalid(
            option, f"{option}: cannot split {value!r}: {exc}."
        ) from None
    if not words:
        raise ProjectInvalid(
            option,
            f"{option} is empty: give the command to run.",
            "Empty: give the command to run.",
        )
    return words


def slug_check(slug: str) -> None:
    """Refuse a slug that cannot name the project's pages."""
    if not SLUG.match(slug) or len(slug) > SLUG_CHARS:
        raise ProjectInvalid(
            "slug",
            f"{slug[:80]!r} is not a valid project name: use up to 64 letters, "
            "digits, hyphens and underscores, starting with a letter or digit.",
            # The form's words (it shows the value, and says a length itself).
            "Use letters a-z or A-Z, digits, '-' and '_' only, starting with a "
            "letter or digit.",
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
    egress_agent: list[str],
    egress_tests: list[str],
    providers: list[str],
    setup_command: str | None = None,
    setup_inputs: list[str] | None = None,
    egress_setup: list[str] = [],  # noqa: B006 (never changed)
    harness_command: str | None = None,
    verifier_command: str | None = None,
    repo_credential_env: str = "",
    agent: str = agents.CUSTOM,
    agent_version: str = "",
    settings: Mapping[str, Any] | None = None,
    editing: Project | None = None,
) -> dict:
    """The checked fields of a project, ready for ``Project``; raises
    ProjectProblems naming every problem found.

    ``settings`` are values of ``SETTINGS`` by field name (those left out
    keep their defaults, or the project's values).
    ``editing`` is the project being changed (its own slug is not taken).
    ``test_paths`` None means the default layouts, ``setup_inputs`` None the
    common lockfiles. A command given as None is stored empty (no setup phase,
    no harness, no separate verifier); a command given must not be empty. The
    test and agent commands may be left out only in a project of rollouts
    (one with a harness command); the agent command also in a project whose
    ``agent`` is a profile, which may not have one (``agent_fields``).
    ``repo`` is a path on this host or a URL; ``repo_credential_env`` names
    the variable holding an http(s) URL's credential, one the operator allows.
    Whether the URL answers is ``remote_check``'s to ask, after every other
    check.
    """
    found = _Collector()
    _check_name(found, slug, editing)
    repository = found.run(repository_fields, repo, repo_credential_env, default={})
    reach = _reach_fields(found, allowed_paths, test_paths, egress_agent, egress_tests)
    profile = agents.PROFILES.get(agent)
    harness = _harness(
        found, harness_command, test_command, "" if profile else agent_command
    )
    setup = _setup_fields(found, setup_inputs, egress_setup)
    named = _named_providers(found, providers)
    fields = {
        **repository,
        "test_command": found.run(_expanded, "--test-command", test_command),
        "agent_command": found.run(_expanded, "--agent-command", agent_command),
        **reach,
        "providers": named,
        "setup_command": found.run(_expanded, "--setup-command", setup_command),
        **setup,
        "harness_command": harness,
        "verifier_command": found.run(_command, "--verifier-command", verifier_command),
        **found.run(
            agent_fields,
            agent,
            agent_version,
            agent_command,
            {p.kind for p in named},
            default={},
        ),
        **found.run(checked_settings, settings or {}, default={}),
    }
    if problem := _test_limit(fields, editing):
        found.add("--test-time-limit", f"--test-time-limit: {problem}")
    found.refuse()
    return fields


def _test_limit(fields: Mapping[str, Any], editing: Project | None) -> str:
    """``long_tests_problem`` of the time limits given (or kept) against the
    agentic share of a night of the project's budget (or the default one)."""
    test, agent = (
        fields.get(name, getattr(editing, name) if editing else SETTING[name].default)
        for name in ("test_time_limit_seconds", "time_limit_seconds")
    )
    budget = (editing and Budget.objects.filter(project=editing).first()) or Budget()
    night = shares.limits_of(budget)[tiers.AGENTIC].sandbox_seconds
    return long_tests_problem(test, agent, night)


_SHARE_GROUP = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")


def sandbox_fields(
    *,
    root_image: str,
    require_image_match: bool,
    allow_test_interference: bool,
    env_share_group: str,
) -> dict[str, Any]:
    """The sandbox's settings a command and the form take beside
    ``project_fields``', checked: raises ProjectProblems naming each bad one."""
    problems = []
    root_image, group = root_image.strip(), env_share_group.strip()
    if (root_image or require_image_match) and not image_digest(root_image):
        problems.append(
            ProjectInvalid(
                "--root-image",
                f"--root-image: {root_image!r} is not pinned by digest "
                "(name@sha256:<64 hex digits>).",
                "Give an image pinned by digest: name@sha256:<64 hex digits>"
                + ("" if root_image else ", or do not require a match")
                + ".",
            )
        )
    if group and not _SHARE_GROUP.match(group):
        problems.append(
            ProjectInvalid(
                "--env-share-group",
                f"--env-share-group: {group!r} is not a group name.",
                "A group's name is letters, digits, dots, dashes and "
                "underscores, at most 64.",
            )
        )
    if problems:
        raise ProjectProblems(problems)
    return {
        "root_image": root_image,
        "require_image_match": require_image_match,
        "allow_test_interference": allow_test_interference,
        "env_share_group": group,
    }


def default_branch_problem(name: str) -> str:
    """Why ``name`` can never be a branch ("" when it can, or is empty: the
    repository's HEAD). Whether the repository has it is the remote's to
    say, and a branch may come later."""
    if not name or branch_name(name) is not None:
        return ""
    return f"--default-branch: {name[:100]!r} is not a branch name git takes."


def branch_check(repo: str, branch: str) -> None:
    """Refuse a default branch that is no branch name, or that a repository
    on this host lacks (ProjectInvalid naming ``--default-branch``)."""
    if problem := default_branch_problem(branch) or local_branch_problem(repo, branch):
        raise ProjectInvalid("--default-branch", problem)


def _check_name(found: _Collector, slug: str, editing: Project | None) -> None:
    """The slug names the project's pages and no other project has it."""
    if editing is None or slug != editing.slug:
        found.run(slug_check, slug)
    taken = Project.objects.filter(slug=slug)
    if editing is not None:
        taken = taken.exclude(pk=editing.pk)
    if taken.exists():
        found.add("slug", f"a project named {slug!r} already exists.")


def _check_lists(
    found: _Collector,
    problem_of: Callable[[object], str],
    *lists: tuple[str, list[str]],
) -> None:
    """Each ``(option, value)`` list checked by ``problem_of``."""
    for option, value in lists:
        if problem := problem_of(value):
            found.add(option, f"{option}: {problem}")


def _reach_fields(
    found: _Collector,
    allowed_paths: list[str],
    test_paths: list[str] | None,
    egress_agent: list[str],
    egress_tests: list[str],
) -> dict[str, list[str]]:
    """The paths the agent may change, the tests' paths, and the hosts the
    agent and the test runs may reach."""
    globs = [g for g in allowed_paths if g.strip()]
    tests = default_test_paths() if test_paths is None else test_paths
    _check_lists(
        found, glob_list_problem, ("--allowed-paths", globs), ("--test-paths", tests)
    )
    _check_lists(
        found,
        egress_list_problem,
        ("--egress-agent", egress_agent),
        ("--egress-tests", egress_tests),
    )
    return {
        "allowed_paths": globs,
        "test_paths": tests,
        "egress_agent": egress_agent,
        "egress_tests": egress_tests,
    }


def _harness(
    found: _Collector,
    harness_command: str | None,
    test_command: str | None,
    agent_command: str | None,
) -> list[str]:
    """The harness command; without one, the test and agent commands are
    required (``agent_command`` is "" for an agent profile, which needs none)."""
    harness = found.run(_command, "--harness-command", harness_command, default=[])
    if not harness and harness_command is None:
        for option, command in (
            ("--test-command", test_command),
            ("--agent-command", agent_command),
        ):
            if command is None:
                found.add(
                    option,
                    f"{option} is required (or --harness-command, for a project "
                    "of rollouts).",
                    "Required, unless the project runs rollouts (give a harness "
                    "command then).",
                )
    return harness


def _setup_fields(
    found: _Collector, setup_inputs: list[str] | None, egress_setup: list[str]
) -> dict[str, list[str]]:
    """The files that decide the environment and the hosts its setup may reach."""
    inputs = default_setup_inputs() if setup_inputs is None else setup_inputs
    _check_lists(found, glob_list_problem, ("--setup-inputs", inputs))
    _check_lists(found, egress_list_problem, ("--egress-setup", egress_setup))
    return {"setup_inputs": inputs, "egress_setup": egress_setup}


def _named_providers(found: _Collector, providers: list[str]) -> list[Provider]:
    """The providers named, each of which must be registered."""
    named = list(Provider.objects.filter(name__in=providers))
    if missing := sorted(set(providers) - {p.name for p in named}):
        found.add(
            "--providers",
            f"--providers: no provider named {', '.join(map(repr, missing))} "
            "(register it with provider_add first).",
        )
    return named


def agent_fields(
    agent: str, version: str, command: str | None, kinds: set[str]
) -> dict[str, str]:
    """The project's agent: a profile (``replayhub.agents``) at a version,
    reached through a provider of the kind its wire needs, or ``custom``
    (its agent command). Raises ProjectInvalid."""
    version = version.strip()
    if agent not in agents.NAMES:
        raise ProjectInvalid(
            "--agent", f"--agent: choose one of {', '.join(agents.NAMES)}."
        )
    profile = agents.PROFILES.get(agent)
    if profile is None:
        if version:
            raise ProjectInvalid(
                "--agent-version",
                "--agent-version is for an agent profile (give --agent NAME).",
                "Only an agent profile has a version.",
            )
        return {"agent": agent, "agent_version": ""}
    if command:
        raise ProjectInvalid(
            "--agent-command",
            f"--agent-command: the project runs the {agent} profile "
            f"(--agent {agent}); give one or the other, not both.",
            f"The {agent} profile runs the agent: leave this empty, or choose custom.",
        )
    if version and (problem := version_problem(version)):
        raise ProjectInvalid("--agent-version", f"--agent-version: {problem}")
    if profile.provider_kind not in kinds:
        wire = WIRE_NAMES[profile.wire]
        kind = profile.provider_kind
        an = "an" if kind[0] in "aeiou" else "a"
        raise ProjectInvalid(
            "--providers",
            f"--agent {agent}: {profile.title} calls {wire}; name {an} {kind} "
            "provider in --providers.",
            f"{profile.title} calls {wire}: choose {an} {kind} provider.",
        )
    return {"agent": agent, "agent_version": version}


def repository_fields(repo: str, credential_env: str = "") -> dict[str, str]:
    """The repository's fields: a git repository on this host, or a URL and
    the name of a variable allowed to hold its credential. Nothing is sent to
    a URL here (``remote_check`` does that, last)."""
    repo, credential_env = repo.strip(), credential_env.strip()
    if not mirrors.is_remote(repo):
        if credential_env:
            raise ProjectInvalid(
                "--repo-credential-env",
                "--repo-credential-env is for a repository given as an https:// "
                "or http:// URL.",
                "Only for a repository given as an https:// or http:// URL.",
            )
        try:
            # A home that does not exist, a name too long, a directory this
            # host may not read: all just "not a repository here".
            path = Path(repo).expanduser().resolve()
            History(path).close()
        except (GitError, OSError, RuntimeError, ValueError):
            raise ProjectInvalid("--repo", f"{repo} is not a git repository.") from None
        return {"repo_path": str(path), "repo_credential_env": ""}
    if problem := mirrors.url_problem(repo):
        raise ProjectInvalid("--repo", f"--repo: {problem}")
    if credential_env and (
        problem := mirrors.credential_env_problem(credential_env, repo)
        or credential_policy().problem(credential_env)
    ):
        raise ProjectInvalid(
            "--repo-credential-env", f"--repo-credential-env: {problem}"
        )
    return {"repo_path": repo, "repo_credential_env": credential_env}


def remote_check(
    fields: Mapping[str, Any], *, slug: str, editing: Project | None
) -> None:
    """The last checks of a registration or an edit, made once every other one
    has passed: the model's own (``full_clean``), then, for a repository given
    as a URL, whether it answers as a git repository (``git ls-remote``, with
    its credential). Raises ProjectInvalid.

    ``fields`` are the project's checked fields (``project_fields``'s, and any
    the caller adds); ``editing`` is the project being changed.
    """
    candidate = (
        Project(slug=slug, name=slug)
        if editing is None
        else Project.objects.get(pk=editing.pk)
    )
    for name, value in fields.items():
        if name != "providers":
            setattr(candidate, name, value)
    candidate.slug = slug
    try:
        candidate.full_clean()
    except ValidationError as error:
        raise refused(error) from None
    repo, credential_env = fields["repo_path"], fields["repo_credential_env"]
    if not mirrors.is_remote(repo):
        _local_branch_check(repo, fields.get("default_branch", ""))
        return
    root = Path(settings.REPLAYHUB_MIRROR_DIR)
    root.mkdir(parents=True, exist_ok=True)
    policy = credential_policy()
    branch = fields.get("default_branch", "")
    try:
        heads = mirrors.Remote(repo, credential_env, policy).check(
            cwd=root, branch=branch
        )
    except mirrors.RepoUnreachable as exc:
        raise ProjectInvalid(
            "--repo", f"--repo: {repo} did not answer as a git repository: {exc.line}"
        ) from None
    if heads is not None:
        raise ProjectInvalid("--default-branch", branch_problem(repo, branch, heads))


def local_branch_problem(repo: str, branch: str) -> str:
    """Why a repository on this host can never give ``branch`` as its default
    ("" when it can, when the branch is empty, or when ``repo`` is no
    repository here): its runs' bases are found on the default branch, so
    one it lacks finds none."""
    if not branch or mirrors.is_remote(repo):
        return ""
    try:
        with History(Path(repo).expanduser()) as history:
            if history.branch_tip(branch) is not None:
                return ""
            some = history.branches()
    except (GitError, OSError, RuntimeError, ValueError):
        return ""  # the repository's own problem is said beside its field
    return branch_problem(repo, branch, some)


def branch_problem(repo: str, branch: str, branches: list[str]) -> str:
    have = f"its branches: {', '.join(branches)}" if branches else "it has no branch"
    return f"--default-branch: {repo} has no branch {branch[:100]!r} ({have})."


def _local_branch_check(repo: str, branch: str) -> None:
    if problem := local_branch_problem(repo, branch):
        raise ProjectInvalid("--default-branch", problem)


# What each command gets instead of a shell's expansion of a ``$VAR``.
_INSTEAD = {
    "--agent-command": "it gets only the sandbox's variables (REPLAYHUB_MODEL, "
    "REPLAYHUB_PROMPT_FILE…), which the agent reads itself; write {max_turns} "
    "or {max_tokens} for the caps",
    "--test-command": "the tests get only the sandbox's variables; write the "
    "value itself (pytest -x)",
    "--setup-command": "the setup gets only the sandbox's variables "
    "(REPLAYHUB_ENV_DIR…); write the value itself (pip install -r "
    "requirements.txt)",
}


def unexpanded_problem(words: list[str], option: str = "--agent-command") -> str:
    """Why a command's ``$VAR`` would reach the program as typed ("" when
    none would), in the words of the command ``option`` names."""
    if not (variable := unexpanded_variable(words)):
        return ""
    return (
        f"{variable} is not expanded: no shell runs the command, and "
        f"{_INSTEAD[option]}, or sh -c '…' to expand."
    )


def _expanded(option: str, value: str | None) -> list[str]:
    """The test, agent or setup command, split, with no variable left for a shell."""
    words = _command(option, value)
    if problem := unexpanded_problem(words, option):
        raise ProjectInvalid(option, f"{option}: {problem}")
    return words


def _command(option: str, value: str | None) -> list[str]:
    """A command given (checked, split) or not (None: stored empty)."""
    return argv(option, value) if value is not None else []
