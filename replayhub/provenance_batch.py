"""Provenance for many runs of one project with a handful of git processes.

:func:`replayhub.provenance.resolve_provenance` asks git a few questions per
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
wrapped :class:`~replayhub.history.History`, exactly as per run. The rules in
:mod:`replayhub.provenance` run unchanged on top, so a batch gives the same
provenance as resolving its runs one by one.

The repository is the project's own (admin-owned), never a replay's workspace;
git runs with the pinned environment and configuration of
:mod:`replayhub.gitops`.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from replayhub.gitops import (
    DEFAULT_TIMEOUT,
    SAFE_CONFIG,
    GitError,
    git,
    git_environment,
    repository_git_dir,
)
from replayhub.history import _HEX_NAME, History
from replayhub.provenance import Provenance, resolve_provenance, valid_record_sha

# Beyond this much rev-list output (a batch whose originals sit on long lines of
# work away from the default branch), the batch is answered per run instead.
GRAPH_OUTPUT_CAP = 32 * 1024 * 1024
# Commits walked for one original before its questions go to git instead.
WALK_LIMIT = 5_000


class CatFile:
    """One long-lived ``git cat-file --batch-check`` on a repository.

    :meth:`commits` resolves many names with one round trip. Not thread-safe.
    """

    def __init__(self, git_dir: Path, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.git_dir = git_dir
        self.timeout = timeout
        self._proc: subprocess.Popen[bytes] | None = None

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
        """
        asked = sorted({name for name in names if valid_record_sha(name)})
        if not asked:
            return {}
        proc = self._start()
        assert proc.stdin is not None and proc.stdout is not None
        request = b"".join(f"{name}^{{commit}}\n".encode() for name in asked)
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
        answers: dict[str, str | None] = {}
        try:
            for name in asked:
                line = proc.stdout.readline()
                if not line:
                    raise GitError(
                        f"git cat-file timed out after {self.timeout:g}s"
                        if timed_out.is_set()
                        else "git cat-file stopped answering"
                    )
                fields = line.split()
                sha = fields[0].decode() if len(fields) == 3 else ""
                if fields[1:2] != [b"commit"] or (
                    _HEX_NAME.fullmatch(name) and not sha.startswith(name)
                ):
                    answers[name] = None
                else:
                    answers[name] = sha
        finally:
            watchdog.cancel()
            writer.join(timeout=5)
        if failure:
            raise GitError(f"git cat-file: {failure[0]}")
        return answers

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
        originals = [o for o in originals if valid_record_sha(o)]
        self._tips = {}
        self._names = self._cat.commits([*names, *originals])
        self._parents, self._walks = {}, {}
        self._tip = self.branch_tip(default_branch) if default_branch else None
        if self._tip is None:
            return
        found = {sha for o in originals if (sha := self._names.get(o))}
        if not found:
            return
        request = "".join(f"{sha}\n" for sha in sorted(found)) + f"^{self._tip}\n"
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
            return  # every question goes to git, as per run
        parents: dict[str, list[str]] = {}
        for line in result.stdout.decode().splitlines():
            commit, *rest = line.split()
            if not commit.startswith("-"):
                parents[commit] = rest
        self._parents = parents

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
            self._head = (self.history.head_branch(),)
        return self._head[0]

    def branch_tip(self, name: str) -> str | None:
        if name not in self._tips:
            self._tips[name] = self.history.branch_tip(name)
        return self._tips[name]

    def commit(self, rev: str) -> str | None:
        if rev in self._names:
            return self._names[rev]
        sha, _, suffix = rev.partition("^")
        if suffix == "1" and sha in self._parents:
            first = self._parents[sha][:1]
            return first[0] if first else None
        return self.history.commit(rev)

    def merge_base(self, one: str, other: str) -> str | None:
        if one == self._tip and other in self._parents:
            walk = self._walk(other)
            if walk is not None and len(walk[1]) <= 1:
                return next(iter(walk[1]), None)
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
                return ancestor == meet or self.history.is_ancestor(ancestor, meet)
        return self.history.is_ancestor(ancestor, descendant)

    def ancestry_path(self, ancestor: str, descendant: str) -> dict[str, list[str]]:
        return self.history.ancestry_path(ancestor, descendant)


def resolve_batch(
    history: BatchHistory, requests: list[dict], *, default_branch: str | None
) -> list[Provenance | GitError]:
    """:func:`resolve_provenance` for each of ``requests`` (its keyword arguments
    without the repository), answered from one pass over the batch.

    A GitError of one request's own questions is its answer; one of the passes
    is every request's.
    """
    try:
        history.prepare(
            default_branch=default_branch,
            names=[r["recorded_base"] for r in requests if r.get("recorded_base")],
            originals=[
                r["original_commit"] for r in requests if r.get("original_commit")
            ],
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
