"""Provenance for many runs of one project with a handful of git processes.

:func:`replayhub.replay.provenance.resolve_provenance` asks git a few questions per
run (resolve the original and the recorded base, the merge base with the
default branch, an ancestry check), each answered by git on its own. For a
batch of runs of one repository, :class:`BatchHistory` answers the same
questions from two passes over the whole batch:

* every name the batch mentions is resolved by one long-lived ``git cat-file
  --batch-check`` per repository (all names of a batch written at once);
* one ``git rev-list --parents --boundary`` from every original commit, stopped
  at the default branch's tip, gives each original's own line of work and the
  commits where it leaves the default branch's history.

An original whose line of work meets the default branch's history in exactly
one commit has that commit as its merge base, its first parent is on its line,
and its ancestry is read off the walk. Anything the passes do not decide (an
original already merged into the default branch, a line of work that meets the
default branch twice, a recorded base elsewhere in history) is asked of the
wrapped :class:`~replayhub.git.history.History`, exactly as per run. The rules in
:mod:`replayhub.replay.provenance` run unchanged on top, so a batch gives the same
provenance as resolving its runs one by one.

The repository is the project's own (admin-owned), never a replay's workspace;
git runs with the pinned environment and configuration of
:mod:`replayhub.git.scratch`.
"""

from __future__ import annotations

import io
import os
import subprocess
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import NamedTuple, cast

from replayhub.git.history import History
from replayhub.git.scratch import (
    DEFAULT_TIMEOUT,
    SAFE_CONFIG,
    GitError,
    git,
    git_environment,
    repository_git_dir,
)
from replayhub.replay.provenance import Provenance, resolve_provenance, valid_record_sha

# Beyond this much rev-list output (a batch whose originals sit on long lines of
# work away from the default branch), the batch is answered per run instead.
GRAPH_OUTPUT_CAP = 32 * 1024 * 1024
# Commits walked for one original before its questions go to git instead.
WALK_LIMIT = 5_000


class Passes(NamedTuple):
    """What one batch's passes found (see :meth:`BatchHistory.passes`)."""

    default_branch: str | None
    # The default branch's tip, None when it names no commit.
    tip: str | None
    # Each name asked (record values) -> the full sha of its commit, or None.
    names: dict[str, str | None]
    # Each commit walked from the originals -> its parents.
    parents: dict[str, list[str]]


class CatFile:
    """One long-lived ``git cat-file --batch-check`` on a repository.

    :meth:`commits` resolves many names with one round trip. Not thread-safe.
    """

    def __init__(self, git_dir: Path, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.git_dir = git_dir
        self.timeout = timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._hex: int | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            argv = ["git"]
            for setting in SAFE_CONFIG:
                argv += ["-c", setting]
            argv += [
                f"--git-dir={os.fspath(self.git_dir)}",
                "cat-file",
                "--batch-check",
            ]
            try:
                self._proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    # Warnings about ambiguous names are of no use here, and an
                    # unread pipe would fill.
                    stderr=subprocess.DEVNULL,
                    cwd=self.git_dir,
                    env=git_environment(),
                    start_new_session=True,
                )
            except OSError as error:
                raise GitError(f"cannot start git: {error}") from error
        return self._proc

    def commits(self, names: Iterable[str]) -> dict[str, str | None]:
        """Full sha of the commit each hex name names, or None (History.commit's rule).

        Only names that :func:`valid_record_sha` accepts are asked; a short name
        that git resolves to something not starting with it (a ref named like
        a sha) names nothing.

        A full sha is asked as it is: git then reads the object's type from
        the pack, where ``<sha>^{commit}`` would read and parse the object
        (four times the git time on a batch of commits); either way only a
        commit's own sha names it. A short name is asked with ``^{commit}``,
        which settles which object it abbreviates.
        """
        asked = sorted({name for name in names if valid_record_sha(name)})
        if not asked:
            return {}
        full = self._hex_length()
        lines = self._ask(
            [name if len(name) == full else f"{name}^{{commit}}" for name in asked]
        )
        answers: dict[str, str | None] = {}
        for name, line in zip(asked, lines, strict=True):
            fields = line.split()
            kind = fields[1] if len(fields) == 3 else b""
            # Peeled or not, a name that is not the commit's own sha (a tag's)
            # names nothing.
            if kind == b"commit" and (sha := fields[0].decode()).startswith(name):
                answers[name] = sha
            else:
                answers[name] = None
        return answers

    def _hex_length(self) -> int | None:
        """The length of the repository's full object names (40, or 64 for
        SHA-256); None when git cannot say, and every name is peeled."""
        if self._hex is None:
            result = git(
                "rev-parse",
                "--show-object-format",
                git_dir=self.git_dir,
                timeout=self.timeout,
                check=False,
            )
            form = result.stdout.strip()
            self._hex = (
                {b"sha1": 40, b"sha256": 64}.get(form, 0)
                if result.returncode == 0
                else 0
            )
        return self._hex or None

    def _ask(self, requests: list[str]) -> list[bytes]:
        """cat-file's answer line to each request, in order."""
        proc = self._start()
        assert proc.stdin is not None and proc.stdout is not None
        request = "".join(f"{line}\n" for line in requests).encode()
        failure: list[BaseException] = []

        def feed() -> None:
            try:
                proc.stdin.write(request)  # type: ignore[union-attr]
                proc.stdin.flush()  # type: ignore[union-attr]
            except OSError as error:
                failure.append(error)

        timed_out = threading.Event()

        def stop() -> None:
            timed_out.set()
            proc.kill()

        writer = threading.Thread(target=feed, daemon=True)
        watchdog = threading.Timer(self.timeout, stop)
        writer.start()
        watchdog.start()
        # One answer line per request: read blocks until all have come.
        wanted, lines, chunks = len(requests), 0, []
        # The pipe is buffered (bufsize -1), so stdout is a BufferedReader: typeshed
        # says only IO[bytes], which has no read1.
        stdout = cast(io.BufferedReader, proc.stdout)
        try:
            while lines < wanted:
                chunk = stdout.read1(1 << 16)
                if not chunk:
                    raise GitError(
                        f"git cat-file timed out after {self.timeout:g}s"
                        if timed_out.is_set()
                        else "git cat-file stopped answering"
                    )
                chunks.append(chunk)
                lines += chunk.count(b"\n")
        finally:
            watchdog.cancel()
            writer.join(timeout=5)
        if failure:
            raise GitError(f"git cat-file: {failure[0]}")
        return b"".join(chunks).split(b"\n")[:wanted]

    def close(self) -> None:
        if self._proc is not None:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._proc = None


class BatchHistory:
    """A :class:`History` that answers from one batch's precomputed passes first.

    Use :meth:`prepare` with the batch's original commits and recorded bases,
    then hand it to :func:`resolve_provenance` for each run of the batch (on
    the thread that owns it). Questions the passes do not decide go to the
    wrapped History, one git process each, as they would per run.
    """

    def __init__(self, repo: Path | str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.history = History(repo, timeout=timeout)
        self.git_dir = repository_git_dir(repo)
        self.timeout = timeout
        self._cat = CatFile(self.git_dir, timeout=timeout)
        # The wrapped History is asked from the thread resolving a batch and
        # from the one preparing the next (branch tips).
        self._lock = threading.Lock()
        self._head: tuple[str | None] | None = None
        self._tips: dict[str, str | None] = {}
        self._names: dict[str, str | None] = {}
        self._tip: str | None = None
        self._parents: dict[str, list[str]] = {}
        self._walks: dict[str, tuple[set[str], set[str]] | None] = {}

    def close(self) -> None:
        self._cat.close()
        self.history.close()

    def __enter__(self) -> BatchHistory:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # --- the passes -----------------------------------------------------------

    def prepare(
        self,
        *,
        default_branch: str | None,
        names: Iterable[str],
        originals: Iterable[str],
    ) -> None:
        """Resolve ``names`` and walk from ``originals`` (record values, unchecked)."""
        self.use(
            self.passes(default_branch=default_branch, names=names, originals=originals)
        )

    def passes(
        self,
        *,
        default_branch: str | None,
        names: Iterable[str],
        originals: Iterable[str],
    ) -> Passes:
        """What :meth:`prepare` finds, without installing it.

        Safe to call on one other thread while the batch before is resolved
        (one preparing thread at a time): it uses the cat-file and git
        commands of its own, and the wrapped History under a lock.
        """
        originals = list(originals)
        # Names that are no hex sha are not asked, and found in no pass.
        found_names = self._cat.commits([*names, *originals])
        tip = self._branch_tip(default_branch) if default_branch else None
        passes = Passes(default_branch, tip, found_names, {})
        if tip is None:
            return passes
        found = {sha for o in originals if (sha := found_names.get(o))}
        if not found:
            return passes
        request = "".join(f"{sha}\n" for sha in sorted(found)) + f"^{tip}\n"
        result = git(
            "rev-list",
            "--parents",
            "--boundary",
            "--stdin",
            git_dir=self.git_dir,
            input=request.encode(),
            timeout=self.timeout,
            output_cap=GRAPH_OUTPUT_CAP,
            truncate=True,
            check=False,
        )
        if result.returncode != 0 or result.truncated:
            return passes  # every question goes to git, as per run
        parents = passes.parents
        for line in result.stdout.decode().splitlines():
            commit, *rest = line.split()
            if commit[0] != "-":
                parents[commit] = rest
        return passes

    def use(self, passes: Passes) -> None:
        """Answer from ``passes`` (of this repository) until the next batch."""
        self._names, self._parents, self._walks = passes.names, passes.parents, {}
        self._tip = passes.tip
        self._tips = (
            {passes.default_branch: passes.tip} if passes.default_branch else {}
        )

    def _branch_tip(self, name: str) -> str | None:
        with self._lock:
            return self.history.branch_tip(name)

    def _walk(self, original: str) -> tuple[set[str], set[str]] | None:
        """(commits of the original's own line, where it meets the tip's history).

        None when the passes know nothing of the original (it is reachable
        from the tip, or the graph was not built) or the line is too long.
        """
        if original in self._walks:
            return self._walks[original]
        walk: tuple[set[str], set[str]] | None = None
        if original in self._parents:
            seen, meets, todo = {original}, set(), [original]
            while todo and len(seen) <= WALK_LIMIT:
                for parent in self._parents[todo.pop()]:
                    if parent in self._parents:
                        if parent not in seen:
                            seen.add(parent)
                            todo.append(parent)
                    else:
                        meets.add(parent)
            if not todo:
                walk = (seen, meets)
        self._walks[original] = walk
        return walk

    # --- History's questions ---------------------------------------------------

    def head_branch(self) -> str | None:
        if self._head is None:
            with self._lock:
                self._head = (self.history.head_branch(),)
        return self._head[0]

    def branch_tip(self, name: str) -> str | None:
        if name not in self._tips:
            self._tips[name] = self._branch_tip(name)
        return self._tips[name]

    def commit(self, rev: str) -> str | None:
        if rev in self._names:
            return self._names[rev]
        sha, _, suffix = rev.partition("^")
        if suffix == "1" and sha in self._parents:
            first = self._parents[sha][:1]
            return first[0] if first else None
        with self._lock:
            return self.history.commit(rev)

    def merge_base(self, one: str, other: str) -> str | None:
        if one == self._tip and other in self._parents:
            walk = self._walk(other)
            if walk is not None and len(walk[1]) <= 1:
                return next(iter(walk[1]), None)
        with self._lock:
            return self.history.merge_base(one, other)

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        walk = self._walk(descendant) if descendant in self._parents else None
        if walk is not None:
            line, meets = walk
            if ancestor in line:
                return True
            if ancestor in self._parents or not meets:
                # Elsewhere in the batch's lines, or the line meets nothing.
                return False
            if len(meets) == 1:
                (meet,) = meets
                if ancestor == meet:
                    return True
                with self._lock:
                    return self.history.is_ancestor(ancestor, meet)
        with self._lock:
            return self.history.is_ancestor(ancestor, descendant)

    def ancestry_path(self, ancestor: str, descendant: str) -> dict[str, list[str]]:
        with self._lock:
            return self.history.ancestry_path(ancestor, descendant)


def resolve_batch(
    history: BatchHistory,
    requests: list[dict],
    *,
    default_branch: str | None,
    passes: Callable[[], Passes] | None = None,
) -> list[Provenance | GitError]:
    """:func:`resolve_provenance` for each of ``requests`` (its keyword arguments
    without the repository), answered from one pass over the batch.

    ``passes`` hands over the batch's passes when they were made ahead (by
    :func:`batch_passes` on another thread: ``Future.result``); without it
    they are made here. A GitError of one request's own questions is its
    answer; one of the passes is every request's.
    """
    try:
        history.use(
            passes()
            if passes is not None
            else batch_passes(history, requests, default_branch=default_branch)
        )
    except GitError as error:
        return [error] * len(requests)
    answers: list[Provenance | GitError] = []
    for request in requests:
        try:
            answers.append(
                resolve_provenance(
                    repo_path=history.git_dir,
                    history=history,  # type: ignore[arg-type]
                    **request,
                )
            )
        except GitError as error:
            answers.append(error)
    return answers


def batch_passes(
    history: BatchHistory, requests: list[dict], *, default_branch: str | None
) -> Passes:
    """The passes :func:`resolve_batch` answers ``requests`` from."""
    return history.passes(
        default_branch=default_branch,
        names=[r["recorded_base"] for r in requests if r.get("recorded_base")],
        # A patched original is in no repository: nothing to walk from.
        originals=[
            r["original_commit"]
            for r in requests
            if r.get("original_commit") and not r.get("patched")
        ],
    )
