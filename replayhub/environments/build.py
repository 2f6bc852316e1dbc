"""A project's environment: what its setup phase leaves in ``$REPLAYHUB_ENV_DIR``.

The setup command runs once per *environment key* on a worker host, in the
sandbox, on a clean checkout of the base, with ``$REPLAYHUB_ENV_DIR`` writable
and egress only to the project's setup hosts (every attempt recorded). The
key is the digest of what determines the result: the setup command, the
contents of the setup input files at the base (lockfiles), the sandbox root
and the setup settings. Later phases (the agent, the test runs on every tree)
get the environment read-only at the same path, with its ``bin`` first on
PATH: a virtualenv made at ``$REPLAYHUB_ENV_DIR`` works unchanged, since its
scripts name that path.

A setup that fails is remembered (with its output) for
``REPLAYHUB_ENV_FAILURE_SECONDS``, so a broken lockfile does not rerun setup
for every replay of the night. Concurrent replays with one key build once: the
first takes the key's lock, the others wait for it and reuse the result. The
cache itself (layout, LRU, disk cap) is :mod:`replayhub.environments.cache`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shlex
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from django.conf import settings

from replayhub.environments import images
from replayhub.environments.agent_setup import agent_label, run_install
from replayhub.environments.cache import (
    FAILED,
    READY,
    CacheEntry,
    EnvCache,
    LockTimeout,
)
from replayhub.environments.locations import configured
from replayhub.environments.store import fetch_into_cache, share_from_cache
from replayhub.gateway import access
from replayhub.gateway.egress import ConnectAttempt
from replayhub.git.history import History
from replayhub.git.scratch import GitError, Scratch, remove_tree, require_sha
from replayhub.lib.globs import glob_match
from replayhub.models import Project
from replayhub.models.projects import DEFAULT_SETUP_INPUTS
from replayhub.sandbox import (
    Bind,
    Limits,
    Runner,
    SandboxOutcome,
    SandboxSpec,
    SandboxUnavailable,
)
from replayhub.sandbox.base import BASE_ENV
from replayhub.verdicts import Reason

log = logging.getLogger(__name__)

# Where the environment is, inside every sandbox of the project's replays.
ENV_PATH = "/replayhub-env"
# Bumped when what a key stands for changes (the layout, the mount).
KEY_FORMAT = 2
# Files a setup commonly reads, counted in every key whatever the project's
# setup_inputs say (the lockfiles are among its defaults).
COMMONLY_READ = (
    *DEFAULT_SETUP_INPUTS,
    "setup.sh",
    "*.sh",
    "Makefile",
    "GNUmakefile",
    "makefile",
    "*.mk",
    "tox.ini",
    "noxfile.py",
    "justfile",
    "Justfile",
    ".python-version",
    ".nvmrc",
    ".tool-versions",
)
# How many of a key's input files its summary names.
SUMMARY_INPUTS = 200
OUTPUT_TAIL_CHARS = 4000
_MAX_INPUT_FILES = 10_000


class SetupFailed(Exception):
    """The setup phase failed, now or (``cached``) within the failure time."""

    def __init__(
        self,
        summary: dict,
        *,
        detail: str,
        attempts: Sequence[ConnectAttempt] = (),
        seconds: float = 0.0,
    ) -> None:
        super().__init__(detail)
        self.summary = summary
        self.detail = detail
        self.attempts = list(attempts)
        # Sandbox time spent on this replay's behalf (0 when cached).
        self.seconds = seconds


class Unprepared(Exception):
    """No environment for a replay: ``reason`` ends the replay inconclusive.

    ``summary``, ``attempts`` and ``seconds`` are what a failed setup phase
    leaves for the replay's evidence (empty when setup never ran).
    """

    def __init__(
        self,
        reason: Reason,
        detail: str,
        *,
        summary: dict | None = None,
        attempts: Sequence[ConnectAttempt] = (),
        seconds: float = 0.0,
    ) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.summary = summary or {}
        self.attempts = list(attempts)
        self.seconds = seconds

    def account(self, report: Any) -> None:
        """What the failed setup leaves in a replay's report."""
        _account(report, self.summary, self.attempts, self.seconds)


def _account(
    report: Any, summary: dict, attempts: list[ConnectAttempt], seconds: float
) -> None:
    if summary:
        report.environment = summary
    report.add_egress(list(attempts))
    report.sandbox_seconds += seconds


def environment_key(
    *,
    setup_command: Sequence[str],
    inputs: Mapping[str, str],
    root: str,
    setup_settings: Mapping[str, object],
    repository: Sequence[str] = (),
    scope: str = "",
) -> str:
    """The digest of everything an environment depends on (pure).

    ``inputs`` maps each input file's path to its git blob id at the base,
    which is the hash of its contents; ``root`` names the sandbox's root
    filesystem ("host" or an image digest); ``repository`` the repository's
    root commits (what it is, whatever its path); ``scope`` who may share the
    environment (one project, or an admin's named group).
    """
    document = {
        "format": KEY_FORMAT,
        "setup_command": list(setup_command),
        "inputs": dict(sorted(inputs.items())),
        "root": root,
        "settings": dict(sorted(setup_settings.items())),
        "repository": sorted(repository),
        "scope": scope,
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def input_blobs(scratch: Scratch, base: str, globs: Sequence[str]) -> dict[str, str]:
    """The files of ``base`` matching ``globs``: path -> blob id."""
    if not globs:
        return {}
    scratch.create()
    listing = scratch.git(
        "ls-tree", "-r", "-z", "--full-tree", require_sha(base)
    ).stdout
    found: dict[str, str] = {}
    for line in listing.split(b"\0"):
        if not line:
            continue
        meta, _, raw_path = line.partition(b"\t")
        mode, kind, oid = meta.decode().split()
        path = raw_path.decode("utf-8", "surrogateescape")
        if kind == "blob" and any(glob_match(path, g) for g in globs):
            found[path] = f"{mode}:{oid}"
            if len(found) >= _MAX_INPUT_FILES:
                break
    return found


def setup_settings(project: Project) -> dict[str, object]:
    """The project settings the setup's result depends on, for the key: the
    agent profile and version installed, when the project names one."""
    found: dict[str, object] = {
        "setup_inputs": list(project.setup_inputs),
        "egress_setup": sorted(project.egress_setup),
        "runner": project.runner,
    }
    if agent := agent_label(project):
        found["agent"] = agent
    return found


def named_files(command: Sequence[str]) -> list[str]:
    """The repository paths a setup command's words could name (pure): each
    word, the words of a ``-c`` script, and what follows ``=`` in an option;
    a word that could be no path of the tree is left out. Counted as they
    are: a name that matches no file costs nothing."""
    words: list[str] = []
    for arg in command:
        words.append(arg)
        if any(c.isspace() for c in arg):
            try:
                words += shlex.split(arg, comments=True)
            except ValueError:
                words += arg.split()
    names = []
    for word in words:
        word = word.partition("=")[2] if word.startswith("-") else word
        word = word.removeprefix("./").strip("'\"")
        if (
            word
            and not word.startswith(("/", "$", "-", "~"))
            and ".." not in word.split("/")
            and not any(c in word for c in "*?[]{}$`;|&<>\n")
        ):
            names.append(word)
    return sorted(set(names))


def key_inputs(project: Project) -> list[str]:
    """The globs of every file whose contents go into the project's key."""
    return sorted(
        {*project.setup_inputs, *COMMONLY_READ, *named_files(project.setup_command)}
    )


def repository_roots(scratch: Scratch, base: str) -> list[str]:
    """The root commits ``base`` descends from: which repository this is."""
    scratch.create()
    out = scratch.git("rev-list", "--max-parents=0", require_sha(base)).stdout
    return sorted(out.decode().split())


@dataclass(frozen=True)
class Key:
    """An environment's key and what it was made of, for the page."""

    digest: str
    inputs: dict[str, str]
    repository: list[str]
    scope: str
    agent: str = ""

    def describe(self) -> dict:
        paths = sorted(self.inputs)
        return {
            "inputs": paths[:SUMMARY_INPUTS],
            "inputs_count": len(paths),
            "repository": self.repository,
            "scope": self.scope,
            **({"agent": self.agent} if self.agent else {}),
        }


def project_key(project: Project, scratch: Scratch, base: str) -> Key:
    inputs = input_blobs(scratch, base, key_inputs(project))
    repository = repository_roots(scratch, base)
    scope = (
        f"group:{project.env_share_group}"
        if project.env_share_group
        else f"project:{project.pk}"
    )
    digest = environment_key(
        setup_command=project.setup_command,
        inputs=inputs,
        root=images.root_label(project),
        setup_settings=setup_settings(project),
        repository=repository,
        scope=scope,
    )
    return Key(digest, inputs, repository, scope, agent_label(project))


def cache() -> EnvCache:
    return EnvCache(
        Path(settings.REPLAYHUB_ENV_CACHE_DIR),
        max_bytes=settings.REPLAYHUB_ENV_CACHE_MAX_BYTES,
        failure_ttl=settings.REPLAYHUB_ENV_FAILURE_SECONDS,
    )


def setup_limits(project: Project) -> Limits:
    """The setup phase's caps: its own time, memory, disk and files (it writes
    a dependency install), the project's processes and output."""
    return Limits(
        wall_seconds=project.setup_time_limit_seconds,
        memory_bytes=project.setup_memory_mb * 1024 * 1024,
        max_processes=project.max_processes,
        output_bytes=project.max_output_bytes,
        disk_bytes=project.setup_max_disk_mb * 1024 * 1024,
        disk_files=project.setup_max_files,
    )


def phase_env() -> dict[str, str]:
    """What every sandboxed phase with an environment finds in its variables."""
    return {
        "REPLAYHUB_ENV_DIR": ENV_PATH,
        "PATH": f"{ENV_PATH}/bin:{BASE_ENV['PATH']}",
    }


@dataclass
class Environment:
    """An environment held for one replay (a shared lock on its entry)."""

    key: str
    path: Path
    cached: bool
    setup_seconds: float
    attempts: list[ConnectAttempt] = field(default_factory=list)
    # Sandbox time spent building it for this replay (0 when cached).
    seconds: float = 0.0
    # What the key was made of (``Key.describe``).
    made_of: dict = field(default_factory=dict)
    # Seconds taken to fetch it from the shared store; None when not fetched.
    fetch_seconds: float | None = None
    _fd: int | None = None

    def summary(self) -> dict:
        found = {
            "key": self.key,
            "cached": self.cached,
            "setup_seconds": round(self.setup_seconds, 3),
            **self.made_of,
        }
        if self.fetch_seconds is not None:
            found.update(source="store", fetch_seconds=round(self.fetch_seconds, 3))
        return found

    def account(self, report: Any) -> None:
        """The environment in a replay's report: evidence, egress, sandbox time."""
        _account(report, self.summary(), self.attempts, self.seconds)

    def wrap(self, runner: Runner) -> Runner:
        """``runner``, running every spec with this environment mounted."""
        return _WithEnvironment(runner, self)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Environment:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _WithEnvironment:
    """A runner that adds the environment's read-only mount and variables."""

    def __init__(self, inner: Runner, environment: Environment) -> None:
        self.inner = inner
        self.name = inner.name
        self.isolation = inner.isolation
        self.environment = environment

    def check(self) -> None:
        self.inner.check()

    def owner(self) -> tuple[int, int] | None:
        return self.inner.owner()

    def run(self, spec: SandboxSpec) -> SandboxOutcome:
        env_bind = Bind(self.environment.path, ENV_PATH)
        return self.inner.run(
            replace(
                spec,
                env={**phase_env(), **spec.env},
                binds=(*spec.binds, env_bind),
            )
        )


def prepare(
    project: Project,
    *,
    scratch: Scratch,
    base: str,
    runner: Runner,
    on_setup: Callable[[], object] = lambda: None,
    force: bool = False,
) -> Environment | None:
    """The project's environment for ``base``, built now unless cached.

    None when the project has no setup command and no agent profile. Raises
    :class:`SetupFailed` (a failure now or one remembered),
    ``SandboxUnavailable``, or ``LockTimeout`` when another worker's build of
    the key outlasts the setup time limit. ``force`` rebuilds even a
    remembered failure (``env_build``). The caller closes the returned
    environment when its sandboxes are done.
    """
    if not project.setup_command and project.agent_profile is None:
        return None
    made = project_key(project, scratch, base)
    key = made.digest
    store = cache()
    wait = project.setup_time_limit_seconds + 60.0
    deadline = time.monotonic() + wait
    built: Environment | None = None
    builds = 0
    while builds < 3:
        # A shared hold waits out a build in progress, then finds it ready.
        fd = store.hold(key, timeout=max(0.0, deadline - time.monotonic()))
        if fd is not None:
            entry = store.get(key)
            assert entry is not None
            if built is None:
                built = Environment(key, store.env_dir(key), True, 0.0)
            elif not built.cached and (root := configured()) is not None:
                share_from_cache(root, store, key)  # under the shared hold
            return replace(
                built,
                setup_seconds=entry.setup_seconds,
                made_of=made.describe(),
                _fd=fd,
            )
        stack = contextlib.ExitStack()
        try:
            # Never waited for: replays using the built entry hold it shared
            # for as long as they run.
            stack.enter_context(store.exclusive(key, timeout=0))
        except LockTimeout:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)
            continue
        with stack:
            entry = store.get(key)
            if entry is not None and entry.state == FAILED:
                if store.failure_fresh(entry) and not force:
                    raise SetupFailed(
                        {**_failure_summary(entry, cached=True), **made.describe()},
                        detail=_failure_detail(entry, cached=True),
                    )
                entry = None
            if entry is None:
                builds += 1
                built = _fetch(project, store, made, runner)
                if built is None:
                    on_setup()
                    built = _build(project, store, made, scratch, base, runner)
    raise LockTimeout(f"the environment {key[:12]} was evicted as soon as it was built")


def for_replay(
    project: Project, *, scratch: Scratch, base: str, runner: Runner
) -> Environment | None:
    """:func:`prepare` for a replay: whatever stops it is :class:`Unprepared`,
    with the reason that ends the replay inconclusive."""
    try:
        return prepare(project, scratch=scratch, base=base, runner=runner)
    except SetupFailed as exc:
        raise Unprepared(
            Reason.SETUP_FAILED,
            exc.detail,
            summary=exc.summary,
            attempts=exc.attempts,
            seconds=exc.seconds,
        ) from exc
    except SandboxUnavailable as exc:
        raise Unprepared(Reason.SANDBOX_UNAVAILABLE, str(exc)) from exc
    except (LockTimeout, GitError) as exc:
        raise Unprepared(
            Reason.HARNESS_ERROR, f"the environment could not be prepared: {exc}"
        ) from exc


def _build(
    project: Project,
    store: EnvCache,
    made: Key,
    scratch: Scratch,
    base: str,
    runner: Runner,
) -> Environment:
    """Run the setup command into a new build directory (lock held)."""
    key = made.digest
    build = store.new_build(key)
    work = scratch.root / f"setup-{uuid.uuid4().hex[:8]}"
    try:
        outcome, attempts = run_setup(
            project,
            scratch=scratch,
            base=base,
            runner=runner,
            env_dir=build / "env",
            work=work,
        )
    except BaseException:
        store.discard_build(build)
        raise
    finally:
        remove_tree(work)
    entry = CacheEntry(
        key=key,
        state=READY,
        built_at=time.time(),
        setup_seconds=outcome.duration_s,
        exit_code=outcome.exit_code,
        output_tail=outcome.output[-OUTPUT_TAIL_CHARS:],
        label=project.slug,
    )
    if _failed(outcome):
        store.discard_build(build)
        failed = store.record_failure(replace(entry, state=FAILED))
        raise SetupFailed(
            {**_failure_summary(failed, cached=False), **made.describe()},
            detail=_failure_detail(
                failed, cached=False, outcome=outcome, refused=_refused(attempts)
            ),
            attempts=attempts,
            seconds=outcome.duration_s,
        )
    store.commit(build, entry)
    log.info("environment %s built for %s", key[:12], project.slug)
    store.evict(keep=frozenset({key}))
    return Environment(
        key=key,
        path=store.env_dir(key),
        cached=False,
        setup_seconds=outcome.duration_s,
        attempts=attempts,
        seconds=outcome.duration_s,
        made_of=made.describe(),
    )


def _fetch(
    project: Project, store: EnvCache, made: Key, runner: Runner
) -> Environment | None:
    """The environment from the shared store, extracted into this host's cache
    without running setup (lock held); None when the store has none to give."""
    root, started = configured(), time.monotonic()
    if root is None or not fetch_into_cache(
        store, root, made.digest, project.slug, project.setup_max_files, runner.owner()
    ):
        return None
    seconds = time.monotonic() - started
    path = store.env_dir(made.digest)
    return Environment(made.digest, path, True, 0.0, fetch_seconds=seconds)


def run_setup(
    project: Project,
    *,
    scratch: Scratch,
    base: str,
    runner: Runner,
    env_dir: Path,
    work: Path,
) -> tuple[SandboxOutcome, list[ConnectAttempt]]:
    """The agent profile's install (:func:`run_install`), then the setup
    command on a clean checkout of ``base``, ``env_dir`` writable at
    :data:`ENV_PATH`, egress to the project's setup hosts only. The outcome
    of the step that failed, else of both together."""
    first: SandboxOutcome | None = None
    attempts: list[ConnectAttempt] = []
    if project.agent_profile is not None:
        first, attempts = run_install(
            project,
            runner,
            env_bind=Bind(env_dir, ENV_PATH, writable=True),
            work=work,
            env=phase_env(),
            limits=setup_limits(project),
        )
        if _failed(first) or not project.setup_command:
            return first, attempts
    checkout = scratch.checkout_tree(base, work / "checkout")
    # The setup phase calls no model gateway, so nothing on loopback is exempt
    # from the proxy: a package index on the worker's 127.0.0.1 is reached
    # through it, allowed or refused, and recorded either way.
    outcome, network = access.run_phase(
        runner,
        SandboxSpec(
            argv=tuple(project.setup_command),
            workspace=checkout,
            env=phase_env(),
            limits=setup_limits(project),
            binds=(Bind(env_dir, ENV_PATH, writable=True),),
        ),
        # Behind the proxy even with no host allowed: what the setup tried to
        # reach is listed, and its failure names the host it needed.
        needs=access.Needs(egress=tuple(project.egress_setup), proxy=True),
        directory=work / "net",
        phase="setup",
        loopback_direct=False,
    )
    attempts += network.attempts if network is not None else []
    if first is not None:
        outcome = replace(
            outcome,
            output=first.output + outcome.output,
            duration_s=first.duration_s + outcome.duration_s,
        )
    return outcome, attempts


def _failed(outcome: SandboxOutcome) -> bool:
    return bool(outcome.exit_code != 0 or outcome.timed_out or outcome.limit_fired)


def _failure_summary(entry: CacheEntry, *, cached: bool) -> dict:
    return {
        "key": entry.key,
        "cached": cached,
        "setup_seconds": round(entry.setup_seconds, 3),
        "failed": True,
        "exit_code": entry.exit_code,
        "output_tail": entry.output_tail,
    }


def _refused(attempts: Sequence[ConnectAttempt]) -> list[str]:
    return sorted({f"{a.host}:{a.port}" for a in attempts if not a.allowed})


def _failure_detail(
    entry: CacheEntry,
    *,
    cached: bool,
    outcome: SandboxOutcome | None = None,
    refused: Sequence[str] = (),
) -> str:
    if outcome is not None and (outcome.timed_out or outcome.limit_fired):
        how = f"hit its {(outcome.limit_fired or 'wall_time').replace('_', ' ')} cap"
        if outcome.limit_detail:
            how += f" ({outcome.limit_detail})"
    else:
        how = f"exited with status {entry.exit_code}"
    if refused:
        shown = ", ".join(refused[:5]) + (" and more" if len(refused) > 5 else "")
        how += f" after the proxy refused {shown} (the project's egress_setup)"
    when = (
        f" (remembered from {time.strftime('%H:%M UTC', time.gmtime(entry.built_at))};"
        " not run again until the failure expires)"
        if cached
        else ""
    )
    tail = entry.output_tail.strip().splitlines()[-1:] or ["no output"]
    return f"the setup command {how}{when}; its last line: {tail[0][:200]}"


def build_ahead(project: Project, base: str | None = None) -> Environment | None:
    """Build (or find cached) the project's environment at ``base`` (default:
    the tip of its default branch), as a replay would; a remembered failure is
    run again. The environment is released before returning. A mirrored
    repository is fetched first (``mirrors.RepoUnreachable`` when it cannot
    be)."""
    repo = project.repository(refresh=True)
    with History(repo) as history:
        branch = project.default_branch or history.head_branch() or "HEAD"
        sha = history.commit(base) if base else history.branch_tip(branch)
    if sha is None:
        raise ValueError(f"{base or branch!r} names no commit in {project.repo_path}")
    scratch = Scratch(
        Path(settings.REPLAYHUB_WORK_DIR) / f"env-build-{uuid.uuid4().hex[:12]}", repo
    )
    try:
        runner = images.runner_for(project)
        runner.check()
        environment = prepare(
            project, scratch=scratch, base=sha, runner=runner, force=True
        )
    finally:
        scratch.remove()
    if environment is not None:
        environment.close()
    return environment
