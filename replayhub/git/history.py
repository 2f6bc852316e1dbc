"""Read-only queries on a project's own history, through GitPython.

The project repository is admin-owned and only read here: resolve a rev, find a
merge base, test ancestry, list an ancestry path, name the HEAD branch. A
replay's workspace is agent-writable, so everything that touches it goes through
the git CLI wrapper in :mod:`replayhub.git.scratch` instead (private index, pinned
environment, no config read from the workspace).

A :class:`History` holds one ``git.Repo`` whose git processes get the same pinned
environment and command-line configuration as :func:`replayhub.git.scratch.git`. Revs
resolve through GitPython's persistent ``git cat-file --batch-check`` (git's own
name lookup, one process for all queries); merge-base and rev-list are one git
command each.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from pathlib import Path
from types import TracebackType

import git

from replayhub.git.scratch import (
    DEFAULT_OUTPUT_CAP,
    DEFAULT_TIMEOUT,
    SAFE_CONFIG,
    GitError,
    git_environment,
    objects_dir,
    repository_git_dir,
)

_HEX_NAME = re.compile(r"[0-9a-f]{7,64}")
_FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
# No ref name holds one of these, and cat-file reads one name per line.
_UNNAMEABLE = re.compile(r"[\x00-\x20\x7f]")


class History:
    """Read-only history queries on one repository (a work tree or a bare one).

    Close it when done (or use it as a context manager): GitPython keeps a
    ``git cat-file`` process running for it. Not thread-safe, like the
    ``git.Repo`` under it, whose persistent process answers one request at a
    time: a History belongs to one thread. Raises GitError when ``repo`` is not
    a git repository.
    """

    def __init__(self, repo: Path | str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.git_dir = repository_git_dir(repo)
        self.timeout = timeout
        try:
            # expand_vars=False: a ``$NAME`` in the path is a path, not a variable.
            self._repo = git.Repo(self.git_dir, expand_vars=False)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError) as error:
            raise GitError(f"{repo} is not a git repository") from error
        self._git = self._repo.git
        self._git.update_environment(**_environment(self.git_dir))
        self._git.set_persistent_git_options(c=list(SAFE_CONFIG))
        # Answers already known: (ancestor, descendant) -> is it one.
        self._ancestry: dict[tuple[str, str], bool] = {}

    def close(self) -> None:
        """Stop GitPython's persistent git processes. Safe to call twice."""
        self._repo.close()

    def __enter__(self) -> History:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def head_branch(self) -> str | None:
        """The branch HEAD is on (``main``), or None when HEAD is detached."""
        try:
            return self._repo.active_branch.name
        except (TypeError, ValueError, OSError):
            # TypeError: HEAD is detached; the others: HEAD cannot be read.
            return None

    def branches(self, most: int = 10) -> list[str]:
        """The repository's branch names, sorted, at most ``most``."""
        return sorted(head.name for head in self._repo.heads)[:most]

    def branch_tip(self, name: str) -> str | None:
        """The commit a branch (``main``) or other ref (``origin/main``) points at."""
        return self.resolve(f"refs/heads/{name}") or self.resolve(name)

    def commit(self, rev: str) -> str | None:
        """Full sha of the commit ``rev`` names, or None.

        A short hex name is first looked up as a ref by git; requiring the answer
        to start with the name keeps a branch called ``abc1234`` from standing in
        for the commit ``abc1234...``.
        """
        sha = self.resolve(rev)
        if sha is not None and _HEX_NAME.fullmatch(rev) and not sha.startswith(rev):
            return None
        return sha

    def resolve(self, rev: str) -> str | None:
        """Full sha of the commit ``rev`` names by git's rules, or None.

        A rev starting with ``-`` names nothing and reaches no git process: on a
        command line it would be an option (``--output=<file>``). One holding
        whitespace or a control character is refused too: a line feed would end
        the request on cat-file's standard input early and queue a second one.
        """
        if not rev or rev.startswith("-") or _UNNAMEABLE.search(rev):
            return None
        header = self._object_header(f"{rev}^{{commit}}")
        if header is None or header[1] != "commit":
            return None
        return header[0]

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """Whether ``ancestor`` is ``descendant`` or one of its ancestors."""
        key = (_full_sha(ancestor), _full_sha(descendant))
        if key not in self._ancestry:
            code, _ = self._run("merge-base", "--is-ancestor", *key)
            if code not in (0, 1):
                raise GitError(f"git merge-base --is-ancestor failed with {code}")
            self._ancestry[key] = code == 0
        return self._ancestry[key]

    def merge_base(self, one: str, other: str) -> str | None:
        """The best common ancestor of two commits, or None when there is none."""
        code, out = self._run("merge-base", _full_sha(one), _full_sha(other))
        base = out.strip() if code == 0 else ""
        if not base:
            return None
        # A merge base is an ancestor of both sides; the ancestry checks that
        # usually follow need no process of their own.
        self._ancestry[(base, one)] = self._ancestry[(base, other)] = True
        return base

    def ancestry_path(self, ancestor: str, descendant: str) -> dict[str, list[str]]:
        """The parents of each commit on the ancestry path from one commit to another.

        The commits are those that descend from ``ancestor`` (not ``ancestor``
        itself) and are reachable from ``descendant``: ``git rev-list
        --ancestry-path --parents ancestor..descendant``.
        """
        code, out = self._run(
            "rev-list",
            "--ancestry-path",
            "--parents",
            f"{_full_sha(ancestor)}..{_full_sha(descendant)}",
        )
        if code != 0:
            raise GitError(f"git rev-list failed with exit code {code}")
        if len(out) > DEFAULT_OUTPUT_CAP:
            raise GitError(f"git rev-list printed more than {DEFAULT_OUTPUT_CAP} bytes")
        parents: dict[str, list[str]] = {}
        for line in out.splitlines():
            commit, *rest = line.split()
            parents[commit] = rest
        return parents

    def _run(self, command: str, *args: str) -> tuple[int, str]:
        """Run ``git <command> <args>`` through GitPython: exit code and stdout.

        A non-zero exit is the caller's to judge; a command stopped by a signal
        (the timeout kills it) raises GitError, as :func:`replayhub.git.scratch.git`
        does.
        """
        try:
            code, out, err = getattr(self._git, command.replace("-", "_"))(
                *args,
                with_extended_output=True,
                with_exceptions=False,
                kill_after_timeout=self.timeout,
            )
        except git.GitCommandNotFound as error:
            raise GitError(f"cannot start git: {error}") from error
        if code < 0:
            raise GitError(
                f"git {command} timed out after {self.timeout:g}s or was killed: "
                f"{str(err).strip()[-1000:]}",
                returncode=code,
            )
        return code, out

    def _object_header(self, name: str) -> tuple[str, str] | None:
        """``(sha, type)`` of the object ``name`` names, or None when there is none.

        Asked of GitPython's persistent ``git cat-file --batch-check``, under the
        same timeout as a git command: a lookup that takes longer kills the
        process and raises GitError.
        """
        batch = self._git.cat_file_header
        if batch is not None and (batch.proc is None or batch.proc.poll() is not None):
            # Gone since the last lookup (on a repository it cannot read it exits
            # at once): GitPython starts a fresh one for this lookup.
            self._git.clear_cache()
        timed_out = threading.Event()
        watchdog = threading.Timer(self.timeout, self._stop_batch, (timed_out,))
        watchdog.start()
        try:
            sha, kind, _ = self._git.get_object_header(name)
        except git.GitCommandNotFound as error:
            raise GitError(f"cannot start git: {error}") from error
        except (ValueError, OSError):
            if timed_out.is_set():
                raise GitError(
                    f"git cat-file timed out after {self.timeout:g}s"
                ) from None
            # git answered "missing" or "ambiguous", or cat-file died: like a
            # failed rev-parse, that names nothing.
            return None
        finally:
            watchdog.cancel()
            self._discard_batch_stderr()
        # GitPython hands the header's fields back as bytes, whatever its hints say.
        return os.fsdecode(sha), os.fsdecode(kind)

    def _stop_batch(self, timed_out: threading.Event) -> None:
        batch = self._git.cat_file_header
        if batch is not None and batch.proc is not None:
            timed_out.set()
            batch.proc.kill()

    def _discard_batch_stderr(self) -> None:
        """Empty the stderr pipe of the persistent cat-file; GitPython never reads it.

        git writes there for every ambiguous short name or broken ref it meets;
        left alone, the pipe fills after some thousand such queries and cat-file
        blocks for good on its next write, with this thread waiting for its
        answer.
        """
        batch = self._git.cat_file_header
        stream = batch.proc.stderr if batch is not None and batch.proc else None
        if stream is None or stream.closed:
            return
        fd = stream.fileno()
        os.set_blocking(fd, False)
        with contextlib.suppress(BlockingIOError):
            while os.read(fd, 65536):
                pass


def _environment(git_dir: Path) -> dict[str, str]:
    """What GitPython adds to the environment of every git process it starts.

    GitPython starts from the worker's own environment and adds these, where
    :func:`replayhub.git.scratch.git` replaces it whole; so besides the pinned values,
    the variables through which the worker's environment could hand git more
    configuration or another repository are set to say "none" or "this one".
    """
    return {
        **git_environment(),
        "GIT_DIR": os.fspath(git_dir),
        "GIT_COMMON_DIR": os.fspath(objects_dir(git_dir).parent),
        "GIT_OBJECT_DIRECTORY": os.fspath(objects_dir(git_dir)),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": "",
        "GIT_CONFIG_PARAMETERS": "",
        "GIT_CONFIG_COUNT": "0",
    }


def _full_sha(value: str) -> str:
    """``value`` if it is a full hex sha; anything else is a ValueError.

    Only shas this module resolved itself reach a git command line, so an
    option-shaped string (``--output=/tmp/x``) never can.
    """
    if not isinstance(value, str) or not _FULL_SHA.fullmatch(value):
        raise ValueError(f"not a full hex commit sha: {value!r}")
    return value
