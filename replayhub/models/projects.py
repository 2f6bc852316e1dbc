"""Projects and the recorded runs to replay."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.text import capfirst

from replayhub import agents
from replayhub.agents.profile import Profile, version_problem
from replayhub.gateway.allow import parse_allow_entry
from replayhub.git import mirrors
from replayhub.ingest.native import whole_record
from replayhub.lib.boundedjson import StoredDecoder
from replayhub.lib.globs import glob_list_problem
from replayhub.rollouts.seeds import (
    DEFAULT_VERIFICATION_TURN,
    DRAW_FIELDS,
    draw_problems,
)
from replayhub.testgate.paths import DEFAULT_TEST_PATHS

# The files that decide what a project's setup phase installs: the common
# lockfiles and dependency lists, at the repository root.
DEFAULT_SETUP_INPUTS = (
    "requirements*.txt",
    "constraints*.txt",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "poetry.lock",
    "Pipfile.lock",
    "uv.lock",
    "package.json",
    "package-lock.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "go.mod",
    "go.sum",
    "Cargo.lock",
    "Gemfile.lock",
    "composer.lock",
)


def choices_check(
    field: str,
    choices: type[models.TextChoices] | list[tuple[str, str]],
    name: str,
    blank=False,
):
    """A constraint that ``field`` holds one of ``choices`` (or "" if ``blank``)."""
    values = choices.values if isinstance(choices, type) else [v for v, _ in choices]
    allowed = Q(**{f"{field}__in": values})
    if blank:
        allowed |= Q(**{field: ""})
    return models.CheckConstraint(condition=allowed, name=name)


def egress_list_problem(value: object) -> str:
    """Why ``value`` is not a list of ``host:port`` patterns ("" when it is)."""
    if not isinstance(value, list) or not all(isinstance(e, str) for e in value):
        return 'Give a list of host:port patterns, such as ["pypi.org:443"].'
    for entry in value:
        try:
            parse_allow_entry(entry)
        except ValueError as error:
            return str(error)
    return ""


_PINNED_IMAGE = re.compile(r"@sha256:[0-9a-f]{64}\Z")


def default_test_paths() -> list[str]:
    return list(DEFAULT_TEST_PATHS)


def default_setup_inputs() -> list[str]:
    return list(DEFAULT_SETUP_INPUTS)


# The scratch files the common coding agents leave in a checkout: chat logs,
# session state, caches of their own. Not the change an agent made, so left out
# of what a replay captures and compares, on both trees.
DEFAULT_IGNORED_PATHS = (
    ".aider*",
    ".aider*/**",
    ".claude/**",
    ".codex/**",
    ".openhands*/**",
    ".cursor/**",
    ".continue/**",
    ".swe-agent/**",
    "trajectories/**",
)


def default_ignored_paths() -> list[str]:
    return list(DEFAULT_IGNORED_PATHS)


def argv_problem(value: object) -> str:
    """Why ``value`` is not an argument list ("" when it is)."""
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        return 'Give a list of arguments, such as ["pip", "install", "-r", "req.txt"].'
    if any("\0" in a for a in value):
        return "An argument may not contain a NUL character."
    return ""


class RunnerKind(models.TextChoices):
    BWRAP = "bwrap", "bubblewrap"
    DOCKER = "docker", "Docker"
    GVISOR = "gvisor", "gVisor"


class MinIsolation(models.TextChoices):
    """What a project's replays must be isolated by at least.

    bubblewrap and a container both put namespaces and a seccomp filter
    between the agent and the host kernel; gVisor puts a kernel of its own.
    """

    ANY = "", "Any isolating runner"
    GVISOR = "gvisor", "A user-space kernel (gVisor)"


class RolloutMode(models.TextChoices):
    # Resume a rollout at an anchor and let the model finish the job.
    CONTINUE = "continue", "Continue"
    # Hand the model its finished attempt with a request to verify and fix it.
    RECHECK = "recheck", "Recheck"


class RolloutAnchor(models.TextChoices):
    """Where a ``continue`` seed re-enters a rollout."""

    COMPACTION = "compaction", "At a context restart"
    TOOL_CALL = "tool-call", "After a complete tool-result run"


class Project(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200, blank=True)
    repo_path = models.CharField(
        max_length=1024,
        help_text="The git repository: a path on this host, or an https://, "
        "ssh://, git@host: or file:// URL that each host mirrors.",
    )
    repo_credential_env = models.CharField(
        max_length=128,
        blank=True,
        help_text="Name of the environment variable that holds the credential "
        "(token or password) for the repository's URL on each host; the "
        "credential itself is never stored. Empty: none.",
    )
    default_branch = models.CharField(
        max_length=255, blank=True, help_text="Empty: the repository's HEAD branch."
    )
    # argv lists, never shell strings: they are executed without a shell.
    test_command = models.JSONField(default=list, blank=True)
    agent_command = models.JSONField(default=list, blank=True)
    agent = models.CharField(
        max_length=32,
        choices=[(name, name) for name in agents.NAMES],
        default=agents.CUSTOM,
        help_text="An agent profile (installed by the setup phase and run "
        "headless against the gateway), or custom: the agent command.",
    )
    agent_version = models.CharField(
        max_length=64,
        blank=True,
        help_text="The profile's CLI release to install. Empty: its pinned one.",
    )
    allowed_paths = models.JSONField(
        default=list, blank=True, help_text="Globs relative to the repository root."
    )
    ignored_paths = models.JSONField(
        default=default_ignored_paths,
        blank=True,
        help_text="Globs of the agents' own scratch files (chat logs, session "
        "state), left out of capture and comparison on both trees and listed "
        "as evidence.",
    )
    runner = models.CharField(
        max_length=16, choices=RunnerKind, default=RunnerKind.BWRAP
    )
    min_isolation = models.CharField(
        max_length=16,
        choices=MinIsolation,
        default=MinIsolation.ANY,
        blank=True,
        help_text="The least isolation the project's replays may run under; "
        "its runner must give it.",
    )
    sandbox_image = models.CharField(max_length=512, blank=True)
    sandbox_config_sha256 = models.CharField(max_length=64, blank=True)
    # Per-replay caps.
    time_limit_seconds = models.PositiveIntegerField(default=600)
    test_time_limit_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Per test-gate run. Empty: the time limit."
    )
    memory_limit_mb = models.PositiveIntegerField(default=2048)
    max_processes = models.PositiveIntegerField(default=256)
    max_output_bytes = models.PositiveIntegerField(default=1024 * 1024)
    max_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    max_turns = models.PositiveIntegerField(null=True, blank=True)
    max_files = models.PositiveIntegerField(
        default=200_000,
        help_text="Files the agent may leave in its checkout. Checked on the "
        "captured tree, before it is compared or checked out for the tests.",
    )
    max_disk_mb = models.PositiveIntegerField(
        default=2048,
        help_text="Disk the agent may fill (its checkout and its other writable "
        "directories), measured while it runs and before each copy; the "
        "files it may leave count against the file cap.",
    )
    # The test gate and the verdict.
    flake_reruns = models.PositiveSmallIntegerField(default=2)
    evidence_floor = models.PositiveIntegerField(default=1)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    test_paths = models.JSONField(
        default=default_test_paths,
        blank=True,
        help_text="Globs of the test files and the test runner's configuration. "
        "When the replay's differ from the original's, the original's are run "
        "on the replay's code, and that run decides.",
    )
    # The way out of the sandbox.
    providers: models.ManyToManyField[Any, Any] = models.ManyToManyField(
        "Provider",
        blank=True,
        related_name="projects",
        help_text="Model providers the agent may call through the gateway.",
    )
    egress_agent = models.JSONField(
        default=list,
        blank=True,
        help_text="host:port patterns the agent may reach through the egress "
        "proxy, e.g. pypi.org:443 or *.pythonhosted.org:443. Empty: none.",
    )
    egress_tests = models.JSONField(
        default=list,
        blank=True,
        help_text="host:port patterns the test runs may reach. Empty: none.",
    )
    egress_setup = models.JSONField(
        default=list,
        blank=True,
        help_text="host:port patterns the setup phase may reach (a package index). "
        "Empty: none.",
    )
    # The environment: what the setup phase leaves in $REPLAYHUB_ENV_DIR,
    # mounted read-only into the agent and test phases.
    setup_command = models.JSONField(
        default=list,
        blank=True,
        help_text="Run once per environment key, on a clean checkout of the base, "
        "with $REPLAYHUB_ENV_DIR writable. Empty: no environment.",
    )
    setup_inputs = models.JSONField(
        default=default_setup_inputs,
        blank=True,
        help_text="Globs of the files whose contents at the base decide the "
        "environment (lockfiles); a change builds a new one. The files a setup "
        "commonly reads and those its command names count too.",
    )
    env_share_group = models.CharField(
        max_length=64,
        blank=True,
        help_text="Projects naming the same group may share one environment when "
        "everything else that built it is the same. Empty: this project's own.",
    )
    # The setup phase's own limits, sized for a dependency install.
    setup_time_limit_seconds = models.PositiveIntegerField(default=1800)
    setup_memory_mb = models.PositiveIntegerField(default=4096)
    setup_max_disk_mb = models.PositiveIntegerField(
        default=4096, help_text="What the setup may write (its checkout and the env)."
    )
    setup_max_files = models.PositiveIntegerField(default=200_000)
    root_image = models.CharField(
        max_length=512,
        blank=True,
        help_text="Image (name@sha256:digest) whose unpacked root filesystem the "
        "sandbox runs on instead of the host's /usr. Empty: the host's.",
    )
    require_image_match = models.BooleanField(
        default=False,
        help_text="A record whose image digest differs from the root image is "
        "inconclusive rather than only warned about.",
    )
    require_recorded_model = models.BooleanField(
        default=False,
        help_text="A replay whose agent called another model than the record "
        "names is inconclusive rather than only flagged.",
    )
    tape_then_live = models.BooleanField(
        default=False,
        help_text="A tape replay whose agent leaves the tape goes on asking the "
        "model live from there, rather than ending inconclusive (tape_diverged).",
    )
    max_requests = models.PositiveIntegerField(
        null=True, blank=True, help_text="Model calls per replay. Empty: no cap."
    )
    max_cost_usd = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        help_text="Model spend per replay, as the gateway measures it. Empty: no cap.",
    )
    cap_grace_seconds = models.PositiveIntegerField(
        default=10,
        help_text="Once a cap has refused a model call, the agent is ended this "
        "many seconds later (it would only retry).",
    )
    allow_test_interference = models.BooleanField(
        default=False,
        help_text="Let a replay whose change could report a test run's success "
        "itself (an exit at import, a runner's summary text) still be equivalent.",
    )
    agentic_enabled = models.BooleanField(
        default=False,
        help_text="Let the nightly scheduler spend budget on agentic replays.",
    )
    # Rollouts (verifiers records): how seeds are derived and how a replay of
    # one is judged. Unused by code runs.
    harness_command = models.JSONField(
        default=list,
        blank=True,
        help_text="Runs a rollout seed in the sandbox (an argument list): reads "
        "the messages in REPLAYHUB_SEED_FILE, writes {completion, reward} to "
        "REPLAYHUB_RESULT_FILE.",
    )
    verifier_command = models.JSONField(
        default=list,
        blank=True,
        help_text="Scores a replay's completion in a second, fresh sandbox with "
        "no network (an argument list): reads REPLAYHUB_SEED_FILE and "
        "REPLAYHUB_COMPLETION_FILE, writes {reward} to REPLAYHUB_RESULT_FILE. "
        "Empty: the harness's own reward is used, and it can never make a "
        "replay equivalent.",
    )
    rollout_mode = models.CharField(
        max_length=16, choices=RolloutMode, default=RolloutMode.CONTINUE
    )
    rollout_anchor = models.CharField(
        max_length=16,
        choices=RolloutAnchor,
        default=RolloutAnchor.COMPACTION,
        help_text="Where a continue seed re-enters the rollout.",
    )
    max_anchors = models.PositiveIntegerField(
        null=True,
        blank=True,
        default=1,
        help_text="Tool-call anchors drawn per rollout (deterministically, kept "
        "in trajectory order). Empty: every complete tool-result run.",
    )
    min_source_reward = models.FloatField(
        null=True, blank=True, help_text="Seed only rollouts rewarded at least this."
    )
    max_source_reward = models.FloatField(
        null=True, blank=True, help_text="Seed only rollouts rewarded at most this."
    )
    pass_threshold = models.FloatField(
        default=1.0,
        help_text="A rollout passes when its reward is at or above this.",
    )
    verification_turn = models.TextField(
        default=DEFAULT_VERIFICATION_TURN,
        help_text="The user turn a recheck seed ends with.",
    )
    rollout_seed = models.IntegerField(
        default=0,
        help_text="Salt of the per-rollout draw of tool-call anchors.",
    )
    max_seed_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Drop seeds longer than this (recorded token counts, else "
        "characters / 4). Empty: no limit.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Not a field: set on a project being deleted, between pre_delete and
    # post_delete, to the nights its rollups spanned (reviews.trends.rollups).
    _rollup_span: dict[str, Any]

    class Meta:
        ordering = ["slug"]
        constraints = [
            choices_check("runner", RunnerKind, "project_runner_valid"),
            choices_check(
                "agent", [(name, name) for name in agents.NAMES], "project_agent_valid"
            ),
            choices_check(
                "min_isolation", MinIsolation, "project_min_isolation_valid", blank=True
            ),
            # A project that requires gVisor cannot be switched to a runner
            # that does not give it.
            models.CheckConstraint(
                condition=Q(min_isolation="") | Q(runner=RunnerKind.GVISOR),
                name="project_runner_meets_min_isolation",
                violation_error_message="A project that requires gVisor "
                "isolation must use the gVisor runner.",
            ),
            models.CheckConstraint(
                condition=Q(time_limit_seconds__gt=0),
                name="project_time_limit_positive",
            ),
            models.CheckConstraint(
                condition=Q(max_attempts__gt=0), name="project_max_attempts_positive"
            ),
            choices_check("rollout_mode", RolloutMode, "project_rollout_mode_valid"),
            choices_check(
                "rollout_anchor", RolloutAnchor, "project_rollout_anchor_valid"
            ),
            models.CheckConstraint(
                condition=Q(max_anchors__isnull=True) | Q(max_anchors__gt=0),
                name="project_max_anchors_positive",
            ),
            models.CheckConstraint(
                condition=Q(min_source_reward__isnull=True)
                | Q(max_source_reward__isnull=True)
                | Q(min_source_reward__lte=models.F("max_source_reward")),
                name="project_source_reward_window",
            ),
        ]

    def __str__(self) -> str:
        return self.slug

    def clean(self) -> None:
        errors = {}
        for name in ("allowed_paths", "test_paths", "ignored_paths"):
            if problem := glob_list_problem(getattr(self, name)):
                errors[name] = problem
        for name in ("egress_agent", "egress_tests", "egress_setup"):
            if problem := egress_list_problem(getattr(self, name)):
                errors[name] = problem
        command = self.harness_command
        if not isinstance(command, list) or not all(
            isinstance(arg, str) for arg in command
        ):
            errors["harness_command"] = (
                'Give an argument list, such as ["python", "harness.py"].'
            )
        if problem := argv_problem(self.verifier_command):
            errors["verifier_command"] = problem
        errors.update(
            draw_problems(
                **{name: getattr(self, name) for name in DRAW_FIELDS},
            )
        )
        if problem := glob_list_problem(self.setup_inputs):
            errors["setup_inputs"] = problem
        if problem := argv_problem(self.setup_command):
            errors["setup_command"] = problem
        errors.update(self.agent_problems())
        if self.root_image and not _PINNED_IMAGE.search(self.root_image):
            errors["root_image"] = (
                "Give an image pinned by digest: name@sha256:<64 hex digits>."
            )
        if mirrors.is_remote(self.repo_path) and (
            problem := mirrors.url_problem(self.repo_path)
        ):
            errors["repo_path"] = problem
        if self.repo_credential_env and (
            problem := mirrors.credential_env_problem(
                self.repo_credential_env, self.repo_path
            )
            or credential_policy().problem(self.repo_credential_env)
        ):
            errors["repo_credential_env"] = problem
        if errors:
            raise ValidationError(errors)

    def agent_problems(self) -> dict[str, str]:
        """What is wrong with the project's agent settings, by field."""
        errors = {}
        if self.agent not in agents.NAMES:
            errors["agent"] = f"Choose one of {', '.join(agents.NAMES)}."
        elif self.agent == agents.CUSTOM and self.agent_version:
            errors["agent_version"] = "Only an agent profile has a version."
        elif self.agent != agents.CUSTOM and self.agent_command:
            errors["agent_command"] = (
                f"The {self.agent} profile runs the agent: give no agent command."
            )
        if self.agent_version and (problem := version_problem(self.agent_version)):
            errors["agent_version"] = capfirst(problem)
        return errors

    @property
    def agent_profile(self) -> Profile | None:
        """The agent profile the project names (None: its agent command)."""
        return agents.PROFILES.get(self.agent)

    @property
    def ignored_in_force(self) -> list[str]:
        """The globs left out of both trees: the project's ignored paths and
        the state paths of its agent profile."""
        profile = self.agent_profile
        state = profile.state_paths if profile is not None else ()
        return [*self.ignored_paths, *(g for g in state if g not in self.ignored_paths)]

    @property
    def test_time_limit(self) -> int:
        return self.test_time_limit_seconds or self.time_limit_seconds

    def repository(self, *, refresh: bool = False, commits: Iterable[str] = ()) -> Path:
        """Where this host reads the project's history.

        A path is returned as given. For a URL, the project's mirror on this
        host: cloned when missing, fetched whole when ``refresh``, and fetched
        when it lacks one of ``commits`` (hex names). Raises
        ``mirrors.RepoUnreachable`` when the remote cannot be read.
        """
        if not mirrors.is_remote(self.repo_path):
            return Path(self.repo_path)
        mirror = self.mirror()
        existed = mirror.exists()
        git_dir = mirror.ready(refresh=refresh, commits=commits)
        if not existed:
            # A host's first mirror of this project: those of projects deleted
            # since, whose deletion another host saw, go now.
            live = {str(pk) for pk in Project.objects.values_list("pk", flat=True)}
            for key in mirrors.mirror_keys(mirror.root) - live:
                mirrors.remove_mirrors(mirror.root, key)
        return git_dir

    def mirror(self) -> mirrors.Mirror:
        """This project's mirror on this host (nothing is read or made)."""
        return mirrors.Mirror(
            root=Path(settings.REPLAYHUB_MIRROR_DIR),
            key=str(self.pk),
            remote=mirrors.Remote(
                self.repo_path,
                self.repo_credential_env,
                credential_policy() if self.repo_credential_env else NO_CREDENTIAL,
            ),
            timeout=settings.REPLAYHUB_MIRROR_FETCH_SECONDS,
            max_fetch_bytes=settings.REPLAYHUB_MIRROR_FETCH_MAX_BYTES,
        )


NO_CREDENTIAL = mirrors.CredentialPolicy()


def credential_policy() -> mirrors.CredentialPolicy:
    """The variables a repository credential may be read from here: those the
    operator allows (``REPLAYHUB_REPO_CREDENTIAL_ENVS``), never the
    deployment's own secrets nor a provider's key variable."""
    # Reached by name: the providers' module imports this one.
    providers = apps.get_model("replayhub", "Provider")._default_manager
    denied = [
        (name, "one of this deployment's own secrets")
        for name in settings.REPLAYHUB_SECRET_ENVS
    ]
    denied += [
        (key_env, f"provider {name}'s key")
        for name, key_env in providers.values_list("name", "key_env")
    ]
    return mirrors.CredentialPolicy(
        allowed=tuple(settings.REPLAYHUB_REPO_CREDENTIAL_ENVS), denied=tuple(denied)
    )


def project_deleted(sender: Any, *, instance: Project, **kwargs: Any) -> None:
    """Receiver of ``post_delete`` for Project: its mirrors on this host go
    once the deletion is committed."""
    root, key = Path(settings.REPLAYHUB_MIRROR_DIR), str(instance.pk)
    transaction.on_commit(lambda: mirrors.remove_mirrors(root, key))


class RunSource(models.TextChoices):
    # A recorded agent change to a repository, replayed and compared by its diff.
    CODE = "code", "Code run"
    # A verifiers rollout, replayed from its seeds and judged by its reward.
    ROLLOUT = "rollout", "Rollout"


class Preflight(models.TextChoices):
    PENDING = "pending", "Pending"
    READY = "ready", "Can reach a verdict"
    UNREPRODUCIBLE = "unreproducible", "Can never reach a verdict"


class Run(models.Model):
    """One recorded original agent execution; :attr:`record` is the record whole."""

    # No index of its own: the unique (project, external_id) index leads with it,
    # and every index costs the bulk import time per row.
    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="runs", db_index=False
    )
    external_id = models.CharField(max_length=255)
    source = models.CharField(max_length=16, choices=RunSource, default=RunSource.CODE)
    # A rollout's reward as recorded: the sum of its reward functions.
    reward = models.FloatField(null=True, blank=True)
    title = models.CharField(max_length=500, blank=True)
    prompt = models.TextField(blank=True)
    provider = models.CharField(max_length=100, blank=True)
    model = models.CharField(max_length=200, blank=True)
    effort = models.CharField(max_length=50, blank=True)
    base_sha = models.CharField(max_length=64, blank=True)
    original_commit = models.CharField(max_length=64, blank=True)
    original_branch = models.CharField(max_length=255, blank=True)
    original_tests_passed = models.BooleanField(null=True, blank=True)
    sandbox_image = models.CharField(max_length=512, blank=True)
    sandbox_config_sha256 = models.CharField(max_length=64, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    output = models.TextField(blank=True)
    # Both as a record sent them: one stored before imports were bounded may
    # nest too deep to read, and reads as refused (``StoredDecoder``).
    usage = models.JSONField(default=dict, blank=True, decoder=StoredDecoder)
    raw = models.JSONField(
        default=dict,
        decoder=StoredDecoder,
        help_text="The record as received, less the prompt and output kept verbatim "
        "in their own columns.",
    )
    record_sha256 = models.CharField(max_length=64, blank=True)
    preflight = models.CharField(
        max_length=16, choices=Preflight, default=Preflight.PENDING
    )
    preflight_reason = models.TextField(blank=True)
    provenance = models.JSONField(default=dict, blank=True)
    imported_at = models.DateTimeField(default=timezone.now)
    # Set when a night's budget ran out before this run; first in line next night.
    deferred_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-imported_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "external_id"], name="run_unique_external_id"
            ),
            choices_check("preflight", Preflight, "run_preflight_valid"),
            choices_check("source", RunSource, "run_source_valid"),
        ]
        indexes = [
            # Runs of a project, newest first (project pages, the scheduler).
            models.Index(fields=["project", "-imported_at"], name="run_project_recent"),
            # The nightly scheduler's candidates: a project's runs that can reach
            # a verdict. Partial, so imports (runs arrive pending) skip it.
            models.Index(
                fields=["project", "imported_at"],
                name="run_project_ready",
                condition=Q(preflight="ready"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project.slug}/{self.external_id}"

    @property
    def record(self) -> dict:
        """The record exactly as received, unknown keys included."""
        if self.source == RunSource.ROLLOUT:
            return self.raw
        return whole_record(self.raw, {"prompt": self.prompt, "output": self.output})
