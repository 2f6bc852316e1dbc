"""What a transcript leaves out, asked of the project repository.

Only the host's git CLI with ReplayHub's pinned environment
(:func:`replayhub.git.scratch.git`). A branch name from a transcript reaches
git only after ``git check-ref-format`` accepted it, and only as a full ref
name after ``--end-of-options``; everything else given to git is a hex sha or
a time.

A patch is checked to apply at its base in a temporary git dir of
ReplayHub's own that borrows the repository's objects
(:mod:`replayhub.git.patches`): nothing is written to the project's
repository, neither an object nor a ref. The patch is stored with the run
(``RunPatch``) and each replay applies it again where it runs. The commit it
makes has a fixed author, committer and dates (the base's), so the same patch
at the same base is always the same ``original_commit``: importing the same
file again finds the same original.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

from replayhub.git.patches import (
    PatchRefused,
    borrowing,
    patched_commit,
    patched_tree,
)
from replayhub.git.scratch import GitError, git, require_sha
from replayhub.ingest.transcripts.shapes import RecordDraft, iso, moment, shown

_SAFE_BRANCH = re.compile(r"[A-Za-z0-9._/+-]{1,200}")
TIMEOUT = 60.0
# A branch's first-parent history held for an import: some 300,000 commits.
HISTORY_CAP = 16 * 1024 * 1024


def _is_sha(value: object) -> bool:
    """Whether a transcript's commit is a hex name (``main`` or ``HEAD~1`` is
    not: only hex names reach git, and a record's base is checked as one)."""
    try:
        require_sha(value)  # type: ignore[arg-type]
    except ValueError:
        return False
    return True


def _text(git_dir: Path, *args: str, check: bool = True) -> str:
    result = git(*args, git_dir=git_dir, timeout=TIMEOUT, check=check)
    if result.returncode != 0:
        return ""
    return result.stdout.decode("utf-8", "replace").strip()


class Lookups:
    """What an import asks of the repository for session after session,
    asked once: its branches (one ``for-each-ref``) and each branch's
    first-parent history with commit times (one ``rev-list`` a branch).
    Lives as long as one import; a branch moved meanwhile is seen by the
    next import."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self._refs: frozenset[str] | None = None
        self._histories: dict[str, list[tuple[int, str]] | None] = {}
        self._descendants: dict[str, list[tuple[int, str, list[str]]] | None] = {}
        self._holding: dict[str, str | None] = {}

    def refs(self) -> frozenset[str]:
        """The branches and remote-tracking branches that name a commit."""
        if self._refs is None:
            listed = _text(
                self.git_dir,
                "for-each-ref",
                "--format=%(objecttype) %(refname)",
                "refs/heads",
                "refs/remotes",
                check=False,
            )
            self._refs = frozenset(
                ref
                for kind, _, ref in (
                    line.partition(" ") for line in listed.splitlines()
                )
                if kind == "commit"
            )
        return self._refs

    def holding(self, sha: str) -> str | None:
        """:func:`branch_holding`, asked once a commit."""
        if sha not in self._holding:
            self._holding[sha] = branch_holding(self.git_dir, sha)
        return self._holding[sha]

    def descendants(self, base: str) -> list[tuple[int, str, list[str]]] | None:
        """The commits of every branch that descend from ``base`` as (commit
        time, sha, parents), newest first; None when too many to hold."""
        if base not in self._descendants:
            result = git(
                "rev-list",
                "--parents",
                "--ancestry-path",
                "--format=%ct",
                "--branches",
                "--remotes",
                "--end-of-options",
                f"^{base}",
                git_dir=self.git_dir,
                timeout=TIMEOUT,
                output_cap=HISTORY_CAP,
                truncate=True,
                check=False,
            )
            found = None
            if result.returncode == 0 and not result.truncated:
                # Two lines a commit: "commit <sha> <parents>", then its time.
                lines = result.stdout.decode("ascii", "replace").splitlines()
                found = []
                for header, when in zip(lines[::2], lines[1::2], strict=False):
                    _, sha, *parents = header.split()
                    found.append((int(when), sha, parents))
            self._descendants[base] = found
        return self._descendants[base]

    def history(self, ref: str) -> list[tuple[int, str]] | None:
        """``ref``'s first-parent history as (commit time, sha), newest
        first; None when it is too long to hold (asked per session then)."""
        if ref not in self._histories:
            result = git(
                "rev-list",
                "--first-parent",
                "--format=%ct %H",
                "--no-commit-header",
                "--end-of-options",
                ref,
                git_dir=self.git_dir,
                timeout=TIMEOUT,
                output_cap=HISTORY_CAP,
                truncate=True,
                check=False,
            )
            walked = None
            if result.returncode == 0 and not result.truncated:
                walked = []
                for line in result.stdout.decode("ascii", "replace").splitlines():
                    when, _, sha = line.partition(" ")
                    walked.append((int(when), sha))
            self._histories[ref] = walked
        return self._histories[ref]


def branch_ref(
    git_dir: Path, branch: str, lookups: Lookups | None = None
) -> str | None:
    """The full ref a transcript's branch name stands for here, or None."""
    if not _SAFE_BRANCH.fullmatch(branch) or branch.startswith("-"):
        return None
    if lookups is not None:
        # Only a name git listed is returned: the transcript's text is
        # compared with it, never handed to git.
        known = lookups.refs()
        for ref in (f"refs/heads/{branch}", f"refs/remotes/origin/{branch}"):
            if ref in known:
                return ref
        return None
    checked = git("check-ref-format", "--branch", branch, git_dir=git_dir, check=False)
    if checked.returncode != 0:
        return None
    for ref in (f"refs/heads/{branch}", f"refs/remotes/origin/{branch}"):
        if _text(
            git_dir,
            "rev-parse",
            "--verify",
            "--quiet",
            f"{ref}^{{commit}}",
            check=False,
        ):
            return ref
    return None


def _epoch(moment: datetime) -> str:
    return f"@{int(moment.timestamp())}"


def last_before(
    git_dir: Path, ref: str, moment: datetime, lookups: Lookups | None = None
) -> str | None:
    """The last commit of ``ref`` committed at or before ``moment``: the
    first one of its first-parent history that is (``rev-list --before``)."""
    history = lookups.history(ref) if lookups is not None else None
    if history is not None:
        limit = int(moment.timestamp())
        return next((sha for when, sha in history if when <= limit), None)
    found = _text(
        git_dir,
        "rev-list",
        "-1",
        "--first-parent",
        f"--before={_epoch(moment)}",
        "--end-of-options",
        ref,
        check=False,
    )
    return found or None


def made_after(
    git_dir: Path,
    base: str,
    *,
    start: datetime,
    end: datetime,
    lookups: Lookups | None = None,
) -> list[tuple[str, list[str]]]:
    """The commits of any branch (local or remote-tracking) that descend from
    ``base`` and were committed between ``start`` and ``end``, newest first,
    each with its parents."""
    require_sha(base)
    descendants = lookups.descendants(base) if lookups is not None else None
    if descendants is not None:
        low, high = int(start.timestamp()), int(end.timestamp())
        return [
            (sha, parents) for when, sha, parents in descendants if low <= when <= high
        ]
    listed = _text(
        git_dir,
        "rev-list",
        "--parents",
        "--ancestry-path",
        f"--since={_epoch(start)}",
        f"--until={_epoch(end)}",
        "--branches",
        "--remotes",
        "--end-of-options",
        f"^{base}",
        check=False,
    )
    found = []
    for line in listed.splitlines():
        sha, *parents = line.split()
        found.append((sha, parents))
    return found


def tips(commits: list[tuple[str, list[str]]]) -> list[str]:
    """Those of ``commits`` that no other of them has as a parent: one when
    they are one line of work (a session's commits one after the other)."""
    parents = {p for _, given in commits for p in given}
    return [sha for sha, _ in commits if sha not in parents]


def branch_holding(git_dir: Path, sha: str) -> str | None:
    """A branch whose history holds ``sha``: a local one first."""
    require_sha(sha)
    refs = _text(
        git_dir,
        "for-each-ref",
        f"--contains={sha}",
        "--format=%(refname)",
        "refs/heads",
        "refs/remotes",
        check=False,
    ).split()
    for prefix in ("refs/heads/", "refs/remotes/"):
        for ref in refs:
            if ref.startswith(prefix) and not ref.endswith("/HEAD"):
                return ref.removeprefix(prefix)
    return None


def full_sha(git_dir: Path, sha: str) -> str | None:
    """``sha`` (a hex prefix) as the full name of a commit here, or None (for
    a name that is not hex too)."""
    if not _is_sha(sha):
        return None
    found = _text(
        git_dir, "rev-parse", "--verify", "--quiet", f"{sha}^{{commit}}", check=False
    )
    return found or None


def parent(git_dir: Path, sha: str) -> str | None:
    require_sha(sha)
    found = _text(
        git_dir, "rev-parse", "--verify", "--quiet", f"{sha}^1^{{commit}}", check=False
    )
    return found or None


def offset_of(git_dir: Path, sha: str) -> str:
    """The author date's zone of a commit (``+0200``), or ""."""
    require_sha(sha)
    return _text(git_dir, "log", "-1", "--format=%ad", "--date=format:%z", sha)


def apply_patch(git_dir: Path, base: str, patch: str, *, label: str) -> tuple[str, str]:
    """The commit and the tree of ``patch`` applied at ``base``, made in a
    temporary git dir that borrows the repository's objects: the repository
    is only read. PatchRefused when git will not apply it, GitError when the
    repository cannot be read."""
    if not _is_sha(base):
        raise PatchRefused(f"the base commit {shown(base)} is not a commit sha")
    full = full_sha(git_dir, base)
    if full is None:
        raise PatchRefused(f"the base commit {base} is not in the project repository")
    with borrowing(git_dir) as scratch:
        tree = patched_tree(scratch, full, patch)
        return patched_commit(scratch, full, tree, label=label), tree


__all__ = [
    "GitError",
    "Lookups",
    "PatchRefused",
    "apply_patch",
    "branch_holding",
    "branch_ref",
    "fill",
    "full_sha",
    "last_before",
    "made_after",
    "offset_of",
    "parent",
]


def _base_time(draft: RecordDraft, git_dir: Path) -> None:
    """``started_at`` from the base commit's date, for a record with no time
    of its own and no file time (the same body sent twice is the same
    record); a note when there is no base to take it from."""
    base = draft.record.get("base_sha")
    found = full_sha(git_dir, base) if isinstance(base, str) and base else None
    if found is None:
        draft.notes.append("no time to record the run under: no base commit here")
        return
    when = moment(_text(git_dir, "log", "-1", "--format=%cI", found))
    if when is None:
        draft.notes.append("no time to record the run under")
        return
    draft.infer(
        "started_at",
        iso(when),
        f"the record has no time and was sent without a file time; this is "
        f"the base commit {found[:12]}'s date",
    )


# A person reads the change and commits it after the session's last line.
AFTER = timedelta(minutes=30)


def fill(draft: RecordDraft, git_dir: Path, lookups: Lookups | None = None) -> None:
    """Complete ``draft`` from the repository: apply its patch, turn the
    commits it names into full shas, find a base and an original it lacks.
    Each field found here is recorded in ``draft.inferred`` with how, and what
    could not be found in ``draft.notes``. PatchRefused when a patch does not
    apply."""
    search, record = draft.search, draft.record
    if search.time_from_base and "started_at" not in record:
        _base_time(draft, git_dir)
    if search.patch is not None:
        base = record.get("base_sha")
        if not search.patch.strip():
            draft.notes.append("the submission is empty: the run has no original")
        elif not base:
            draft.notes.append("no base commit to apply the submitted patch at")
        else:
            record["original_commit"], tree = apply_patch(
                git_dir, base, search.patch, label=search.patch_label
            )
            draft.applied = (search.patch, tree)
    if search.commits:
        named = [(sha, full_sha(git_dir, sha)) for sha in search.commits]
        for sha, full in named:
            if full is None:
                draft.notes.append(f"commit {sha} named in the transcript is not here")
        present = [full for _, full in named if full]
        if present:
            record["original_commit"] = present[-1]
            draft.applied = None
            first = parent(git_dir, present[0])
            if first and "base_sha" not in record:
                draft.infer(
                    "base_sha",
                    first,
                    f"the parent of {present[0][:12]}, the first commit the "
                    "transcript names; work done before it and not committed "
                    "would be missing",
                )
    ref = branch_ref(git_dir, search.branch, lookups) if search.branch else None
    if search.branch and ref is None:
        draft.notes.append(
            f"the branch {shown(search.branch)} is not in the project repository"
        )
    if search.find_base and "base_sha" not in record:
        base = (
            last_before(git_dir, ref, search.start, lookups)
            if ref and search.start
            else None
        )
        if base:
            draft.infer(
                "base_sha",
                base,
                f"the last commit of {shown(search.branch)} before the session "
                f"started ({iso(search.start)})"
                if search.start
                else "",
            )
        else:
            draft.notes.append("no base commit was found for the session")
    if search.find_original and "original_commit" not in record:
        _find_original(draft, git_dir, lookups)


def _find_original(
    draft: RecordDraft, git_dir: Path, lookups: Lookups | None = None
) -> None:
    """The original: the one line of commits, on any branch, that descends
    from the base and was committed during the session or within
    :data:`AFTER` of its end; its last commit. None found, or several lines
    of work, is a note saying how to name it."""
    search, record = draft.search, draft.record
    base = record.get("base_sha")
    if not (isinstance(base, str) and _is_sha(base) and search.start and search.end):
        draft.notes.append(
            "no base commit to look for the original from: name it with "
            "--original <sha>"
        )
        return
    until = search.end + AFTER
    window = (
        f"between {iso(search.start)} and {iso(until)} (the session and "
        f"{int(AFTER.total_seconds() // 60)} minutes after it)"
    )
    commits = made_after(git_dir, base, start=search.start, end=until, lookups=lookups)
    ends = tips(commits)
    if not ends:
        draft.notes.append(
            f"no commit descending from the base {base[:12]} was made on any "
            f"branch {window}: the run has no original commit; name it with "
            "--original <sha>"
        )
        return
    if len(ends) > 1:
        shas = ", ".join(sha[:12] for sha in ends[:5])
        draft.notes.append(
            f"{len(ends)} lines of work descend from the base {base[:12]} "
            f"{window}, ending at {shas}: the run has no original commit; name "
            "the right one with --original <sha>"
        )
        return
    rule = (
        f"the last commit of the one line of work descending from the base "
        f"{base[:12]} on any branch {window}"
    )
    draft.infer("original_commit", ends[0], rule)
    if lookups is not None:
        branch = lookups.holding(ends[0])
    else:
        branch = branch_holding(git_dir, ends[0])
    if branch and branch != record.get("original_branch"):
        draft.infer("original_branch", branch, f"the branch holding {ends[0][:12]}")
