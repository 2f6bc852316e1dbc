"""A patch applied at a base, in a git dir of ReplayHub's own.

The project's repository is only read: the blobs and the tree a patch makes
are written to a scratch git dir that borrows the project's objects through
alternates (a replay's, or a temporary one at import), with a private index
in a directory of ReplayHub's own and no work tree, so nothing an agent
writes is read. The tree of a patch applied at a base is the same on every
host, so each replay makes it again where it runs; and so is the commit
:func:`patched_commit` makes of it (fixed author, committer and dates, the
base's), which is the run's ``original_commit``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from replayhub.git.scratch import Scratch, git, require_sha

TIMEOUT = 60.0
_IMPORTER = {
    "GIT_AUTHOR_NAME": "ReplayHub import",
    "GIT_AUTHOR_EMAIL": "import@replayhub.invalid",
    "GIT_COMMITTER_NAME": "ReplayHub import",
    "GIT_COMMITTER_EMAIL": "import@replayhub.invalid",
}
# Who the commits of patches were made by, before and after the patch moved
# out of the project's repository.
IMPORTER_EMAIL = _IMPORTER["GIT_COMMITTER_EMAIL"]


class PatchRefused(Exception):
    """git would not apply the patch at the base; the message says why."""


@contextmanager
def borrowing(project_git_dir: Path) -> Iterator[Path]:
    """A temporary bare git dir that reads ``project_git_dir``'s objects and
    writes its own, removed on the way out."""
    with tempfile.TemporaryDirectory(prefix="replayhub-patch-") as root:
        scratch = Scratch(Path(root), project_git_dir, timeout=TIMEOUT)
        yield scratch.create()


def patched_tree(git_dir: Path, base: str, patch: str) -> str:
    """The tree of ``patch`` applied at ``base`` (a full commit sha), written to
    ``git_dir`` (a git dir of ReplayHub's own); PatchRefused when git will not
    apply it."""
    require_sha(base)
    with tempfile.TemporaryDirectory(prefix="replayhub-index-") as scratch:
        index = Path(scratch) / "index"
        git("read-tree", base, git_dir=git_dir, index_file=index, timeout=TIMEOUT)
        applied = git(
            "apply",
            "--cached",
            "--whitespace=nowarn",
            "-",
            git_dir=git_dir,
            index_file=index,
            input=patch.encode("utf-8", "surrogateescape"),
            timeout=TIMEOUT,
            check=False,
        )
        if applied.returncode != 0:
            reason = applied.stderr.decode("utf-8", "replace").strip().splitlines()
            raise PatchRefused(
                "git apply refused the patch at "
                f"{base[:12]}: {reason[0] if reason else 'no reason given'}"
            )
        written = git("write-tree", git_dir=git_dir, index_file=index, timeout=TIMEOUT)
    return require_sha(written.stdout.decode().strip())


def patched_commit(git_dir: Path, base: str, tree: str, *, label: str) -> str:
    """The commit of ``tree`` on ``base``, written to ``git_dir``: the same
    commit wherever it is made, for the same tree, base and label."""
    date = git(
        "log", "-1", "--format=%cI", require_sha(base), git_dir=git_dir, timeout=TIMEOUT
    )
    when = date.stdout.decode().strip()
    env = {**_IMPORTER, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    message = f"{label}\n\nThe submitted patch applied at {base} by ReplayHub.\n"
    made = git(
        "commit-tree",
        require_sha(tree),
        "-p",
        base,
        git_dir=git_dir,
        input=message.encode("utf-8", "replace"),
        env=env,
        timeout=TIMEOUT,
    )
    return require_sha(made.stdout.decode().strip())


def commit_patch(project_git_dir: Path, base: str, commit: str) -> str | None:
    """The patch an imported commit of ``project_git_dir`` made at ``base``
    (its parent, and made by the import), read as a binary diff; None when
    the commit is not there, is not such a commit, or its diff is not UTF-8."""
    require_sha(base)
    require_sha(commit)
    shown = git(
        "log",
        "-1",
        "--format=%P%n%ce",
        f"{commit}^{{commit}}",
        git_dir=project_git_dir,
        timeout=TIMEOUT,
        check=False,
    )
    if shown.returncode != 0:
        return None
    parents, _, email = shown.stdout.decode("utf-8", "replace").strip().partition("\n")
    parent = parents.split()
    if len(parent) != 1 or not parent[0].startswith(base):
        return None
    if email.strip() != IMPORTER_EMAIL:
        return None
    diff = git(
        "diff",
        "--no-ext-diff",
        "--no-textconv",
        "--binary",
        "--full-index",
        "--no-renames",
        base,
        commit,
        git_dir=project_git_dir,
        timeout=TIMEOUT,
    )
    try:
        return diff.stdout.decode("utf-8")
    except UnicodeDecodeError:
        return None  # not text a database column keeps
