"""The user's checkout, through the git CLI: the base the agent starts from,
a commit of the work tree it leaves (through a private copy of the index, so
the user's index, branch and files are never touched), and the push of the
run's refs."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from replayhub.recorder.exits import PROG, Refusal

GIT_TIMEOUT = 120.0
ADD_TIMEOUT = 900.0  # hashing every file of a large work tree
PUSH_TIMEOUT = 600.0
FALLBACK_IDENTITY = {
    f"GIT_{who}_{what}": value
    for who in ("AUTHOR", "COMMITTER")
    for what, value in (("NAME", PROG), ("EMAIL", f"{PROG}@localhost"))
}


class GitFailed(Exception):
    """A git command failed; the message is its last line of error output."""


def git(
    args: list[str],
    *,
    cwd: Path,
    timeout: float = GIT_TIMEOUT,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run ``git args`` in ``cwd`` (``env`` added to ours); its output, stripped."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise GitFailed(f"git {args[0]}: {error}") from None
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitFailed(f"git {args[0]}: {lines[-1] if lines else 'failed'}")
    return done.stdout.decode("utf-8", "replace").strip()


class Checkout:
    """The work tree the agent runs in, as it was before the agent ran."""

    def __init__(self, cwd: Path) -> None:
        try:
            self.top = Path(git(["rev-parse", "--show-toplevel"], cwd=cwd))
            self.head = self.git("rev-parse", "--verify", "HEAD^{commit}")
        except GitFailed as error:
            raise Refusal(f"not in a git work tree with a commit ({error})") from None
        try:
            self.branch: str | None = self.git("symbolic-ref", "-q", "--short", "HEAD")
        except GitFailed:
            self.branch = None  # detached, as CI checkouts often are
        # The common directory, so that every worktree of a clone shares a spool.
        self.git_dir = (self.top / self.git("rev-parse", "--git-common-dir")).resolve()
        self.index = self.top / self.git("rev-parse", "--git-path", "index")

    def git(self, *args: str, **kwargs: Any) -> str:
        return git(list(args), cwd=self.top, **kwargs)

    def dirty_paths(self) -> list[str]:
        """Changed, staged and untracked paths (ignored ones aside)."""
        out = self.git("status", "--porcelain", "-z", "--no-renames", "-uall")
        return [entry[3:] for entry in out.split("\0") if entry]

    def commit_work_tree(self, *, parents: list[str], message: str) -> str | None:
        """Commit the work tree on ``parents``; None when it has the tree of its
        only parent. ``git add -A`` goes into a copy of the index (with its stat
        cache), so the user's index, branch and files are never touched."""
        with tempfile.TemporaryDirectory(prefix="replayhub-record-") as scratch:
            index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            if self.index.is_file():
                shutil.copyfile(self.index, index["GIT_INDEX_FILE"])
            else:
                self.git("read-tree", parents[0], env=index)
            self.git("add", "--all", timeout=ADD_TIMEOUT, env=index)
            tree = self.git("write-tree", env=index)
        same = tree == self.git("rev-parse", f"{parents[0]}^{{tree}}")
        if same and len(parents) == 1:
            return None
        argv = ["commit-tree", tree, "-m", message]
        for parent in parents:
            argv += ["-p", parent]
        try:
            return self.git(*argv)
        except GitFailed:
            # No identity configured (a fresh CI runner): commit under ours.
            return self.git(*argv, env=FALLBACK_IDENTITY)


def push(repository: Path, remote: str, refs: dict[str, str]) -> str | None:
    """Push each ``sha`` to its ``ref`` on ``remote``; None, or why it failed."""
    specs = [f"{sha}:{ref}" for ref, sha in sorted(refs.items())]
    try:
        # No prompt for credentials: a CI job would hang on it.
        args = ["push", "--quiet", remote, *specs]
        prompt = {"GIT_TERMINAL_PROMPT": "0"}
        git(args, cwd=repository, timeout=PUSH_TIMEOUT, env=prompt)
    except GitFailed as error:
        return f"the push to {remote!r} failed ({error})"
    return None
