"""Bare mirrors of the projects whose repository lives on a git remote.

A project's repository is a path on the host, read where it is, or a URL
(``https://``, ``http://``, ``ssh://``, ``git://``, ``file://`` or the
scp-like ``git@host:path``). For a URL, each host that reads history keeps a
bare mirror of its own under one directory (``REPLAYHUB_MIRROR_DIR``), named
for the project and a digest of the URL (``<key>-<digest>.git``), so a changed
URL makes a new mirror rather than mixing two repositories' refs.

The rules kept here:

* git runs with the mirror as its git dir and working directory, under the
  pinned environment and configuration of :func:`replayhub.git.scratch.git`;
  nothing an agent can write is ever a mirror or inside one. Replays borrow a
  mirror's objects read-only, through alternates, as they borrow a local
  repository's.
* Writers (clone, fetch) hold the mirror's lock file, so two workers never
  fetch into one mirror at once; a clone is made beside the mirror and moved
  into place whole, so a reader never sees half a mirror.
* The credential is read from the named environment variable when git runs
  and reaches git through its environment only: a credential helper, scoped to
  the URL's origin and set through ``GIT_CONFIG_*`` variables, prints it from
  there. It is never written to disk, never in an argument list and never in
  a message. A URL carrying a password is refused. Whoever registers a
  project chooses the URL, so the variable must be one the operator set aside
  for repository tokens (:class:`CredentialPolicy`), checked again each time
  the secret is read: never the deployment's own secrets or a provider's key.
* Only these transports are allowed (``GIT_ALLOW_PROTOCOL``), every command has
  a timeout (below the web server's, should a request ever wait on one), and a
  stalled transfer ends at git's low-speed limit. Every command that talks to
  the remote is tethered to the process that started it (its helpers die with
  it, see :mod:`replayhub.git.process`), and a clone or fetch is stopped once
  it has grown the mirror past ``max_fetch_bytes``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from replayhub.git.scratch import GitError, GitStopped, git, require_sha
from replayhub.lib.fstree import remove_tree
from replayhub.lib.pasted import PASTED, looks_like_key

SCHEMES = ("https", "http", "ssh", "git", "file")
# user@host:path, git's scp-like syntax for ssh. The host must start with a
# letter or digit: one starting with "-" would reach ssh as an option.
_SCP = re.compile(r"[A-Za-z0-9._~-]+@[A-Za-z0-9][A-Za-z0-9.-]*:\S")
_UNPRINTABLE = re.compile(r"[\x00-\x20\x7f]")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_MIRROR_NAME = re.compile(r"(.+)-[0-9a-f]{16}\.git")

# Checking that a remote answers at registration.
LS_REMOTE_TIMEOUT = 30.0
# A clone or fetch of a large repository over a slow link, well below the
# web server's timeout (gunicorn --timeout 300), which would kill the caller.
FETCH_TIMEOUT = 180.0
# Bytes one clone or fetch may add to a mirror.
MAX_FETCH_BYTES = 4 * 1024**3
# Waiting for another process's clone or fetch of the same mirror, beyond
# that process's own fetch timeout.
LOCK_MARGIN = 60.0
# The user name sent with a credential when the URL names none; hosts that
# take a token as the password (GitHub, GitLab, Gitea) accept any name.
DEFAULT_USERNAME = "x-access-token"

# Prints the credential git asks for, from the helper's environment. A fixed
# string: the URL's origin scopes it and the secret reaches it only as an
# environment variable, so nothing from a project is ever part of a shell
# command.
_HELPER = (
    '!f() { test "$1" = get || exit 0; '
    'printf "username=%s\\npassword=%s\\n" '
    '"$REPLAYHUB_GIT_USERNAME" "$REPLAYHUB_GIT_PASSWORD"; }; f'
)
_SSH_COMMAND = "ssh -o BatchMode=yes -o ConnectTimeout=30"


class RepoUnreachable(GitError):
    """The remote could not be read: unreachable, refused, or not a repository.

    ``line`` is git's own reason (its first ``fatal:`` line, or its last; when
    git said nothing, what stopped it); it never holds a credential.
    """

    def __init__(self, line: str, *, url: str = "") -> None:
        super().__init__(f"{url}: {line}" if url else line)
        self.line = line
        self.url = url


class FetchTooLarge(RepoUnreachable):
    """A clone or fetch stopped for growing the mirror past its cap."""


def is_remote(location: str) -> bool:
    """Whether a project's repository is given as a URL rather than a path."""
    return "://" in location or bool(_SCP.match(location))


def url_problem(url: str) -> str:
    """Why ``url`` cannot be a project's remote ("" when it can).

    The message never repeats the URL: it may carry a password.
    """
    if _UNPRINTABLE.search(url):
        return "The URL may not hold spaces or control characters."
    if _SCP.match(url):
        return ""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        return (
            f"{scheme or 'That'}:// is not a transport ReplayHub reads "
            "(https, http, ssh, git, file, or git@host:path)."
        )
    try:
        password = parts.password
        parts.port  # noqa: B018 -- raises on a malformed port
    except ValueError:
        return "The URL's host or port cannot be read."
    if password is not None:
        return (
            "The URL carries a password: give the name of an environment "
            "variable holding it (--repo-credential-env) instead."
        )
    if scheme == "file":
        if not parts.path.startswith("/") or parts.netloc:
            return "A file:// URL takes an absolute path (file:///srv/repo.git)."
    elif not parts.hostname or parts.hostname.startswith("-"):
        return "The URL names no host."
    return ""


@dataclass(frozen=True)
class CredentialPolicy:
    """The environment variables a repository credential may be read from.

    ``allowed`` is the operator's list: names, or prefixes ending in ``*``.
    ``denied`` pairs each name that is never a credential, whatever the list
    says (the deployment's own secrets, the providers' keys), with what it
    holds. The default allows nothing.
    """

    allowed: tuple[str, ...] = ()
    denied: tuple[tuple[str, str], ...] = ()

    def problem(self, name: str) -> str:
        """Why ``name`` may not be read for a repository ("" when it may)."""
        for denied, holds in self.denied:
            if name == denied:
                return f"{name} holds {holds}: it is never sent to a repository."
        if any(
            name.startswith(entry[:-1]) if entry.endswith("*") else name == entry
            for entry in self.allowed
        ):
            return ""
        return (
            f"{name} is not a variable this deployment allows for repository "
            f"credentials (REPLAYHUB_REPO_CREDENTIAL_ENVS: "
            f"{', '.join(self.allowed) or 'none'})."
        )


def credential_env_problem(name: str, url: str) -> str:
    """Why ``name`` cannot name the credential's variable for ``url`` ("" when
    it can)."""
    if looks_like_key(name):
        return PASTED
    if not _ENV_NAME.match(name) or len(name) > 128:
        # Not repeated: what was typed may be a secret of a shape not known.
        return (
            "That is not an environment variable name (letters, digits and "
            "underscores, not starting with a digit)."
        )
    if name.startswith(("GIT_", "REPLAYHUB_GIT_")):
        return f"{name} is one of git's own variables; choose another name."
    if not is_remote(url) or urlsplit(url).scheme.lower() not in ("https", "http"):
        return (
            "A credential variable is for an https:// or http:// URL; ssh uses "
            "the host's own keys."
        )
    return ""


@dataclass(frozen=True)
class Remote:
    """A repository URL and the name of the variable holding its credential."""

    url: str
    credential_env: str = ""
    policy: CredentialPolicy = field(default_factory=CredentialPolicy)

    def environment(self) -> dict[str, str]:
        """What git needs besides the pinned environment to reach this remote.

        Raises RepoUnreachable when the credential's variable is not one the
        policy allows, or is not set here.
        """
        env = {
            "GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh",
            "GIT_SSH_COMMAND": _SSH_COMMAND,
            "GIT_HTTP_LOW_SPEED_LIMIT": "1000",
            "GIT_HTTP_LOW_SPEED_TIME": "60",
        }
        config = [
            # No credential helper from any config file; only the one below.
            ("credential.helper", ""),
            # Every object fetched lands in one pack file as it arrives, the
            # one place a fetch's growth is watched (never loose objects).
            ("fetch.unpackLimit", "1"),
        ]
        # ssh reads the host's keys, known hosts and agent.
        for name in ("HOME", "SSH_AUTH_SOCK"):
            if name in os.environ:
                env[name] = os.environ[name]
        if self.credential_env:
            config.append(self._credential(env))
        env["GIT_CONFIG_COUNT"] = str(len(config))
        for number, (key, value) in enumerate(config):
            env[f"GIT_CONFIG_KEY_{number}"] = key
            env[f"GIT_CONFIG_VALUE_{number}"] = value
        return env

    def _credential(self, env: dict[str, str]) -> tuple[str, str]:
        """Put the credential in ``env``; the helper's setting that prints it."""
        if problem := self.policy.problem(self.credential_env):
            raise RepoUnreachable(problem, url=self.url)
        secret = os.environ.get(self.credential_env, "")
        if not secret:
            raise RepoUnreachable(
                f"the credential variable {self.credential_env} is not set on "
                "this host",
                url=self.url,
            )
        if "\n" in secret or "\0" in secret:
            raise RepoUnreachable(
                f"the credential variable {self.credential_env} holds a line break",
                url=self.url,
            )
        parts = urlsplit(self.url)
        origin = f"{parts.scheme.lower()}://{parts.netloc.rpartition('@')[2]}"
        env["REPLAYHUB_GIT_USERNAME"] = parts.username or DEFAULT_USERNAME
        env["REPLAYHUB_GIT_PASSWORD"] = secret
        return f"credential.{origin}.helper", _HELPER

    def git(
        self,
        *args: str,
        cwd: Path,
        timeout: float,
        watch: Callable[[], str] | None = None,
        **kwargs,
    ) -> bytes:
        """Run a git command that talks to this remote, tethered to this
        process, for its output; RepoUnreachable if it fails, with git's
        reason, or FetchTooLarge with the answer of the ``watch`` that
        stopped it."""
        try:
            return git(
                *args,
                cwd=cwd,
                timeout=timeout,
                env=self.environment(),
                tethered=True,
                watch=watch,
                **kwargs,
            ).stdout
        except RepoUnreachable:
            raise
        except GitStopped as error:
            raise FetchTooLarge(str(error), url=self.url) from None
        except GitError as error:
            raise RepoUnreachable(reason_line(error), url=self.url) from None

    def check(
        self, *, cwd: Path, branch: str = "", timeout: float = LS_REMOTE_TIMEOUT
    ) -> list[str] | None:
        """Raise RepoUnreachable unless the remote answers as a git repository.
        With a ``branch``: None when the remote has it, else the branches it
        has (at most 20 named)."""
        if not branch:
            self.git(
                "ls-remote", "--quiet", "--", self.url, "HEAD", cwd=cwd, timeout=timeout
            )
            return None
        heads = self.git(
            "ls-remote", "--heads", "--quiet", "--", self.url, cwd=cwd, timeout=timeout
        )
        names = [
            line.split(b"\t", 1)[1]
            .decode("utf-8", "replace")
            .removeprefix("refs/heads/")
            for line in heads.splitlines()
            if b"\t" in line
        ]
        return None if branch in names else names[:20]


def reason_line(error: GitError) -> str:
    """git's own reason: its first ``fatal:`` line (what follows is advice,
    such as "Please make sure you have the correct access rights / and the
    repository exists."), else its last line, else the error itself."""
    lines = [line.strip() for line in error.stderr.splitlines() if line.strip()]
    fatal = [n for n, line in enumerate(lines) if line.startswith("fatal: ")]
    if not fatal:
        return lines[-1] if lines else str(error)
    first = fatal[0]
    # "fatal: unable to connect to host:" goes on with its reason below.
    if lines[first].endswith(":") and first + 1 < len(lines):
        return f"{lines[first]} {lines[first + 1]}"
    return lines[first]


@dataclass(frozen=True)
class Mirror:
    """One project's bare mirror of its remote, under ``root`` on this host."""

    root: Path
    key: str
    remote: Remote
    timeout: float = FETCH_TIMEOUT
    max_fetch_bytes: int = MAX_FETCH_BYTES

    @property
    def name(self) -> str:
        digest = hashlib.sha256(self.remote.url.encode()).hexdigest()[:16]
        return f"{self.key}-{digest}"

    @property
    def git_dir(self) -> Path:
        return self.root / f"{self.name}.git"

    def exists(self) -> bool:
        # The clone is moved into place whole, HEAD included.
        return (self.git_dir / "HEAD").is_file()

    def ready(self, *, refresh: bool = False, commits: Iterable[str] = ()) -> Path:
        """The mirror's git dir, cloned if missing, fetched when asked.

        ``refresh`` fetches every ref (branches, tags, ``refs/replayhub/*``);
        ``commits`` (hex names) are fetched when the mirror lacks them: each
        by name where the server allows it, else with every ref. A commit the
        remote does not have either is simply still missing. Raises
        RepoUnreachable when the remote cannot be read, or when a clone or
        fetch would grow the mirror past ``max_fetch_bytes`` (a clone stopped
        so leaves nothing; a fetch leaves the refs as they were).
        """
        wanted = [require_sha(commit) for commit in commits]
        if self.exists() and not refresh and not self.missing(wanted):
            return self.git_dir
        with self._locked():
            fetched_refs = refresh or not self.exists()
            if not self.exists():
                self._clone()
            elif refresh:
                self._fetch_refs()
            missing = self.missing(wanted)
            if missing and self._fetch_commits(missing):
                missing = self.missing(missing)
            if missing and not fetched_refs:
                self._fetch_refs()
        return self.git_dir

    def missing(self, commits: Iterable[str]) -> list[str]:
        """The commits of ``commits`` (hex names) the mirror does not hold."""
        wanted = [require_sha(commit) for commit in commits]
        if not wanted or not self.exists():
            return wanted
        result = git(
            "cat-file",
            "--batch-check",
            git_dir=self.git_dir,
            input="".join(f"{sha}^{{commit}}\n" for sha in wanted).encode(),
            timeout=60,
        )
        answers = result.stdout.decode(errors="replace").splitlines()
        return [
            sha
            for sha, answer in zip(wanted, answers, strict=True)
            if answer.split()[1:2] != ["commit"]
        ]

    def remove(self) -> None:
        remove_tree(self.git_dir)

    def _clone(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        # What a clone whose process was killed left behind: under the lock,
        # no other clone of this mirror is running.
        for stale in self.root.glob(f"{glob_escape(self.name)}.tmp-*"):
            remove_tree(stale)
        partial = self.root / f"{self.name}.tmp-{uuid.uuid4().hex[:8]}"
        grown_past = self._growth_watch(partial)
        try:
            # A full mirror, not a partial (--filter) clone: replays borrow its
            # objects through alternates, and a borrowed promisor object
            # cannot be fetched on demand from a replay's git dir.
            self.remote.git(
                "clone",
                "--mirror",
                "--quiet",
                "--template=",
                "--",
                self.remote.url,
                os.fspath(partial),
                cwd=self.root,
                timeout=self.timeout,
                watch=grown_past,
            )
            # What arrived between the last look and the end counts too.
            if problem := grown_past():
                raise FetchTooLarge(problem, url=self.remote.url)
            partial.rename(self.git_dir)
        finally:
            remove_tree(partial)
        # A changed URL: this project's mirrors of the URLs before it go.
        for other in mirrors_of(self.root, self.key):
            if other != self.git_dir:
                remove_tree(other)

    def _fetch_refs(self) -> None:
        self._fetch("--prune", "--", self.remote.url, "+refs/*:refs/*")

    def _fetch(self, *args: str) -> None:
        """``git fetch`` into the mirror, stopped past ``max_fetch_bytes``."""
        try:
            self.remote.git(
                "fetch",
                "--quiet",
                "--no-write-fetch-head",
                *args,
                cwd=self.git_dir,
                git_dir=self.git_dir,
                timeout=self.timeout,
                watch=self._growth_watch(self.git_dir),
            )
        finally:
            # A fetch stopped (or killed) mid-pack leaves its temporary pack;
            # the refs were not moved, so nothing needs it.
            for leftover in (self.git_dir / "objects" / "pack").glob("tmp_*"):
                leftover.unlink(missing_ok=True)

    def _growth_watch(self, git_dir: Path) -> Callable[[], str]:
        """A watch that answers once the packs under ``git_dir`` have grown
        past ``max_fetch_bytes`` since now."""
        packs = git_dir / "objects" / "pack"
        before = pack_bytes(packs)
        limit = self.max_fetch_bytes

        def grown_past() -> str:
            if pack_bytes(packs) - before <= limit:
                return ""
            return (
                f"the fetch was stopped: it would grow the mirror past "
                f"{limit:,} bytes (REPLAYHUB_MIRROR_FETCH_MAX_BYTES)"
            )

        return grown_past

    def _fetch_commits(self, commits: list[str]) -> bool:
        """Fetch the named commits alone; False when the server would not give
        them by name (or could not be asked)."""
        if not all(_FULL_SHA.fullmatch(sha) for sha in commits):
            return False
        try:
            self._fetch("--no-tags", "--", self.remote.url, *commits)
        except FetchTooLarge:
            raise
        except RepoUnreachable:
            return False
        return True

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / f"{self.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            wait = self.timeout + LOCK_MARGIN
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise RepoUnreachable(
                            f"another process held the mirror {self.git_dir} for "
                            f"more than {wait:g} s",
                            url=self.remote.url,
                        ) from None
                    time.sleep(0.2)
            yield
        finally:
            os.close(fd)


def mirrors_of(root: Path, key: str) -> list[Path]:
    """The mirrors of one project under ``root``, whatever their URL."""
    if not root.is_dir():
        return []
    return sorted(root.glob(f"{glob_escape(key)}-*.git"))


def mirror_keys(root: Path) -> set[str]:
    """The keys of the projects with a mirror under ``root``."""
    if not root.is_dir():
        return set()
    return {
        match.group(1)
        for path in root.iterdir()
        if (match := _MIRROR_NAME.fullmatch(path.name))
    }


def remove_mirrors(root: Path, key: str) -> list[Path]:
    """Remove one project's mirrors (every URL it had) and their lock files."""
    removed = mirrors_of(root, key)
    for path in removed:
        remove_tree(path)
        with contextlib.suppress(FileNotFoundError):
            path.with_suffix(".lock").unlink()
    # What a clone stopped halfway left behind.
    if root.is_dir():
        for partial in root.glob(f"{glob_escape(key)}-*.tmp-*"):
            remove_tree(partial)
    return removed


def pack_bytes(packs: Path) -> int:
    """The bytes of the files in a pack directory (0 when there is none)."""
    total = 0
    try:
        entries = list(os.scandir(packs))
    except OSError:
        return 0
    for entry in entries:
        with contextlib.suppress(OSError):
            total += entry.stat(follow_symlinks=False).st_size
    return total


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)
